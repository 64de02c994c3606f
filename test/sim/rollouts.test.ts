// Rollouts as the DaemonSet controller does them (src/sim/daemonset.ts): one node at a time by
// node name, the next only once the new pod is Ready in the api-server's view, a stall on a spec
// that never gets Ready, maxSurge creating the new pod before deleting the old one. Each test reads
// the run's timeline and its serve lanes (who served each node, over time).
import { describe, expect, it } from 'vitest';
import { scaled } from '../../src/sim/daemonset.js';
import { namedScenario, parseScenario, type RunResult, randomScenario, runScenario, type ScenarioInput } from '../../src/sim/index.js';

const FAULT_AT = 180_000;
const MASTERS = ['m1', 'm2', 'm3'];
const three = MASTERS.map((name) => ({ name, master: true }));
const sharedApiserver = {
  key: 'kube-apiserver',
  kind: 'apiserver',
  portSharing: true,
  policy: { whenApiUnreachable: 'activate', handover: 'overlap' },
} as const;
const flannel = { key: 'kube-flannel', kind: 'app', policy: { whenApiUnreachable: 'hold' } } as const;

function scenario(input: Partial<ScenarioInput>) {
  const r = parseScenario({ name: 'rollout', duration: '12m', nodes: three, parents: [sharedApiserver, flannel], ...input });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

/** When each node's pod of `key` was deleted by the controller, and when a pod of `generation` was added and became Ready there (first time). */
function steps(r: RunResult, key: string, generation: number) {
  const out = new Map<string, { deleted?: number; added?: number; ready?: number }>();
  const at = (n: string) => out.get(n) ?? out.set(n, {}).get(n)!;
  for (const l of r.logs) {
    if (l.key !== key || l.t < FAULT_AT) continue;
    if (l.kind === 'api' && l.text.startsWith(`DaemonSet ${key}: deletes `)) at(l.node).deleted ??= l.t;
    if (l.kind === 'kubelet' && new RegExp(`^pod ${key}-\\d+ \\(api, gen ${generation}\\) added`).test(l.text)) at(l.node).added ??= l.t;
    if (l.kind === 'kubelet' && new RegExp(`^${key}-\\d+ is Ready \\(generation ${generation}\\)`).test(l.text)) at(l.node).ready ??= l.t;
  }
  return out;
}

/** The value of a step lane at time t. */
function laneAt(lane: Array<{ t: number; v: string }>, t: number): string {
  let v = 'none';
  for (const e of lane) {
    if (e.t > t) break;
    v = e.v;
  }
  return v;
}

/**
 * Over the run after the fault, from the serve lanes: the most nodes at once not served by their
 * parent, the time no node served the key at all, and each node's share of the time it was served.
 */
function serveFigures(r: RunResult, key: string, nodes = MASTERS) {
  const lanes = nodes.map((n) => r.series.get(`serve/${n}/${key}`) ?? []);
  const end = r.endedAt * 1000;
  const times = [...new Set([FAULT_AT, end, ...lanes.flatMap((l) => l.map((e) => e.t))])].filter((t) => t >= FAULT_AT && t <= end).sort((a, b) => a - b);
  let mostWithoutParent = 0;
  let nobodyMs = 0;
  const servedMs = nodes.map(() => 0);
  for (let i = 0; i + 1 < times.length; i++) {
    const t = times[i]!;
    const dt = times[i + 1]! - t;
    if (dt === 0) continue;
    const vs = lanes.map((l) => laneAt(l, t));
    mostWithoutParent = Math.max(mostWithoutParent, vs.filter((v) => v !== 'parent').length);
    const served = vs.map((v) => v === 'parent' || v === 'checkpoint');
    if (!served.some(Boolean)) nobodyMs += dt;
    served.forEach((s, j) => {
      if (s) servedMs[j] = servedMs[j]! + dt;
    });
  }
  return { mostWithoutParent, nobodySeconds: nobodyMs / 1000, servedShare: servedMs.map((ms) => ms / (end - FAULT_AT)) };
}

describe('a rolling update with maxUnavailable 1 (the default)', () => {
  it.each(['rollout-three-masters', 'rollout-three-masters-overlap'])(
    '%s replaces one master at a time, by node name, each once the last new pod is Ready; the api-server is never down (seeds 1..10)',
    async (name) => {
      for (let seed = 1; seed <= 10; seed++) {
        const r = await runScenario(namedScenario(name)!, { seed });
        expect(r.invariantViolations, `seed ${seed}`).toEqual([]);
        expect(r.expectationFailures, `seed ${seed}`).toEqual([]);
        const s = steps(r, 'kube-apiserver', 2);
        // m1 first; each next node's old pod is deleted only after the previous node's new pod is Ready.
        let readyBefore = FAULT_AT;
        for (const n of MASTERS) {
          const st = s.get(n)!;
          expect(st.deleted, `seed ${seed} ${n}`).toBeGreaterThanOrEqual(readyBefore);
          expect(st.ready, `seed ${seed} ${n}`).toBeGreaterThan(st.deleted!);
          readyBefore = st.ready!;
        }
        // Ground truth: never two masters without their parent serving at once, never no api-server.
        const f = serveFigures(r, 'kube-apiserver');
        expect(f.mostWithoutParent, `seed ${seed}`).toBe(1);
        expect(f.nobodySeconds, `seed ${seed}`).toBe(0);
        expect(r.outcome.rollouts, `seed ${seed}`).toEqual([
          expect.objectContaining({ fault: 0, generation: 2, nodesUpdated: 3, nodes: 3, stalled: false, waitingOn: [] }),
        ]);
        expect(r.outcome.rollouts![0]!.completedAfter).toBeGreaterThan(0);
        expect(r.logs.some((l) => /rollout to generation 2 complete on 3 of 3 nodes/.test(l.text))).toBe(true);
      }
    },
  );

  it('maxUnavailable 2 (or 50% of three, rounded up) replaces two masters at once, never three', async () => {
    for (const maxUnavailable of [2, '50%'] as const) {
      const r = await runScenario(scenario({ faults: [{ type: 'rollout', at: '3m', key: 'kube-flannel', maxUnavailable }] }));
      expect(r.invariantViolations).toEqual([]);
      const s = steps(r, 'kube-flannel', 2);
      expect([s.get('m1')!.deleted, s.get('m2')!.deleted]).toEqual([FAULT_AT, FAULT_AT]);
      expect(s.get('m3')!.deleted).toBeGreaterThanOrEqual(Math.min(s.get('m1')!.ready!, s.get('m2')!.ready!));
      expect(serveFigures(r, 'kube-flannel').mostWithoutParent).toBe(2);
    }
    const all = await runScenario(scenario({ faults: [{ type: 'rollout', at: '3m', key: 'kube-flannel', maxUnavailable: '100%' }] }));
    expect(MASTERS.map((n) => steps(all, 'kube-flannel', 2).get(n)!.deleted)).toEqual([FAULT_AT, FAULT_AT, FAULT_AT]);
  });

  it('minReadySeconds: the next node waits until the new pod has been Ready that long', async () => {
    const r = await runScenario(scenario({ faults: [{ type: 'rollout', at: '3m', key: 'kube-flannel', minReadySeconds: 30 }] }));
    const s = steps(r, 'kube-flannel', 2);
    expect(s.get('m2')!.deleted! - s.get('m1')!.ready!).toBeGreaterThanOrEqual(30_000);
    expect(s.get('m2')!.deleted! - s.get('m1')!.ready!).toBeLessThanOrEqual(31_000);
  });

  it("the controller sees Ready only as the node's kubelet reports it: a partitioned node's new pod holds the rollout until it reconnects", async () => {
    const rollout = { type: 'rollout', at: '3m', key: 'kube-flannel' } as const;
    const quick = steps(await runScenario(scenario({ faults: [rollout] })), 'kube-flannel', 2);
    // The new pod on m1 is created once the old one is gone (its kubelet stopped it, about 3 s, and
    // said so), about 2 s later, and Ready about 5.4 s after that.
    expect(quick.get('m1')!.added! - quick.get('m1')!.deleted!).toBeGreaterThanOrEqual(3_000);
    expect(quick.get('m2')!.deleted! - quick.get('m1')!.ready!).toBeLessThanOrEqual(1_000);
    // m1 cannot reach an api-server from 3m10s to 4m10s: its pod is Ready at about 3m12s, unreported.
    const cut = await runScenario(scenario({ faults: [rollout, { type: 'partition', at: '3m10s', node: 'm1', duration: '60s' }] }));
    expect(cut.invariantViolations).toEqual([]);
    const s = steps(cut, 'kube-flannel', 2);
    expect(s.get('m1')!.ready).toBeLessThan(190_000 + 5_000);
    expect(s.get('m2')!.deleted).toBeGreaterThanOrEqual(250_000);
    expect(s.get('m2')!.deleted).toBeLessThanOrEqual(252_000);
  });
});

describe('a rollout whose new spec never gets Ready', () => {
  it.each(['bad-rollout-three-masters', 'bad-rollout-three-masters-overlap'])(
    '%s stalls after m1: m2 and m3 keep the old spec and stay served at least 99 percent of the time; the figures and the timeline say so (seeds 1..10)',
    async (name) => {
      for (let seed = 1; seed <= 10; seed++) {
        const r = await runScenario(namedScenario(name)!, { seed });
        expect(r.invariantViolations, `seed ${seed}`).toEqual([]);
        expect(r.expectationFailures, `seed ${seed}`).toEqual([]);
        expect(r.outcome.rollouts).toEqual([
          { fault: 0, key: 'kube-apiserver', generation: 2, at: 180, nodesUpdated: 0, nodes: 3, completedAfter: null, stalled: true, waitingOn: ['m1'] },
        ]);
        const deleted = r.logs.filter((l) => l.kind === 'api' && /DaemonSet kube-apiserver: deletes /.test(l.text)).map((l) => l.node);
        expect(deleted, `seed ${seed}`).toEqual(['m1']);
        expect(r.logs.some((l) => l.node !== 'm1' && /\(api, gen 2\) added/.test(l.text))).toBe(false);
        const stalled = r.logs.filter((l) => /rollout to generation 2 stalled: kube-apiserver-\d+ on m1 restarted without becoming available/.test(l.text));
        expect(stalled.length, `seed ${seed}`).toBe(1);
        expect(
          r.logs.some((l) =>
            /rollout to generation 2 waits for kube-apiserver-\d+ on m1 to be available \(0 of 3 nodes updated; maxUnavailable 1\)/.test(l.text),
          ),
        ).toBe(true);
        const f = serveFigures(r, 'kube-apiserver');
        expect(f.nobodySeconds, `seed ${seed}`).toBe(0);
        expect(f.servedShare[1], `seed ${seed} m2`).toBeGreaterThanOrEqual(0.99);
        expect(f.servedShare[2], `seed ${seed} m3`).toBeGreaterThanOrEqual(0.99);
      }
    },
  );

  it('a stalled rollout is closed by the next one, which goes on from where it stood', async () => {
    const r = await runScenario(
      scenario({
        faults: [
          { type: 'rollout', at: '3m', key: 'kube-flannel', healthy: false },
          { type: 'rollout', at: '6m', key: 'kube-flannel', healthy: true },
        ],
      }),
    );
    expect(r.invariantViolations).toEqual([]);
    const [bad, good] = r.outcome.rollouts!;
    expect(bad).toMatchObject({ generation: 2, nodesUpdated: 0, stalled: true, waitingOn: ['m1'], completedAfter: null });
    expect(good).toMatchObject({ generation: 3, nodesUpdated: 3, stalled: false, waitingOn: [] });
  });
});

describe('a rolling update with maxSurge', () => {
  it('creates the new pod beside the old one and deletes the old one once the new one is Ready, one node at a time (seeds 1..10)', async () => {
    for (let seed = 1; seed <= 10; seed++) {
      const r = await runScenario(namedScenario('surge-rollout-three-masters')!, { seed });
      const s = steps(r, 'kube-apiserver', 2);
      let doneBefore = FAULT_AT;
      for (const n of MASTERS) {
        const st = s.get(n)!;
        expect(st.added, `seed ${seed} ${n}`).toBeGreaterThanOrEqual(doneBefore);
        expect(st.ready, `seed ${seed} ${n}`).toBeGreaterThan(st.added!);
        expect(st.deleted, `seed ${seed} ${n}`).toBeGreaterThanOrEqual(st.ready!);
        doneBefore = st.deleted!;
      }
      // The parent's own pods serve every node throughout, but for the second or so each new pod
      // holds its share of the shared port before it is Ready.
      const f = serveFigures(r, 'kube-apiserver');
      expect(f.nobodySeconds, `seed ${seed}`).toBe(0);
      expect(r.outcome.unservedSeconds, `seed ${seed}`).toBeLessThanOrEqual(1.5);
      expect(r.outcome.rollouts![0], `seed ${seed}`).toMatchObject({ nodesUpdated: 3, stalled: false });
      // Both pods are the parent's while both are listed: the old pod's last Stopping beat, once
      // the new one beats, activates nothing.
      expect(r.outcome.totals.activations, `seed ${seed}`).toBe(0);
    }
  });

  it('cannot roll a parent whose port is not shared: the new pod never binds beside the old one, and the rollout stalls with the old pod serving', async () => {
    const r = await runScenario(
      scenario({
        parents: [{ key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } }, flannel],
        faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', maxSurge: 1, maxUnavailable: 0 }],
      }),
    );
    expect(r.invariantViolations).toEqual([]);
    expect(r.logs.some((l) => /kube-apiserver-\d+ exited: bind :6443: address already in use/.test(l.text))).toBe(true);
    expect(r.logs.some((l) => /DaemonSet kube-apiserver: deletes/.test(l.text))).toBe(false);
    expect(r.outcome.rollouts![0]).toMatchObject({ nodesUpdated: 0, stalled: true, waitingOn: ['m1'] });
    expect(r.outcome.unservedSeconds).toBe(0);
  });
});

