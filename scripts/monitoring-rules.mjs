#!/usr/bin/env node
// Writes deploy/monitoring/prometheusrule.yaml (the prometheus-operator CRD) from
// deploy/monitoring/rules.yaml (the plain rules file, the one source), comments included.
//
//   node scripts/monitoring-rules.mjs           write the PrometheusRule
//   node scripts/monitoring-rules.mjs --check   exit 1 when the committed file differs (npm test runs this)
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Document, parseDocument } from 'yaml';

const dir = fileURLToPath(new URL('../deploy/monitoring/', import.meta.url));
const SOURCE = `${dir}rules.yaml`;
const TARGET = `${dir}prometheusrule.yaml`;

export function prometheusRule(rulesText) {
  const src = parseDocument(rulesText);
  if (src.errors.length > 0) throw new Error(`${SOURCE}: ${src.errors[0].message}`);
  const out = new Document({
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: {
      name: 'lastseen',
      namespace: 'lastseen-system',
      labels: { 'app.kubernetes.io/name': 'lastseen', 'app.kubernetes.io/component': 'monitoring' },
    },
    spec: {},
  });
  // The groups node itself, so the comments that explain each threshold travel with it.
  out.setIn(['spec', 'groups'], src.get('groups', true));
  out.commentBefore =
    ' Generated from rules.yaml by `node scripts/monitoring-rules.mjs`: edit rules.yaml, then run it.\n' +
    ' The same alerts as a prometheus-operator PrometheusRule; README "Monitoring" explains them.';
  return out.toString({ lineWidth: 100 });
}

const want = prometheusRule(readFileSync(SOURCE, 'utf8'));
if (process.argv.includes('--check')) {
  let have = '';
  try {
    have = readFileSync(TARGET, 'utf8');
  } catch {}
  if (have !== want) {
    process.stderr.write(`${TARGET} is not what rules.yaml generates; run: node scripts/monitoring-rules.mjs\n`);
    process.exit(1);
  }
} else {
  writeFileSync(TARGET, want);
}
