// The real promtool for the rule tests (test/unit/monitoring.test.ts; test/integration/faults.test.ts through alert-check.ts),
// found through scripts/promtool, which builds it once from the Go module proxy. A missing promtool
// fails the test that needs it, with the command that gets one: never a skip.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const RULES = `${ROOT}deploy/monitoring/rules.yaml`;
/** promtool runs in a few hundred ms; a minute covers a machine shared by several test runs. */
const PROMTOOL_TIMEOUT_MS = 60_000;

export function promtoolPath(): string {
  const r = spawnSync(`${ROOT}scripts/promtool`, ['path'], { encoding: 'utf8' });
  if (r.status !== 0) {
    throw new Error(`promtool is not available: ${r.stderr.trim()}\nBuild it once (a few minutes, cached in ~/.cache/lastseen): scripts/promtool ensure`);
  }
  return r.stdout.trim();
}

export interface PromtoolResult {
  status: number | null;
  /** stdout and stderr together: promtool reports test failures on either. */
  output: string;
}

export function promtool(args: string[], cwd = ROOT): PromtoolResult {
  const r = spawnSync(promtoolPath(), args, { cwd, encoding: 'utf8', timeout: PROMTOOL_TIMEOUT_MS });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** The alerting rules of deploy/monitoring/rules.yaml. */
export function alertRules(): AlertRule[] {
  const doc = parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: AlertRule[] }> };
  return doc.groups.flatMap((g) => g.rules).filter((r) => typeof r.alert === 'string');
}
