/**
 * deploy/monitoring/ with the real promtool: the rules load, every alert's unit tests pass
 * (test/monitoring/rules.test.yaml), every alert has a test that fires it and one that keeps it
 * quiet, the PrometheusRule is exactly what rules.yaml generates, the rules name only metrics the
 * agent registers, and the thresholds are still the ones derived from the policy defaults.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { HANDOVER_ATTEMPTS_BEFORE_GROWTH } from '../../src/core/decide.js';
import { WATCHDOG_MS } from '../../src/kube/informer.js';
import { parseDuration } from '../../src/policy/duration.js';
import { BUILTIN_DEFAULTS } from '../../src/policy/policy.js';
import { type AlertRule, alertRules, promtool, ROOT, RULES } from '../monitoring/promtool.js';

const TESTS = `${ROOT}test/monitoring/rules.test.yaml`;

interface RuleTest {
  alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }>;
}

function ms(duration: string | undefined): number {
  const r = parseDuration(duration ?? '0s');
  if (!r.ok) throw new Error(`bad duration ${duration}: ${r.error}`);
  return r.ms;
}

function rule(name: string): AlertRule {
  const r = alertRules().find((a) => a.alert === name);
  if (!r) throw new Error(`no alert ${name} in ${RULES}`);
  return r;
}

describe('alert rules (promtool)', () => {
  it('promtool check rules accepts rules.yaml', () => {
    const r = promtool(['check', 'rules', RULES]);
    expect(r.output).toContain(`SUCCESS: ${alertRules().length} rules found`);
    expect(r.status).toBe(0);
  });

  it('promtool check config accepts the plain Prometheus example (scrape config and rule file)', () => {
    const r = promtool(['check', 'config', `${ROOT}deploy/monitoring/prometheus.yaml`]);
    expect(r.status, r.output).toBe(0);
  });

  it('promtool test rules: every alert fires when it should and stays quiet when it should not', () => {
    const r = promtool(['test', 'rules', TESTS]);
    expect(r.status, r.output).toBe(0);
    expect(r.output).toContain('SUCCESS');
  });

  it('every alert has a test where it fires and one where it stays quiet', () => {
    const doc = parse(readFileSync(TESTS, 'utf8')) as { tests: RuleTest[] };
    const cases = doc.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const { alert } of alertRules()) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${alert} fires in a test`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${alert} stays quiet in a test`,
      ).toBe(true);
    }
  });

  it('the PrometheusRule is generated from rules.yaml, and its spec passes promtool too', () => {
    const check = spawnSync(process.execPath, [`${ROOT}scripts/monitoring-rules.mjs`, '--check'], { encoding: 'utf8' });
    expect(check.status, check.stderr).toBe(0);
    const crd = parse(readFileSync(`${ROOT}deploy/monitoring/prometheusrule.yaml`, 'utf8')) as { kind: string; spec: unknown };
    expect(crd.kind).toBe('PrometheusRule');
    expect(crd.spec).toEqual(parse(readFileSync(RULES, 'utf8')));
    const file = join(mkdtempSync(join(tmpdir(), 'lastseen-rules-')), 'from-crd.yaml');
    writeFileSync(file, stringify(crd.spec));
    const r = promtool(['check', 'rules', file]);
    expect(r.status, r.output).toBe(0);
  });
});

describe('dashboard', () => {
  it('every query of dashboard.json parses (promtool, as recording rules); the fault suite runs them on scraped data', () => {
    const dash = JSON.parse(readFileSync(`${ROOT}deploy/monitoring/dashboard.json`, 'utf8')) as {
      panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
    };
    const exprs = dash.panels.flatMap((p) => p.targets.map((t) => t.expr.replaceAll('$node', '.*').replaceAll('$__rate_interval', '5m')));
    expect(exprs.length).toBeGreaterThanOrEqual(dash.panels.length);
    const file = join(mkdtempSync(join(tmpdir(), 'lastseen-dashboard-')), 'queries.yaml');
    writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `dashboard:query${i}`, expr })) }] }));
    const r = promtool(['check', 'rules', file]);
    expect(r.status, r.output).toBe(0);
  });
});

describe('alert rules (content)', () => {
  it('every alert has a severity, a summary and a description that says where to look', () => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    for (const r of alertRules()) {
      expect(['critical', 'warning'], r.alert).toContain(r.labels.severity);
      expect(r.annotations.summary, r.alert).toBeTruthy();
      expect(r.annotations.description, r.alert).toMatch(/README "[^"]+"/);
      for (const [, section] of r.annotations.description!.matchAll(/README "([^"]+)"/g))
        expect(readme, `${r.alert} points to README "${section}"`).toContain(`## ${section}`);
      expect(readme, `README explains ${r.alert}`).toContain(`\`${r.alert}\``);
    }
  });

  it('rules name only metrics the agent registers (src/agent/metrics.ts), or Prometheus up', () => {
    const registered = new Set([...readFileSync(`${ROOT}src/agent/metrics.ts`, 'utf8').matchAll(/name: '(lastseen_[a-z_]+)'/g)].map((m) => m[1]));
    expect(registered.size).toBeGreaterThan(5);
    for (const r of alertRules()) {
      const named = [...r.expr.matchAll(/\b(lastseen_[a-z_]+|up)\b/g)].map((m) => m[1]!);
      expect(named.length, r.alert).toBeGreaterThan(0);
      for (const n of named) if (n !== 'up') expect(registered, `${r.alert} uses ${n}`).toContain(n);
    }
  });

  // If a default changes, these fail: revisit the alert and README "Monitoring" together.
  it('thresholds still follow the policy defaults they are derived from', () => {
    const d = BUILTIN_DEFAULTS;
    expect(ms(rule('LastseenCheckpointActiveTooLong').for)).toBe(d.handoverBackoff.maxMs);
    expect(ms(rule('LastseenAgentDown').for)).toBe(d.handoverTimeoutMs);
    expect(ms(rule('LastseenApiServerUnreachable').for)).toBe(d.startTimeoutMs);
    expect(ms(rule('LastseenWatchUnhealthy').for)).toBe(2 * WATCHDOG_MS);
    expect(rule('LastseenHandoversFailing').expr).toContain(`>= ${HANDOVER_ATTEMPTS_BEFORE_GROWTH + 1}`);
    const bad = rule('LastseenBadInputsPilingUp').expr.match(/\[(\w+)\]\) > (\d+)$/);
    expect(bad, 'LastseenBadInputsPilingUp: increase(...[RANGE]) > N').not.toBeNull();
    expect(Number(bad![2])).toBe(ms(bad![1]) / d.windowMs);
  });
});
