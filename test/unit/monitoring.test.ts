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
import { CoverageWatch } from '../../src/agent/coverage.js';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { HANDOVER_ATTEMPTS_BEFORE_GROWTH } from '../../src/core/decide.js';
import { memoryLogger } from '../../src/core/fake-time.test-helpers.js';
import { start } from '../../src/core/fixtures.test-helpers.js';
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

/** What an agent with one parent serves on /metrics (the same registry runAgent serves). */
async function agentMetricNames(): Promise<Set<string>> {
  const metrics = new AgentMetrics();
  const { log } = await memoryLogger();
  const coverage = new CoverageWatch({ metrics, log, onChange: () => {} });
  const view = { id: 'kube-system/kube-apiserver', namespace: 'kube-system', key: 'kube-apiserver', state: start(), pod: {}, labels: {}, overrides: [] };
  metrics.observe([view], 0);
  coverage.observe([view]);
  const text = await metrics.registry.metrics();
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
}

describe('dashboard (content)', () => {
  const dash = JSON.parse(readFileSync(`${ROOT}deploy/monitoring/dashboard.json`, 'utf8')) as {
    panels: Array<{ title: string; type: string; targets: Array<{ expr: string }>; fieldConfig?: { defaults?: { unit?: string }; overrides?: unknown[] } }>;
  };

  it("every panel's metric is on the agent's /metrics (or is Prometheus' up)", async () => {
    const served = await agentMetricNames();
    expect(served.has('lastseen_parent_covered')).toBe(true);
    for (const p of dash.panels) {
      const named = p.targets.flatMap((t) => [...t.expr.matchAll(/\b(lastseen_[a-z_]+|up)\b/g)].map((m) => m[1]!));
      expect(named.length, p.title).toBeGreaterThan(0);
      for (const n of named) if (n !== 'up') expect(served, `${p.title}: ${n}`).toContain(n.replace(/_(bucket|sum|count)$/, ''));
    }
  });

  it('a stat row answers "is the fleet covered": agents up, parents covered, checkpoints active, policy valid', () => {
    const stats = dash.panels.filter((p) => p.type === 'stat').map((p) => p.title);
    expect(stats).toEqual(expect.arrayContaining(['Agents up', 'Parents covered', 'Checkpoints active', 'Policy valid']));
  });

  it('one unit per panel (no per-series unit overrides), and no 0/1 gauge drawn on a counter axis', () => {
    const gauges01 = ['lastseen_policy_valid', 'lastseen_policy_missing', 'lastseen_checkpoint_active', 'lastseen_api_reachable', 'lastseen_watch_healthy'];
    for (const p of dash.panels) {
      expect(p.fieldConfig?.defaults?.unit, p.title).toBeTruthy();
      expect(JSON.stringify(p.fieldConfig?.overrides ?? []), p.title).not.toContain('unit');
      if (p.type !== 'timeseries') continue;
      const exprs = p.targets.map((t) => t.expr);
      const mixes = exprs.some((e) => gauges01.some((g) => e.includes(g))) && exprs.some((e) => /_total\b/.test(e));
      expect(mixes, `${p.title} mixes a 0/1 gauge with counts`).toBe(false);
    }
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

  it('every alert has a runbook_url to its runbook in docs/runbooks/, which says what it means, how to check and what to do', () => {
    const index = readFileSync(`${ROOT}docs/runbooks/README.md`, 'utf8');
    for (const r of alertRules()) {
      const url = r.annotations.runbook_url;
      expect(url, `${r.alert} has a runbook_url`).toMatch(/^docs\/runbooks\/[a-z0-9-]+\.md$/);
      const page = readFileSync(`${ROOT}${url}`, 'utf8');
      expect(page, url).toContain(`# ${r.alert}`);
      for (const section of ['## What it means', '## How to check', '## What to do']) expect(page, `${url}: ${section}`).toContain(section);
      expect(index, `docs/runbooks/README.md lists ${r.alert}`).toContain(url!.replace('docs/runbooks/', ''));
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
    expect(ms(rule('LastseenParentUncovered').for)).toBe(d.startTimeoutMs);
    expect(ms(rule('LastseenRolloutHeld').for)).toBe(d.handoverBackoff.maxMs);
    expect(rule('LastseenHandoversFailing').expr).toContain(`>= ${HANDOVER_ATTEMPTS_BEFORE_GROWTH + 1}`);
    const bad = rule('LastseenBadInputsPilingUp').expr.match(/\[(\w+)\]\) > (\d+)$/);
    expect(bad, 'LastseenBadInputsPilingUp: increase(...[RANGE]) > N').not.toBeNull();
    expect(Number(bad![2])).toBe(ms(bad![1]) / d.windowMs);
  });
});
