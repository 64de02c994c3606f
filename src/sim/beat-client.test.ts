// The simulated sidecar writes its Lease and annotation beats through production's writers
// (LeaseChannel, AnnotationChannel) against the model api-server's objects (beat-client.ts): a
// Lease with a resourceVersion, answers a round trip late, requests given up at the sidecar's
// timeout but applied all the same, two writers of one Lease conflicting.
import { describe, expect, it } from 'vitest';
import { ANNOTATION_SEQUENCE, leaseName } from '../core/names.js';
import type { Beat, Channel } from '../core/types.js';
import { runWorld as run, startWorld } from './run.js';
import { parseScenario, type ScenarioInput } from './schema.js';
import type { World } from './world.js';

function world(faults: ScenarioInput['faults'] = [], seed = 1): World {
  const r = parseScenario({
    name: 'beat-client',
    duration: 900_000,
    nodes: [{ name: 'm1', master: true }],
    parents: [
      { key: 'kube-apiserver', kind: 'apiserver', portSharing: true, policy: { whenApiUnreachable: 'activate', handover: 'overlap' } },
      { key: 'kube-flannel', kind: 'app', policy: { whenApiUnreachable: 'hold', channels: ['lease', 'annotation', 'local'] } },
    ],
    faults,
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return startWorld(r.scenario, seed);
}

/** Every beat the model api-server stores for `key` from now on, as the agent's watches are shown it. */
function recordStored(w: World, key: string): Array<{ t: number; channel: Channel; beat: Beat }> {
  const out: Array<{ t: number; channel: Channel; beat: Beat }> = [];
  const write = w.api.writeBeat.bind(w.api);
  w.api.writeBeat = (channel, name, sb) => {
    if (sb.key === key) out.push({ t: w.q.now, channel, beat: sb.beat });
    write(channel, name, sb);
  };
  return out;
}

/** Where one holder's stored sequence went back on a channel. */
function backwards(stored: Array<{ channel: Channel; beat: Beat }>): string[] {
  const last = new Map<string, number>();
  const out: string[] = [];
  for (const { channel, beat } of stored) {
    const k = `${channel}/${beat.holderUid}`;
    const before = last.get(k);
    if (before !== undefined && beat.sequence < before) out.push(`${k}: ${before} -> ${beat.sequence}`);
    last.set(k, beat.sequence);
  }
  return out;
}

describe("the simulated sidecar's api writers are production's", () => {
  it('the Lease is an object with a resourceVersion, one version per beat, carrying the same round as the pod annotation', async () => {
    const w = world();
    const stored = recordStored(w, 'kube-flannel');
    await run(w, 120_000);
    const lease = w.api.leaseObjects.get(`kube-system/${leaseName('kube-flannel', 'm1')}`);
    expect(lease?.metadata?.resourceVersion).toMatch(/^\d+$/);
    const seq = Number(lease?.metadata?.annotations?.[ANNOTATION_SEQUENCE]);
    expect(seq).toBeGreaterThan(10);
    const uid = w.api.podFor('m1', 'kube-flannel')!.uid;
    expect(Number(w.api.podAnnotations.get(uid)?.[ANNOTATION_SEQUENCE])).toBeGreaterThanOrEqual(seq - 1);
    const leases = stored.filter((s) => s.channel === 'lease').map((s) => s.beat.sequence);
    // Steady state: every round lands once, in order.
    expect(leases.slice(-10)).toEqual([...Array(10).keys()].map((i) => leases.at(-10)! + i));
    expect(backwards(stored)).toEqual([]);
  });

  it('answers slower than the request timeout: the round sent first lands late, every later one is refused on its stale condition, none goes back', async () => {
    // 4 s each way against the sidecar's 2.5 s timeout (half its 5 s interval): no answer comes in time.
    const w = world([{ type: 'latency', at: 200_000, node: 'm1', latency: 4000, duration: 60_000 }]);
    const stored = recordStored(w, 'kube-flannel');
    await run(w, 400_000);
    expect(backwards(stored)).toEqual([]);
    for (const channel of ['lease', 'annotation'] as const) {
      const landed = (from: number, to: number) => stored.filter((s) => s.channel === channel && s.t > from && s.t < to).map((s) => s.beat.sequence);
      // The first request sent under the latency is applied after its writer gave up on it; the
      // writer never hears, so every later one carries the condition (resourceVersion, or the
      // sequence last seen stored) from before it, and is refused. At most one late write lands.
      expect(landed(200_000, 260_000).length).toBeLessThanOrEqual(1);
      expect(landed(150_000, 200_000).length).toBeGreaterThanOrEqual(9);
      // Once answers come in time again the writer re-reads (a 409, a failed test) and every round lands.
      expect(landed(280_000, 400_000).length).toBeGreaterThanOrEqual(22);
    }
  });

  it("a surge rollout's two pods write one Lease: conflicts are re-read, both pods' beats land, none goes back", async () => {
    const w = world([{ type: 'rollout', at: 200_000, key: 'kube-flannel', healthy: true, maxUnavailable: 0, maxSurge: 1 }]);
    const violations = w.invariants.violations;
    const stored = recordStored(w, 'kube-flannel');
    await run(w, 600_000);
    expect(backwards(stored)).toEqual([]);
    const holders = new Set(stored.filter((s) => s.channel === 'lease').map((s) => s.beat.holderUid));
    expect(holders.size).toBe(2);
    // Both pods beat the one Lease at once for a while: both their beats landed in that stretch.
    const byHolder = (uid: string) => stored.filter((s) => s.channel === 'lease' && s.beat.holderUid === uid).map((s) => s.t);
    const [a, b] = [...holders].map(byHolder);
    const overlapFrom = Math.max(a![0]!, b![0]!);
    const overlapTo = Math.min(a!.at(-1)!, b!.at(-1)!);
    expect(overlapTo).toBeGreaterThan(overlapFrom);
    expect(violations).toEqual([]);
  });
});
