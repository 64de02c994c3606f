// The coverage scenarios' figures as their goals state them, over many seeds, with the baselines
// beside lastseen (`npm run bench:coverage -- [A..B]`, default seeds 1..200). Prints one table per
// scenario: p50 / p90 / max over seeds, and how many seeds meet the goal.
//
// - apiserver-hang, apiserver-hang-release: unserved seconds after the hang starts (goal <= 30 s).
// - apiserver-starved: fences and activations while the api-server is starved of CPU (goal 0).
// - reboot-mid-handover: served again after the second power cycle, minus the plain reboot's
//   served-again time on the same seed (master-reboot on the same kubelet model; goal <= 5 s).
// - reboot-loop: unserved seconds over the run, and lastseen / kubelet-pods per seed (goal <= 0.8).
// - stumbling-rollout: from the new spec's last crash to the parent serving alone (goal <= 300 s).
// - bad-rollout-overlap-30m: share of the 30 minutes after the rollout served (goal >= 99%); the
//   same with the rollout as a surge (maxSurge 1, maxUnavailable 0) beside it, and with the real
//   beds' silent bad spec (bad-rollout-silent-overlap: binds at once, exits after 20 s).
// - the `handover: redirect` variants (docs/decisions/0012-one-listener-per-port.md) of the hang,
//   the reboot loop and both bad rollouts, by the same measures.
import { namedScenario, type RunResult, runScenario, withKubeletModel } from '../src/sim/index.js';
import { NAMED } from '../src/sim/scenarios.js';
import { parseScenario } from '../src/sim/schema.js';
import { type Summary, summarize } from './lib/util.js';

type Strategy = 'lastseen' | 'kubelet-pods' | 'runtime-poll';
const STRATEGIES: Strategy[] = ['lastseen', 'kubelet-pods', 'runtime-poll'];

function seedRange(arg: string | undefined): number[] {
  const m = /^(\d+)\.\.(\d+)$/.exec(arg ?? '1..200');
  if (!m) throw new Error(`seeds: expected A..B, got ${arg}`);
  const out: number[] = [];
  for (let s = Number(m[1]); s <= Number(m[2]); s++) out.push(s);
  return out;
}

async function run(name: string, seed: number, strategy: Strategy, keepLogs = false): Promise<RunResult> {
  const sc = namedScenario(name) ?? badRollout30m(name);
  return runScenario(sc, { seed, strategy, keepLogs });
}

/**
 * bad-rollout-overlap held 30 minutes after the rollout; `-surge`: the same rollout with
 * maxSurge 1, maxUnavailable 0 (the new pod starts beside the old one, which stays until it is Ready).
 */
function badRollout30m(name: string) {
  const m = /^(bad-rollout(?:-silent)?-(?:overlap|redirect))(-surge)?-30m$/.exec(name);
  const base = m?.[1] === undefined ? undefined : NAMED[m[1]];
  if (!base) throw new Error(`no scenario ${name}`);
  const surge = m?.[2] !== undefined;
  const faults = (base.faults ?? []).map((f) => (f.type === 'rollout' && surge ? { ...f, maxSurge: 1, maxUnavailable: 0 } : f));
  const r = parseScenario({ ...base, name, duration: '33m', faults });
  if (!r.ok) throw new Error(r.errors.map((e) => e.message).join('; '));
  return r.scenario;
}

function fmt(s: Summary): string {
  const f = (v: number | null) => (v === null ? '-' : String(Math.round(v * 10) / 10));
  return `${f(s.p50)} / ${f(s.p90)} / ${f(s.max)}`;
}

const seeds = seedRange(process.argv[2]);
const rows: string[] = [];
const line = (scenario: string, strategy: string, what: string, values: number[], goal: (v: number) => boolean, violations: number) =>
  rows.push(`| ${scenario} | ${strategy} | ${what} | ${fmt(summarize(values))} | ${values.filter(goal).length}/${values.length} | ${violations} |`);

for (const name of ['apiserver-hang', 'apiserver-hang-release', 'apiserver-hang-redirect']) {
  for (const st of STRATEGIES) {
    const v: number[] = [];
    let bad = 0;
    for (const seed of seeds) {
      const r = await run(name, seed, st);
      v.push(r.outcome.perFault[0]!.unservedSeconds);
      bad += r.invariantViolations.length > 0 ? 1 : 0;
    }
    line(name, st, 'unserved s after the hang starts', v, (x) => x <= 30, bad);
  }
}

