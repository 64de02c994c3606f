// 6 + 7. The simulator: its speed as the cluster grows (the cluster of src/sim/speed.ts: 3
// masters with the api-server, a DaemonSet parent on every node, a fault every 20 virtual minutes)
// at 3, 30 and 300 nodes, and every named scenario run with each strategy over seeds 1..30, side
// by side.
import { NAMED, namedScenario, runScenario, runSeeds, SCENARIO_NAMES, type SeedsSummary, STRATEGIES } from '../../src/sim/index.js';
import { speedScenario } from '../../src/sim/speed.js';
import { type Summary, summarize } from '../lib/util.js';

export interface SpeedFigures {
  nodes: number;
  virtualHours: number;
  trials: number;
  eventsPerWallSecond: Summary;
  virtualSecondsPerWallSecond: Summary;
  events: number;
  violations: number;
}

/**
 * Every size's trials interleaved (3, 30, 300, 3, 30, 300, ...), so a noisy stretch of a shared
 * machine spreads over all sizes instead of one; figures are over the trials.
 */
export async function simSpeed(sizes: Array<{ nodes: number; hours: number }>, trials: number): Promise<SpeedFigures[]> {
  await runScenario(speedScenario(3, 1 / 6), { keepLogs: false }); // warm-up (10 virtual minutes): let the JIT compile first
  const runs = sizes.map(() => ({ rates: [] as number[], events: [] as number[], count: 0, violations: 0 }));
  for (let t = 0; t < trials; t++) {
    for (const [i, size] of sizes.entries()) {
      const scenario = speedScenario(size.nodes, size.hours);
      const t0 = performance.now();
      const res = await runScenario(scenario, { keepLogs: false });
      const wall = (performance.now() - t0) / 1000;
      const r = runs[i]!;
      r.rates.push(res.endedAt / wall);
      r.events.push(res.events / wall);
      r.count = res.events;
      r.violations = Math.max(r.violations, res.invariantViolations.length);
    }
  }
  return sizes.map((size, i) => ({
    nodes: size.nodes,
    virtualHours: size.hours,
    trials,
    eventsPerWallSecond: summarize(runs[i]!.events),
    virtualSecondsPerWallSecond: summarize(runs[i]!.rates),
    events: runs[i]!.count,
    violations: runs[i]!.violations,
  }));
}

/** One named scenario and strategy over seeds 1..seeds: the spread of the focus key's figures. */
export type ScenarioRow = SeedsSummary & { violatingSeeds: number[] };

/** Seeds per scenario and strategy in the bench: 30 x 10 scenarios x 3 strategies runs in about 15 s. */
export const SIM_SEEDS = 30;

export async function simScenarios(seeds = SIM_SEEDS): Promise<ScenarioRow[]> {
  const rows: ScenarioRow[] = [];
  for (const name of SCENARIO_NAMES) {
    if (!NAMED[name]) continue;
    for (const strategy of STRATEGIES) rows.push(await runSeeds(namedScenario(name)!, 1, seeds, strategy));
  }
  return rows;
}
