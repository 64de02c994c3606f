// The kubelet models against the figures they were calibrated with (docs/simulator-kubelet.md):
// each test reads the run's timeline the way one would read the real kubelet's log.
import { describe, expect, it } from 'vitest';
import { namedScenario, parseScenario, runScenario, withKubeletModel } from './index.js';
import { KUBELET_V1_36, relistBoundMs } from './kubelet-model.js';
import { NAMED } from './scenarios.js';
import type { LogEntry } from './world.js';

const at = (logs: LogEntry[], re: RegExp, after = 0) => logs.find((l) => l.t >= after && re.test(l.text))?.t ?? null;

async function noticeDelays(model: 'v1.5' | 'v1.36', seeds: number): Promise<number[]> {
  const out: number[] = [];
  for (let seed = 1; seed <= seeds; seed++) {
    const r = await runScenario(withKubeletModel(namedScenario('master-reboot-overlap')!, model), { seed });
    const wrote = at(r.logs, /wrote manifest lastseen-kube-system-kube-apiserver/);
    const added = at(r.logs, /pod kube-apiserver-checkpoint-m1 \(static/, wrote ?? 0);
    out.push(added! - wrote!);
  }
  return out;
}

describe('kubelet v1.36 (calibrated) and v1.5 (the background issue)', () => {
  it('v1.36 notices a manifest by inotify within a fraction of a second; v1.5 on its 20 s file check', async () => {
    const fast = await noticeDelays('v1.36', 20);
    for (const d of fast) {
      expect(d).toBeGreaterThanOrEqual(KUBELET_V1_36.noticeMs.min);
      expect(d).toBeLessThanOrEqual(KUBELET_V1_36.noticeMs.max);
    }
    // Notice plus container start: median 0.19 s measured (0.18 / 0.19 / 0.62 s).
    const sorted = [...fast].sort((a, b) => a - b);
    expect(sorted[10]! + KUBELET_V1_36.staticPodStartMs).toBeLessThan(300);
    const slow = await noticeDelays('v1.5', 5);
    for (const d of slow) expect(d).toBeLessThanOrEqual(20_000);
    expect(Math.max(...slow)).toBeGreaterThan(1_000);
  });

  it("v1.36: after a reboot the api pod comes back at the pod reflector's next try after an api-server answers; v1.5 at once", async () => {
    const relist = async (name: string, model: 'v1.36' | 'v1.5', seed: number) => {
      const r = await runScenario(withKubeletModel(namedScenario(name)!, model), { seed });
      const reachable = at(r.logs, /api-server reachable from this node/, 180_500)!;
      return at(r.logs, /pod kube-apiserver-1 \(api/, reachable)! - reachable;
    };
    // The copy answers about 6 s after the kubelet started failing (testbed-reboot): the tries so
    // far waited 0.8-1.6, 1.6-3.2 and 3.2-6.4 s, so the next one is at most 12.8 s away.
    const quick: number[] = [];
    for (let seed = 1; seed <= 20; seed++) quick.push(await relist('testbed-reboot', 'v1.36', seed));
    for (const d of quick) expect(d).toBeGreaterThanOrEqual(0);
    expect(Math.max(...quick)).toBeLessThanOrEqual(12_800);
    // About 20 s of failures (master-reboot-overlap): up to the cap's 30 s stretched by up to itself.
    const slow: number[] = [];
    for (let seed = 1; seed <= 20; seed++) slow.push(await relist('master-reboot-overlap', 'v1.36', seed));
    for (const d of slow) expect(d).toBeGreaterThanOrEqual(0);
    expect(Math.max(...slow)).toBeLessThanOrEqual(relistBoundMs(KUBELET_V1_36));
    // The jitter spreads the tries: seeds differ.
    expect(Math.max(...slow) - Math.min(...slow)).toBeGreaterThan(1_000);
    expect(await relist('master-reboot-overlap', 'v1.5', 1)).toBeLessThanOrEqual(1_000);
  });

  it('v1.36: the crash-loop back-off counts the container of the previous boot; a new pod restarts its first exit at once', async () => {
    // A parent that binds 2 s after its start (a 3 s start) loses its first bind to the stopping
    // copy (its 5 s grace): the exit after the reboot is the one whose back-off is counted.
    const quick = parseScenario({ ...NAMED['master-reboot']!, parents: NAMED['master-reboot']!.parents.map((p) => ({ ...p, startTime: '3s' })) });
    if (!quick.ok) throw new Error(JSON.stringify(quick.errors));
    const r = await runScenario(withKubeletModel(quick.scenario, 'v1.36'));
    const exit = r.logs.find((l) => l.t > 220_000 && /kube-apiserver-1 exited/.test(l.text));
    expect(exit?.text).toMatch(/back-off 10s/);
    // The bad rollout's new pod has no container on record: ~1 s, then 10, 20, 40, 80 s.
    const bad = await runScenario(namedScenario('bad-rollout')!);
    const exits = bad.logs.filter((l) => /kube-apiserver-2 exited/.test(l.text)).map((l) => /\(([^)]*)\)$/.exec(l.text)![1]);
    expect(exits.slice(0, 5)).toEqual(['first exit on record: no back-off', 'back-off 10s', 'back-off 20s', 'back-off 40s', 'back-off 80s']);
    // v1.5 backs off from the first exit it restarts (with its stale status, an exit while no api-server answers goes unnoticed).
    const old = await runScenario(withKubeletModel(namedScenario('bad-rollout')!, 'v1.5'));
    expect(old.logs.find((l) => /kube-apiserver-2 exited.*restart in/.test(l.text))?.text).toMatch(/back-off 10s/);
  });

  it('a removed pod holds its ports for its stop time, cut at terminationGracePeriod (plus the SIGTERM delay)', async () => {
    for (const [stopTime, held] of [
      ['45s', 30_020],
      ['5s', 5_020],
    ] as const) {
      const r = parseScenario({
        name: 'stop',
        nodes: [{ name: 'm1', master: true }],
        parents: [{ key: 'kube-apiserver', kind: 'apiserver', stopTime, terminationGracePeriod: '30s', policy: { whenApiUnreachable: 'activate' } }],
        faults: [{ type: 'delete-pod', at: '3m', key: 'kube-apiserver', node: 'm1' }],
      });
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      const run = await runScenario(r.scenario);
      const removed = at(run.logs, /pod kube-apiserver-1 removed/, 180_000)!;
      const released = at(run.logs, /kube-apiserver-1 terminated; ports released/, 180_000)!;
      expect(released - removed, stopTime).toBe(held);
    }
  });

  it('scenario files choose the model; fileCheckPeriod belongs to v1.5 only', async () => {
    const base = { name: 'x', nodes: [{ name: 'm1', master: true }], parents: [{ key: 'kube-apiserver', kind: 'apiserver' }] };
    const def = parseScenario(base);
    expect(def.ok && def.scenario.kubelet.name).toBe('v1.36');
    const old = parseScenario({ ...base, kubelet: { model: 'v1.5', fileCheckPeriod: '5s' } });
    expect(old.ok && [old.scenario.kubelet.fileCheckPeriodMs, old.scenario.kubelet.staleStatus]).toEqual([5_000, true]);
    const bad = parseScenario({ ...base, kubelet: { fileCheckPeriod: '5s' } });
    expect(!bad.ok && bad.errors.map((e) => e.path)).toEqual(['kubelet.fileCheckPeriod']);
    const unknown = parseScenario({ ...base, kubelet: { model: 'v1.99' } });
    expect(!unknown.ok && unknown.errors[0]!.path).toBe('kubelet.model');
  });
});
