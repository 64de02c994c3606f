// The production agent on the simulator's ports, where no named scenario or random seed reaches:
// garbage collection (no fault unschedules a parent), which goes through the Agent's forget path
// and the collect actuator's live read.
import { describe, expect, it } from 'vitest';
import { parentId } from '../core/names.js';
import { HANDOVER_FILE, type SimLastseen } from './lastseen.js';
import { runWorld as run, startWorld } from './run.js';
import { parseScenario } from './schema.js';
import type { World } from './world.js';

function world(): World {
  const r = parseScenario({
    name: 'gc',
    duration: 600_000,
    nodes: [
      { name: 'm1', master: true },
      { name: 'w1', master: false },
    ],
    parents: [
      { key: 'kube-apiserver', kind: 'apiserver' },
      { key: 'kube-flannel', kind: 'app', policy: { gcGrace: '30s' } },
    ],
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return startWorld(r.scenario, 1);
}

/** The DaemonSet stops placing the parent on `node`: its pod there is deleted and not recreated. */
function unschedule(w: World, key: string, node: string): void {
  const def = w.parentDef(key);
  def.nodes = def.nodes.filter((n) => n !== node);
  const pod = w.api.podFor(node, key);
  if (pod) w.api.deletePod(pod.uid);
}

describe('the production agent in the simulator: garbage collection', () => {
  it('collects the checkpoint of a parent no longer scheduled on the node, after gcGrace, and forgets it', async () => {
    const w = world();
    const id = parentId('kube-system', 'kube-flannel');
    const w1 = w.nodes.get('w1')!;
    expect(await run(w, 60_000)).toBe(true);
    expect(w1.disk.checkpoints.has(id)).toBe(true);
    const agent = (w.agents.get('w1') as SimLastseen).agent;
    expect(agent.views().map((v) => v.id)).toContain(id);

    unschedule(w, 'kube-flannel', 'w1');
    expect(await run(w, 80_000)).toBe(true);
    expect(w1.disk.checkpoints.has(id)).toBe(true); // the grace is still running
    expect(await run(w, 120_000)).toBe(true);
    expect(w1.disk.checkpoints.has(id)).toBe(false);
    expect(w.logs.some((l) => l.node === 'w1' && l.text === `collected checkpoint ${id}`)).toBe(true);
    expect(agent.views().map((v) => v.id)).not.toContain(id);
    expect(w.invariants.violations).toEqual([]);
    // The parent on the master is untouched.
    expect(w.nodes.get('m1')!.disk.checkpoints.has(id)).toBe(true);
  });

  it('keeps the checkpoint when the api-server goes away before the grace is over', async () => {
    const w = world();
    const id = parentId('kube-system', 'kube-flannel');
    const w1 = w.nodes.get('w1')!;
    expect(await run(w, 60_000)).toBe(true);
    unschedule(w, 'kube-flannel', 'w1');
    expect(await run(w, 75_000)).toBe(true);
    w1.net.partitioned = true;
    expect(await run(w, 200_000)).toBe(true);
    expect(w1.disk.checkpoints.has(id)).toBe(true);
    expect(w.logs.some((l) => l.node === 'w1' && l.text.startsWith('collected checkpoint'))).toBe(false);
  });

  it('refuses the collection when its live read finds a pod the watch has not shown yet, and keeps the checkpoint', async () => {
    const w = world();
    const id = parentId('kube-system', 'kube-flannel');
    const w1 = w.nodes.get('w1')!;
    expect(await run(w, 60_000)).toBe(true);
    unschedule(w, 'kube-flannel', 'w1');
    // The DaemonSet places the parent here again at the very moment the agent starts collecting:
    // the live read (a round trip later) sees the new pod before the pod watch delivers it.
    const collecting = w.invariants.collecting.bind(w.invariants);
    let asked = 0;
    w.invariants.collecting = (node, key) => {
      collecting(node, key);
      asked++;
      w.parentDef(key).nodes.push(node.name);
      w.api.createPod(node.name, w.api.desired.get(key)!);
    };
    expect(await run(w, 200_000)).toBe(true);
    expect(asked).toBe(1);
    expect(w1.disk.checkpoints.has(id)).toBe(true);
    expect(w.logs.some((l) => l.node === 'w1' && l.text.startsWith('collected checkpoint'))).toBe(false);
    expect(w.logs.some((l) => l.node === 'w1' && l.kind === 'core' && /Orphaned -> (Active|Pending): CollectionCancelled/.test(l.text))).toBe(true);
    expect(w.invariants.violations).toEqual([]);
  });
});

describe('the production agent in the simulator: a known-bad spec survives an agent restart', () => {
  function badRollout(overlap: boolean): World {
    const r = parseScenario({
      name: 'bad-rollout-agent-restart',
      duration: '15m',
      nodes: [{ name: 'm1', master: true }],
      parents: [
        {
          key: 'kube-apiserver',
          kind: 'apiserver',
          ...(overlap ? { portSharing: true } : {}),
          policy: { whenApiUnreachable: 'activate', ...(overlap ? { handover: 'overlap' } : {}) },
        },
      ],
      faults: [
        { type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: false },
        // After the verdict (release: the first hand-over's window ends about 5m55s; overlap: the
        // bad pod's fourth exit, about 5m15s), well before the bad pod stops restarting.
        { type: 'agent-restart', at: overlap ? '5m30s' : '7m', node: 'm1' },
      ],
    });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    return startWorld(r.scenario, 1);
  }
  const count = (w: World, what: RegExp) => w.logs.filter((l) => what.test(l.text)).length;

  it('release: one hand-over to the bad spec, none after the restart', async () => {
    const w = badRollout(false);
    expect(await run(w, 900_000)).toBe(true);
    expect(count(w, /^Normal HandoverStarted/)).toBe(1);
    expect(count(w, /^agent started; 1 checkpoint/)).toBeGreaterThanOrEqual(1); // the restart happened
    const record = JSON.parse(w.nodes.get('m1')!.disk.handovers.get(HANDOVER_FILE) ?? '{}') as Record<string, { knownBad?: { specHash: string } }>;
    expect(record[parentId('kube-system', 'kube-apiserver')]?.knownBad?.specHash).toMatch(/g2$/);
    expect(w.invariants.violations).toEqual([]);
  });

  it('overlap: the restarted agent keeps the checkpoint as it runs (sharing: the bad spec fails as it starts), no rewrite, no steal', async () => {
    const w = badRollout(true);
    expect(await run(w, 900_000)).toBe(true);
    expect(count(w, /^Warning KnownBadSpec/)).toBe(1);
    expect(count(w, /^agent started; 1 checkpoint/)).toBeGreaterThanOrEqual(1); // the restart happened
    expect(count(w, /without port sharing\)$/)).toBe(0);
    expect(count(w, /^kube-apiserver-checkpoint-m1 is Ready/)).toBe(1); // one copy, never replaced
    expect(count(w, /^Normal HandoverStarted/)).toBe(0);
    expect(w.invariants.violations).toEqual([]);
  });
});
