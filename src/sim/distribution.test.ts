import { describe, expect, it } from 'vitest';
import { percentileOrNever, runSeeds, seedsExitCode, spreadOf, summarizeRuns } from './distribution.js';
import type { RunResult } from './run.js';
import { runScenario } from './run.js';
import { namedScenario } from './scenarios.js';

type Run = Pick<RunResult, 'scenario' | 'strategy' | 'invariantViolations' | 'outcome'>;

function run(servedAt: number | null, parentServedAt: number | null, unservedSeconds: number, violations = 0): Run {
  return {
    scenario: 's',
    strategy: 'lastseen',
    invariantViolations: Array.from({ length: violations }, () => ({
      invariant: 'x',
      t: 0,
      node: 'm1',
      key: 'k',
      message: 'm',
    })) as unknown as Run['invariantViolations'],
    outcome: {
      faultAt: 60,
      servedAt,
      parentServedAt,
      unservedSeconds,
      finalServedBy: 'parent',
      perFault: [],
      totals: { unservedSeconds, activations: 0, handoverAttempts: 0, checkpointGenerations: [], checkpointWhileParentAliveSeconds: 0 },
    },
  };
}

describe('percentileOrNever', () => {
  it('ranks never above every number, whatever the input order', async () => {
    expect(percentileOrNever([null, 3, 1, 2], 50)).toBe(2);
    expect(percentileOrNever([null, 3, 1, 2], 90)).toBeNull();
    expect(percentileOrNever([5], 90)).toBe(5);
    expect(percentileOrNever([], 50)).toBeNull();
  });

  it('p90 is null only when more than 10% never got there', async () => {
    const ten = [null, 9, 8, 7, 6, 5, 4, 3, 2, 1];
    expect(percentileOrNever(ten, 90)).toBe(9); // 1 of 10 never: the 9th value still is a number
    expect(percentileOrNever([null, ...ten.slice(1, 9), null], 90)).toBeNull(); // 2 of 10 never
  });
});

describe('spreadOf and summarizeRuns', () => {
  it('min, p50, p90, max with never counted worst', async () => {
    expect(spreadOf([4, null, 1, 2])).toEqual({ min: 1, p50: 2, p90: null, max: null });
    expect(spreadOf([null, null])).toEqual({ min: null, p50: null, p90: null, max: null });
  });

  it('counts seeds with violations, not violations, and summarises each figure', async () => {
    const s = summarizeRuns([run(10, 100, 5, 2), run(null, null, 900), run(20, 300, 8, 1), run(30, 200, 7)]);
    expect(s.seeds).toBe(4);
    expect(s.violations).toBe(2);
    expect(s.outcome.servedAt).toEqual({ min: 10, p50: 20, p90: null, max: null });
    expect(s.outcome.parentServedAt).toEqual({ min: 100, p50: 200, p90: null, max: null });
    expect(s.outcome.unservedSeconds).toEqual({ min: 5, p50: 7, p90: 900, max: 900 });
  });
});

describe('seedsExitCode', () => {
  it('fails lastseen on any violation, never the baselines', async () => {
    expect(seedsExitCode({ strategy: 'lastseen', violations: 1 })).toBe(1);
    expect(seedsExitCode({ strategy: 'lastseen', violations: 0 })).toBe(0);
    expect(seedsExitCode({ strategy: 'kubelet-pods', violations: 5 })).toBe(0);
  });
});

describe('runSeeds', () => {
  it('runs once per seed and agrees with the single runs', async () => {
    const sc = namedScenario('delete-last-apiserver')!;
    const s = await runSeeds(sc, 1, 5, 'kubelet-pods');
    expect(s.seeds).toBe(5);
    expect(s.strategy).toBe('kubelet-pods');
    expect(s.violations).toBe(s.violatingSeeds.length);
    const single: RunResult[] = [];
    for (const seed of [1, 2, 3, 4, 5]) single.push(await runScenario(sc, { seed, strategy: 'kubelet-pods', keepLogs: false }));
    expect(s.outcome).toEqual(summarizeRuns(single).outcome);
    expect(s.outcome.unservedSeconds.max).toBe(Math.max(...single.map((r) => r.outcome.unservedSeconds)));
  });
});
