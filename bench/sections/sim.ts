// 6 + 7. The simulator: virtual seconds per wall second for 3 and 30 masters (the scenario of
// src/sim/speed.ts, widened), and every named scenario run with each strategy over seeds 1..30,
// side by side.
import {
  NAMED,
  namedScenario,
  parseScenario,
  runScenario,
  runSeeds,
  SCENARIO_NAMES,
  type ScenarioInput,
  type SeedsSummary,
  STRATEGIES,
} from '../../src/sim/index.js';
import { type Summary, summarize } from '../lib/util.js';

export interface SpeedFigures {
  masters: number;
  virtualHours: number;
  trials: number;
  virtualSecondsPerWallSecond: Summary;
  events: number;
  violations: number;
}

/** measureSpeed()'s world (api-server and CNI parents, a fault every 20 minutes in turn), with `masters` nodes. */
function speedScenario(masters: number, hours: number) {
  const faults: NonNullable<ScenarioInput['faults']> = [];
  const kinds = ['reboot', 'partition', 'stall-watch', 'agent-restart'] as const;
  for (let i = 0, at = 20 * 60_000; at < hours * 3_600_000 - 20 * 60_000; i++, at += 20 * 60_000) {
    const node = `m${(i % masters) + 1}`;
    const k = kinds[i % kinds.length]!;
    if (k === 'reboot') faults.push({ type: k, at, node, down: 40_000 });
    else if (k === 'agent-restart') faults.push({ type: k, at, node });
    else faults.push({ type: k, at, node, duration: 120_000 });
  }
  const r = parseScenario({
    name: `speed-${masters}m`,
    duration: hours * 3_600_000,
    nodes: Array.from({ length: masters }, (_, i) => ({ name: `m${i + 1}`, master: true })),
    parents: [
      { key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } },
      { key: 'kube-flannel', kind: 'app' },
    ],
    faults,
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

export async function simSpeed(masters: number, hours: number, trials: number): Promise<SpeedFigures> {
  const scenario = speedScenario(masters, hours);
  await runScenario(speedScenario(3, 1 / 6), { keepLogs: false }); // warm-up (10 virtual minutes): let the JIT compile first
  const rates: number[] = [];
  let events = 0;
  let violations = 0;
  for (let t = 0; t < trials; t++) {
    const t0 = performance.now();
    const res = await runScenario(scenario, { keepLogs: false });
    const wall = (performance.now() - t0) / 1000;
    rates.push(res.endedAt / wall);
    events = res.events;
    violations = Math.max(violations, res.invariantViolations.length);
  }
  return { masters, virtualHours: hours, trials, virtualSecondsPerWallSecond: summarize(rates), events, violations };
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
