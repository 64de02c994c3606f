// The node's files observed, in the simulator: production's manifest observer
// (src/agent/observe/manifests.ts) runs over the model node disk, so a checkpoint manifest removed
// from outside under an Active parent is written again by the agent, and the model kubelet starts
// the copy again. The removal is made straight on the node disk (the scenario language has no
// fault for it), with or without the folder's change notice (inotify).
import { describe, expect, it } from 'vitest';
import { manifestFile } from '../../src/core/names.js';
import { scheduleFaults } from '../../src/sim/faults.js';
import { parseScenario, runScenario } from '../../src/sim/index.js';
import { World } from '../../src/sim/world.js';

const app = { key: 'app', kind: 'app', policy: { window: '20s' } } as const;
const apiserver = { key: 'kube-apiserver', kind: 'apiserver', portSharing: true, policy: { whenApiUnreachable: 'activate', handover: 'overlap' } } as const;
const REMOVE_AT = 260_000;
const FILE = manifestFile('kube-system', 'app');

async function run(o: { notice: boolean; folder: boolean }, seed = 1) {
  const r = parseScenario({
    name: 'manifest-restore',
    duration: '8m',
    nodes: [{ name: 'm1', master: true }],
    parents: [apiserver, app],
    // The whole pod frozen for 4 minutes: the checkpoint is Active from about 3m25s.
    faults: [{ type: 'hang', at: '3m', key: 'app', node: 'm1', duration: '4m', scope: 'pod' }],
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const w = new World(r.scenario, seed, 'lastseen');
  w.bootstrap();
  scheduleFaults(w);
  const node = w.nodes.get('m1')!;
  let backAt: number | null = null;
  w.q.at(REMOVE_AT, () => {
    expect(node.disk.manifests.has(FILE)).toBe(true);
    // One checkpoint manifest, or every checkpoint manifest (the folder's content as lastseen sees it).
    for (const [file, m] of [...node.disk.manifests]) if (file === FILE || (o.folder && m.role === 'checkpoint')) node.disk.manifests.delete(file);
    w.log('m1', 'fault', `manifest ${o.folder ? 'folder emptied' : 'removed'} by hand`, 'app');
    if (o.notice) w.agents.get('m1')?.onManifestsChanged?.();
  });
  const watchBack = () => {
    if (backAt === null && w.q.now > REMOVE_AT && node.disk.manifests.has(FILE)) backAt = w.q.now;
  };
  await w.q.runUntil(
    480_000,
    () => {
      watchBack();
      return w.afterEvent();
    },
    () => w.settle(),
  );
  const logs = w.logs.filter((l) => l.key === 'app' && l.t >= REMOVE_AT);
  return { w, backAt, logs, violations: w.invariants.violations };
}

describe('a checkpoint manifest removed under an Active parent (simulator, production observer)', () => {
  it.each([
    ['with the folder notice', true],
    ['by the period alone (no notice)', false],
  ])('is written again within 5 s, %s; the copy serves again', async (_name, notice) => {
    const r = await run({ notice, folder: false });
    expect(r.violations).toEqual([]);
    expect(r.backAt).not.toBeNull();
    expect(r.backAt! - REMOVE_AT).toBeLessThan(5_000);
    const texts = r.logs.map((l) => l.text);
    expect(texts.some((t) => /Warning ManifestRemoved/.test(t))).toBe(true);
    expect(texts.some((t) => /Normal CheckpointRestored/.test(t))).toBe(true);
    // No second CheckpointActivated: the copy was restored, not activated anew.
    expect(texts.filter((t) => /CheckpointActivated/.test(t))).toEqual([]);
    // The model kubelet starts the copy again from the rewritten manifest, long before the hang ends.
    const again = r.w.logs.find((l) => l.kind === 'kubelet' && l.t > REMOVE_AT && /app-checkpoint-m1 .*added/.test(l.text));
    expect(again?.t).toBeLessThan(REMOVE_AT + 10_000);
  });

  it('every checkpoint manifest gone (the folder emptied): the Active one is written again within 5 s', async () => {
    const r = await run({ notice: true, folder: true });
    expect(r.violations).toEqual([]);
    expect(r.backAt).not.toBeNull();
    expect(r.backAt! - REMOVE_AT).toBeLessThan(5_000);
  });

  it('the remove-manifest fault (scenario language): the Active parent is served again by its copy, covered all along but a few seconds', async () => {
    const r = parseScenario({
      name: 'remove-manifest',
      duration: '8m',
      nodes: [{ name: 'm1', master: true }],
      parents: [apiserver, app],
      faults: [
        { type: 'hang', at: '3m', key: 'app', node: 'm1', duration: '4m', scope: 'pod' },
        { type: 'remove-manifest', at: '4m20s', node: 'm1', key: 'app' },
        { type: 'remove-manifest', at: '5m20s', node: 'm1' },
      ],
      expect: {
        faults: [
          { fault: 1, served: true, maxUnserved: '15s' },
          { fault: 2, served: true, maxUnserved: '15s' },
        ],
      },
    });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const out = await runScenario(r.scenario, { seed: 1 });
    expect(out.invariantViolations).toEqual([]);
    expect(out.verdict).toBe('pass');
    const restored = out.logs.filter((l) => l.key === 'app' && /Normal CheckpointRestored/.test(l.text)).map((l) => l.t);
    expect(restored).toHaveLength(2);
    expect(restored[0]! - 260_000).toBeLessThan(5_000);
    expect(restored[1]! - 320_000).toBeLessThan(5_000);
  });

  it.each([2, 3, 4])('seed %i: the same within 5 s', async (seed) => {
    const r = await run({ notice: false, folder: false }, seed);
    expect(r.violations).toEqual([]);
    expect(r.backAt).not.toBeNull();
    expect(r.backAt! - REMOVE_AT).toBeLessThan(5_000);
  });
});
