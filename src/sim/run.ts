// One run of a scenario: build the world, bootstrap the cluster, schedule the faults, run to the
// end (or to the first violation when enforcing), then measure and judge.
import { scheduleFaults } from './faults.js';
import type { Violation } from './invariants.js';
import type { FaultOutcome, OutcomeFigures } from './outcome.js';
import type { Scenario } from './schema.js';
import type { StrategyName } from './strategies.js';
import { type CheckMode, type LogEntry, type Series, World } from './world.js';

export interface RunOptions {
  seed?: number;
  strategy?: StrategyName;
  /** Keep the timeline and chart series (default true). */
  keepLogs?: boolean;
  /** Override the scenario's duration. */
  durationMs?: number;
  /** How the invariants are checked (default incremental; `full` and `verify` for tests). */
  check?: CheckMode;
}

export interface RunResult {
  scenario: string;
  seed: number;
  strategy: StrategyName;
  invariantViolations: Violation[];
  outcome: OutcomeFigures;
  /** Expectations of the scenario that did not hold (judged for the lastseen strategy only). */
  expectationFailures: string[];
  verdict: 'pass' | 'fail';
  /** Virtual seconds simulated. */
  endedAt: number;
  events: number;
  logs: LogEntry[];
  series: Series;
  nodes: string[];
  keys: string[];
}

/** The default seed of a scenario without one. */
export const DEFAULT_SEED = 1;

/** A world for the scenario with its cluster bootstrapped and its faults scheduled: where every run starts. */
export function startWorld(scenario: Scenario, seed: number, strategy: StrategyName = 'lastseen', keepLogs = true, check?: CheckMode): World {
  const w = new World(scenario, seed, strategy, keepLogs, check);
  w.bootstrap();
  scheduleFaults(w);
  return w;
}

/**
 * Run the world's events up to `until` (ms), the promise callbacks each one releases settled
 * before time moves on, the invariants checked after each. False: a violation stopped it (enforcing).
 */
export function runWorld(w: World, until: number): Promise<boolean> {
  return w.q.runUntil(
    until,
    () => w.afterEvent(),
    () => w.settle(),
  );
}

export async function runScenario(scenario: Scenario, opts: RunOptions = {}): Promise<RunResult> {
  const seed = opts.seed ?? scenario.spec.seed ?? DEFAULT_SEED;
  const strategy = opts.strategy ?? 'lastseen';
  const w = startWorld(scenario, seed, strategy, opts.keepLogs ?? true, opts.check);
  const end = opts.durationMs ?? scenario.spec.duration;
  await runWorld(w, end);
  const outcome = w.outcome.figures(w.q.now);
  const expectationFailures = strategy === 'lastseen' ? judge(scenario, outcome, w) : [];
  const violations = w.invariants.violations;
  return {
    scenario: scenario.spec.name,
    seed,
    strategy,
    invariantViolations: violations,
    outcome,
    expectationFailures,
    verdict: strategy === 'lastseen' && (violations.length > 0 || expectationFailures.length > 0) ? 'fail' : 'pass',
    endedAt: w.q.now / 1000,
    events: w.q.executed,
    logs: w.logs,
    series: w.series,
    nodes: [...w.nodes.keys()],
    keys: scenario.parents.map((p) => p.key),
  };
}

