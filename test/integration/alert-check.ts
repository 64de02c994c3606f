// The alert rules evaluated on a real agent's metrics: a test scrapes the agent's /metrics at a few
// moments of a fault (phases), and this turns the scrapes into the series Prometheus would have
// stored (the agent's samples plus the job, instance and node labels the scrape configuration adds,
// and `up`), held for a number of minutes per phase, and runs promtool's rule engine on them with
// the expectations given. Metric names or labels in deploy/monitoring/rules.yaml that drifted from
// the code make an expected alert go missing.
//
// The rules are used as they are, less their annotations: those are checked by the unit tests
// (test/monitoring/rules.test.yaml); here only which alerts fire, with which labels, matters.
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { alertRules, type PromtoolResult, promtool, ROOT } from '../monitoring/promtool.js';

/** Each phase is held this many minutes (1 sample a minute): longer than the longest `for:` (10m). */
export const PHASE_MINUTES = 12;

export interface Phase {
  name: string;
  /** The agent's /metrics text at that moment. */
  metrics: string;
}

export interface Expectation {
  /** Minutes after the phase began. */
  phase: string;
  minute: number;
  alertname: string;
  /** The labels of each firing alert beyond the series' job, instance and node (empty list: quiet). */
  alerts: Array<Record<string, string>>;
}

/** `name{labels} value` lines of the lastseen_ metrics (the agent's own; the runtime's are left out). */
export function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = line.match(/^(lastseen_[a-zA-Z0-9_]*)(\{.*\})?\s+(\S+)$/);
    if (m) out.set(`${m[1]}${m[2] ?? '{}'}`, Number(m[3]));
  }
  return out;
}

/**
 * The queries of deploy/monitoring/dashboard.json as Prometheus runs them: Grafana's variables
 * replaced by what they stand for (all nodes; a 5 min rate interval).
 */
export function dashboardQueries(): string[] {
  const dash = JSON.parse(readFileSync(`${ROOT}deploy/monitoring/dashboard.json`, 'utf8')) as { panels: Array<{ targets: Array<{ expr: string }> }> };
  return dash.panels.flatMap((p) => p.targets.map((t) => t.expr.replaceAll('$node', '.*').replaceAll('$__rate_interval', '5m')));
}

function withLabels(series: string, extra: string): string {
  const open = series.indexOf('{');
  const inner = series.slice(open + 1, -1);
  return `${series.slice(0, open)}{${extra}${inner ? `,${inner}` : ''}}`;
}

/** PromQL queries that must parse and return at least one series at that moment. */
export interface NonEmpty {
  phase: string;
  minute: number;
  exprs: string[];
}

export async function evaluateAlerts(o: {
  node: string;
  instance: string;
  phases: Phase[];
  expect: Expectation[];
  nonEmpty?: NonEmpty[];
}): Promise<PromtoolResult & { testFile: string; ms: number }> {
  const target = { job: 'lastseen-agent', instance: o.instance, node: o.node };
  const extra = Object.entries(target)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');
  const per = o.phases.map((p) => samples(p.metrics));
  const keys = [...new Set(per.flatMap((s) => [...s.keys()]))].sort();
  const hold = (v: number | undefined) => `${v === undefined ? '_' : v}x${PHASE_MINUTES - 1}`;
  const inputSeries = [
    { series: withLabels('up{}', extra), values: per.map(() => hold(1)).join(' ') },
    ...keys.map((k) => ({ series: withLabels(k, extra), values: per.map((s) => hold(s.get(k))).join(' ') })),
  ];
  const start = (phase: string) => {
    const i = o.phases.findIndex((p) => p.name === phase);
    if (i < 0) throw new Error(`no phase ${phase}`);
    return i * PHASE_MINUTES;
  };
  const rules = alertRules().map(({ annotations: _, ...r }) => r);
  const dir = await mkdtemp(join(tmpdir(), 'lastseen-alerts-'));
  await writeFile(join(dir, 'rules.yaml'), stringify({ groups: [{ name: 'lastseen', rules }] }));
  const testFile = join(dir, 'scraped.test.yaml');
  await writeFile(
    testFile,
    stringify({
      rule_files: ['rules.yaml'],
      evaluation_interval: '1m',
      tests: [
        {
          name: `scraped from a real agent: ${o.phases.map((p) => p.name).join(', ')}`,
          interval: '1m',
          input_series: inputSeries,
          alert_rule_test: o.expect.map((e) => {
            const severity = alertRules().find((r) => r.alert === e.alertname)?.labels.severity;
            if (!severity) throw new Error(`no alert ${e.alertname} in the rules`);
            return {
              eval_time: `${start(e.phase) + e.minute}m`,
              alertname: e.alertname,
              exp_alerts: e.alerts.map((labels) => ({ exp_labels: { ...target, severity, ...labels } })),
            };
          }),
          promql_expr_test: (o.nonEmpty ?? []).flatMap((q) =>
            q.exprs.map((expr) => ({ expr: `count(${expr}) > bool 0`, eval_time: `${start(q.phase) + q.minute}m`, exp_samples: [{ labels: '{}', value: 1 }] })),
          ),
        },
      ],
    }),
  );
  const t0 = Date.now();
  const result = promtool(['test', 'rules', testFile], dir);
  return { ...result, testFile, ms: Date.now() - t0 };
}