describe('the rollout fields of the schema', () => {
  const base = { name: 'x', nodes: three, parents: [sharedApiserver] };
  it('default to the DaemonSet defaults', () => {
    const r = parseScenario({ ...base, faults: [{ type: 'rollout', at: '1m', key: 'kube-apiserver' }] });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.scenario.spec.faults[0]).toMatchObject({ maxUnavailable: 1, maxSurge: 0, minReadySeconds: 0 });
  });

  it.each([
    ['both zero', { maxUnavailable: 0, maxSurge: 0 }, 'faults[0].maxUnavailable', /may not be 0 when maxSurge is 0/],
    ['both zero percent', { maxUnavailable: '0%' }, 'faults[0].maxUnavailable', /may not be 0 when maxSurge is 0/],
    ['a percentage over 100', { maxUnavailable: '150%' }, 'faults[0].maxUnavailable', /percentage/],
    ['a fraction', { maxSurge: 1.5 }, 'faults[0].maxSurge', /whole number|integer/],
    ['a negative count', { maxUnavailable: -1 }, 'faults[0].maxUnavailable', /whole number|>=0|too small/i],
    ['a negative minReadySeconds', { minReadySeconds: -5 }, 'faults[0].minReadySeconds', /./],
  ])('%s is refused at its field', (_name, fields, path, message) => {
    const r = parseScenario({ ...base, faults: [{ type: 'rollout', at: '1m', key: 'kube-apiserver', ...fields }] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.find((e) => e.path === path)?.message).toMatch(message);
  });

  it('a percentage is of the parent nodes, rounded up', () => {
    expect([scaled('34%', 3), scaled('50%', 3), scaled('100%', 3), scaled('0%', 3), scaled(2, 3)]).toEqual([2, 2, 3, 0, 2]);
  });
});

describe('the random sweep', () => {
  it('draws rollouts with other update strategies than the default, surges too', () => {
    const rollouts = Array.from({ length: 300 }, (_, i) => randomScenario(i + 1).spec.faults)
      .flat()
      .filter((f) => f.type === 'rollout');
    expect(rollouts.length).toBeGreaterThan(30);
    expect(rollouts.some((f) => f.maxUnavailable !== 1)).toBe(true);
    expect(rollouts.some((f) => typeof f.maxUnavailable === 'string')).toBe(true);
    expect(rollouts.some((f) => f.minReadySeconds > 0)).toBe(true);
    expect(rollouts.some((f) => f.maxUnavailable === 1 && f.maxSurge === 0 && f.minReadySeconds === 0)).toBe(true);
    expect(rollouts.some((f) => f.maxSurge === 1 && f.maxUnavailable === 0)).toBe(true);
    expect(rollouts.every((f) => f.maxSurge === 0 || f.maxUnavailable === 0)).toBe(true);
  });
});