// A process starved of CPU for 90 s (its sidecar sees it waiting for a CPU): slow, not hung. lastseen
// only (the baselines never fence): fence requests and activations after the starvation starts (goal 0).
{
  const acts: number[] = [];
  let bad = 0;
  for (const seed of seeds) {
    const r = await run('apiserver-starved', seed, 'lastseen', true);
    const at = namedScenario('apiserver-starved')!.spec.faults[0]!.at;
    acts.push(r.logs.filter((l) => l.node === 'm1' && l.t >= at && (/fence of pod/.test(l.text) || (l.kind === 'core' && / -> Active/.test(l.text)))).length);
    bad += r.invariantViolations.length > 0 ? 1 : 0;
  }
  line('apiserver-starved', 'lastseen', 'fences and activations in the starvation', acts, (x) => x === 0, bad);
}

for (const st of STRATEGIES) {
  const diff: number[] = [];
  const second: number[] = [];
  let bad = 0;
  for (const seed of seeds) {
    const r = await run('reboot-mid-handover', seed, st);
    const plain = await runScenario(withKubeletModel(namedScenario('master-reboot')!, 'v1.36'), { seed, strategy: st, keepLogs: false });
    const a = r.outcome.perFault[1]!.servedAt;
    const b = plain.outcome.perFault[0]!.servedAt;
    second.push(a ?? Number.POSITIVE_INFINITY);
    diff.push(a === null || b === null ? Number.POSITIVE_INFINITY : a - b);
    bad += r.invariantViolations.length > 0 ? 1 : 0;
  }
  line('reboot-mid-handover', st, 'served again after the 2nd reboot (s)', second, () => true, bad);
  line('reboot-mid-handover', st, '... minus a plain reboot, same seed (s)', diff, (x) => x <= 5, bad);
}

for (const name of ['reboot-loop', 'reboot-loop-redirect']) {
  const base = new Map<number, number>();
  for (const st of ['kubelet-pods', 'lastseen', 'runtime-poll'] as Strategy[]) {
    const v: number[] = [];
    const ratio: number[] = [];
    let bad = 0;
    for (const seed of seeds) {
      const r = await run(name, seed, st);
      const u = r.outcome.unservedSeconds;
      v.push(u);
      if (st === 'kubelet-pods') base.set(seed, u);
      else ratio.push(u / (base.get(seed) ?? Number.NaN));
      bad += r.invariantViolations.length > 0 ? 1 : 0;
    }
    line(name, st, 'unserved s (whole run)', v, () => true, bad);
    if (st !== 'kubelet-pods') line(name, st, '... / kubelet-pods, same seed', ratio, (x) => x <= 0.8, bad);
  }
}

for (const st of STRATEGIES) {
  const v: number[] = [];
  let bad = 0;
  for (const seed of seeds) {
    const r = await run('stumbling-rollout', seed, st, true);
    const crashes = r.logs.filter((l) => l.kind === 'kubelet' && /crash \d+ of \d+/.test(l.text));
    const last = crashes.length ? crashes[crashes.length - 1]!.t : null;
    const f = r.outcome.perFault[0]!;
    const alone = f.parentServedAt === null ? null : f.at + f.parentServedAt;
    v.push(last === null || alone === null ? Number.POSITIVE_INFINITY : (alone * 1000 - last) / 1000);
    bad += r.invariantViolations.length > 0 ? 1 : 0;
  }
  line('stumbling-rollout', st, 'last crash -> parent serves alone (s)', v, (x) => x <= 300, bad);
}

/** A bad rollout held 30 minutes: the share of them served, per strategy (goal >= 99%). */
async function served30m(name: string, label: string): Promise<void> {
  for (const st of STRATEGIES) {
    const v: number[] = [];
    let bad = 0;
    for (const seed of seeds) {
      const r = await run(name, seed, st);
      v.push(100 * (1 - r.outcome.perFault[0]!.unservedSeconds / 1800));
      bad += r.invariantViolations.length > 0 ? 1 : 0;
    }
    line(label, st, 'served % of the 30 min', v, (x) => x >= 99, bad);
  }
}
await served30m('bad-rollout-overlap-30m', 'bad-rollout-overlap (30 min)');
await served30m('bad-rollout-overlap-surge-30m', 'bad-rollout-overlap, maxSurge 1 (30 min)');
await served30m('bad-rollout-silent-overlap-30m', 'bad-rollout-silent-overlap (30 min)');
await served30m('bad-rollout-redirect-30m', 'bad-rollout-redirect (30 min)');
await served30m('bad-rollout-silent-redirect-30m', 'bad-rollout-silent-redirect (30 min)');

console.log(`seeds ${seeds[0]}..${seeds[seeds.length - 1]}; p50 / p90 / max; "goal": seeds meeting it; violations: seeds with any\n`);
console.log('| scenario | strategy | figure | p50 / p90 / max | goal | violations |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
