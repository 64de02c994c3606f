// A scenario run once per seed, summarised: the spread of the focus key's figures over seeds.
// "Never" (null) is worse than any number, so it sorts last: a p90 is null when more than 10% of
// the seeds never got there, and a max is null as soon as one seed never did.
import { type RunResult, runScenario } from './run.js';
import type { Scenario } from './schema.js';
import type { StrategyName } from './strategies.js';

export interface Spread {
  min: number | null;
  p50: number | null;
  p90: number | null;
  max: number | null;
}

export interface SeedsSummary {
  scenario: string;
  strategy: StrategyName;
  seeds: number;
  /** Seeds whose run broke an invariant. */
  violations: number;
  outcome: { servedAt: Spread; parentServedAt: Spread; unservedSeconds: Spread };
}

/**
 * Nearest-rank percentile (p in (0, 100]) with null ranked above every number. Nearest rank, not
 * interpolation: there is nothing to interpolate between a number and "never".
 */
export function percentileOrNever(values: ReadonlyArray<number | null>, p: number): number | null {
  if (values.length === 0) return null;
  const s = sortNeverLast(values);
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[rank - 1]!;
}

function sortNeverLast(values: ReadonlyArray<number | null>): Array<number | null> {
  return [...values].sort((a, b) => (a === null ? (b === null ? 0 : 1) : b === null ? -1 : a - b));
}

export function spreadOf(values: ReadonlyArray<number | null>): Spread {
  if (values.length === 0) return { min: null, p50: null, p90: null, max: null };
  const s = sortNeverLast(values);
  return { min: s[0]!, p50: percentileOrNever(s, 50), p90: percentileOrNever(s, 90), max: s[s.length - 1]! };
}

/** Summarise finished runs (any order) of one scenario and strategy. */
export function summarizeRuns(runs: ReadonlyArray<Pick<RunResult, 'scenario' | 'strategy' | 'invariantViolations' | 'outcome'>>): SeedsSummary {
  const first = runs[0];
  if (!first) throw new Error('summarizeRuns: no runs to summarise');
  return {
    scenario: first.scenario,
    strategy: first.strategy,
    seeds: runs.length,
    violations: runs.filter((r) => r.invariantViolations.length > 0).length,
    outcome: {
      servedAt: spreadOf(runs.map((r) => r.outcome.servedAt)),
      parentServedAt: spreadOf(runs.map((r) => r.outcome.parentServedAt)),
      unservedSeconds: spreadOf(runs.map((r) => r.outcome.unservedSeconds)),
    },
  };
}

/** Run `scenario` once per seed in from..to (timeline off) and summarise; also the seeds that broke an invariant. */
export async function runSeeds(scenario: Scenario, from: number, to: number, strategy: StrategyName): Promise<SeedsSummary & { violatingSeeds: number[] }> {
  const runs: RunResult[] = [];
  const violatingSeeds: number[] = [];
  for (let seed = from; seed <= to; seed++) {
    const r = await runScenario(scenario, { seed, strategy, keepLogs: false });
    if (r.invariantViolations.length > 0) violatingSeeds.push(seed);
    runs.push(r);
  }
  return { ...summarizeRuns(runs), violatingSeeds };
}

/** The exit code of a seeds run: 1 when the lastseen strategy broke an invariant on any seed (the baselines are expected to). */
export function seedsExitCode(s: Pick<SeedsSummary, 'strategy' | 'violations'>): 0 | 1 {
  return s.violations > 0 && s.strategy === 'lastseen' ? 1 : 0;
}

/** One line per figure, for people: "servedAt  min 12  p50 40  p90 never  max never". */
export function formatSeedsSummary(s: SeedsSummary): string {
  const v = (x: number | null) => (x === null ? 'never' : String(x));
  const line = (label: string, d: Spread) => `  ${label.padEnd(16)} min ${v(d.min)}  p50 ${v(d.p50)}  p90 ${v(d.p90)}  max ${v(d.max)}`;
  return [
    `${s.scenario} (${s.strategy}), ${s.seeds} seeds: ${s.violations} with invariant violations; seconds after the first fault (never = not within the scenario):`,
    line('servedAt', s.outcome.servedAt),
    line('parentServedAt', s.outcome.parentServedAt),
    line('unservedSeconds', s.outcome.unservedSeconds),
  ].join('\n');
}