function judge(s: Scenario, o: OutcomeFigures, w: World): string[] {
  const e = s.spec.expect;
  const out: string[] = [];
  if (e.served === true && o.servedAt === null) out.push('expected the key to be served again; it was not');
  if (e.served === false && o.servedAt !== null && o.servedAt > 0) out.push('expected the key not to be served again; it was');
  if (e.parentServed === true && o.parentServedAt === null) out.push('expected the parent to serve again; it did not');
  if (e.parentServed === false && o.parentServedAt !== null && o.parentServedAt > 0) out.push('expected the parent not to serve again; it did');
  if (e.maxServedAt !== undefined && (o.servedAt === null || o.servedAt * 1000 > e.maxServedAt))
    out.push(`expected servedAt <= ${e.maxServedAt / 1000}s, got ${o.servedAt}`);
  if (e.maxParentServedAt !== undefined && (o.parentServedAt === null || o.parentServedAt * 1000 > e.maxParentServedAt)) {
    out.push(`expected parentServedAt <= ${e.maxParentServedAt / 1000}s, got ${o.parentServedAt}`);
  }
  if (e.maxUnserved !== undefined && o.unservedSeconds * 1000 > e.maxUnserved)
    out.push(`expected at most ${e.maxUnserved / 1000}s unserved in total, got ${o.unservedSeconds}`);
  if (e.noActivation) {
    const { node, key } = s.spec.focus ?? s.focus;
    const activated = w.logs.some((l) => l.node === node && l.key === key && l.kind === 'core' && / -> Active/.test(l.text) && l.t >= (w.firstFaultAt ?? 0));
    if (activated) out.push('expected no activation of the checkpoint; there was one');
  }
  for (const fe of e.faults) out.push(...judgeFault(fe, o.perFault.find((f) => f.index === fe.fault)!));
  if (e.checkpointGeneration !== undefined) {
    const { node, key } = s.focus;
    const def = w.parentDef(key);
    const cp = w.nodes.get(node)!.disk.checkpoints.get(`${def.namespace}/${key}`);
    if (cp?.spec.generation !== e.checkpointGeneration)
      out.push(`expected the stored checkpoint to be generation ${e.checkpointGeneration}, got ${cp?.spec.generation ?? 'none'}`);
  }
  return out;
}

type FaultExpectation = Scenario['spec']['expect']['faults'][number];

/** One fault's expectations against its figures; each message names the fault and the figure. */
function judgeFault(e: FaultExpectation, f: FaultOutcome): string[] {
  const out: string[] = [];
  const say = (m: string) => out.push(`fault ${f.index} (${f.type} at ${f.at}s, window until ${f.until}s): ${m}`);
  const within = (v: number | null) => (v === null ? 'not within the window' : `${v}s`);
  if (e.served === true && f.servedAt === null) say('expected the key to be served again within the window; it was not');
  if (e.served === false && f.servedAt !== null && f.servedAt > 0) say(`expected the key not to be served again; it was, after ${f.servedAt}s`);
  if (e.parentServed === true && f.parentServedAt === null) say('expected the parent to serve again within the window; it did not');
  if (e.parentServed === false && f.parentServedAt !== null && f.parentServedAt > 0)
    say(`expected the parent not to serve again; it did, after ${f.parentServedAt}s`);
  if (e.maxServedAt !== undefined && (f.servedAt === null || f.servedAt * 1000 > e.maxServedAt))
    say(`expected servedAt <= ${e.maxServedAt / 1000}s, got ${within(f.servedAt)}`);
  if (e.maxParentServedAt !== undefined && (f.parentServedAt === null || f.parentServedAt * 1000 > e.maxParentServedAt))
    say(`expected parentServedAt <= ${e.maxParentServedAt / 1000}s, got ${within(f.parentServedAt)}`);
  if (e.maxUnserved !== undefined && f.unservedSeconds * 1000 > e.maxUnserved) say(`expected unserved <= ${e.maxUnserved / 1000}s, got ${f.unservedSeconds}s`);
  if (e.noActivation && f.activations > 0) say(`expected no activation of the checkpoint, got ${f.activations}`);
  if (e.maxActivations !== undefined && f.activations > e.maxActivations) say(`expected activations <= ${e.maxActivations}, got ${f.activations}`);
  if (e.maxHandoverAttempts !== undefined && f.handoverAttempts > e.maxHandoverAttempts)
    say(`expected handoverAttempts <= ${e.maxHandoverAttempts}, got ${f.handoverAttempts}`);
  const g = e.checkpointServedGeneration;
  if (g !== undefined && (f.checkpointGenerations.length === 0 || f.checkpointGenerations.some((x) => x !== g))) {
    const got = f.checkpointGenerations.length === 0 ? 'no checkpoint served' : `generation(s) ${f.checkpointGenerations.join(', ')}`;
    say(`expected the checkpoint that served to be generation ${g}, got ${got}`);
  }
  return out;
}
