// The parent recipes' start gate (src/heartbeat/checkpoint-gate.ts) in the simulator's kubelet: a
// pod created by the api-server while this node's copy of its parent starts holds its main
// container until the copy is Ready (or the hook's --max passes). Here a delete-first rollout of an
// api-server that stops in 3 s: its successor is created while the copy it got at the delete is
// still starting.
import { describe, expect, it } from 'vitest';
import { runScenario } from './run.js';
import { parseScenario } from './schema.js';

const AT = 180_000;

function rollout(gate: string | null, copyStart = '15s', seed = 1) {
  const r = parseScenario({
    apiVersion: 'lastseen.dev/v1alpha1',
    kind: 'Scenario',
    name: 'start-gate',
    seed,
    duration: '8m',
    kubelet: { model: 'v1.36' },
    nodes: [
      { name: 'm1', master: true },
      { name: 'm2', master: true },
      { name: 'm3', master: true },
    ],
    parents: [
      {
        key: 'kube-apiserver',
        kind: 'apiserver',
        portSharing: true,
        startTime: copyStart,
        stopTime: '3s',
        ...(gate ? { waitForCheckpoint: gate } : {}),
        policy: { whenApiUnreachable: 'activate', handover: 'overlap' },
      },
    ],
    faults: [{ type: 'rollout', at: AT, key: 'kube-apiserver' }],
    focus: { node: 'm1', key: 'kube-apiserver' },
    expect: { served: true, parentServed: true },
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

type Log = { t: number; node: string; kind: string; text: string };
const first = (logs: Log[], re: RegExp) => logs.find((l) => l.node === 'm1' && l.t >= AT && re.test(l.text))?.t ?? null;

describe('the start gate in the simulated kubelet', () => {
  it('holds the new pod until its copy is Ready, then lets it start', async () => {
    const res = await runScenario(rollout('60s'));
    expect(res.invariantViolations).toEqual([]);
    expect(res.verdict).toBe('pass');
    const added = first(res.logs, /pod kube-apiserver-\d+ \(api, gen 2\) added/)!;
    const copyReady = first(res.logs, /kube-apiserver-checkpoint-m1 is Ready/)!;
    const held = first(res.logs, /postStart hook waits: the checkpoint kube-apiserver-checkpoint-m1 is starting/);
    const released = first(res.logs, /postStart hook returned: the checkpoint kube-apiserver-checkpoint-m1 is Ready/)!;
    const parentReady = first(res.logs, /kube-apiserver-\d+ is Ready \(generation 2\)/)!;
    expect(added).toBeLessThan(copyReady);
    expect(held).not.toBeNull();
    expect(released).toBeGreaterThanOrEqual(copyReady);
    expect(released - copyReady).toBeLessThanOrEqual(1_000);
    // The api-server takes its whole start after the hook returned.
    expect(parentReady - released).toBeGreaterThanOrEqual(15_000);
  }, 60_000);

  it('without the gate the new pod starts beside its starting copy', async () => {
    const res = await runScenario(rollout(null));
    expect(res.verdict).toBe('pass');
    const copyReady = first(res.logs, /kube-apiserver-checkpoint-m1 is Ready/)!;
    const parentReady = first(res.logs, /kube-apiserver-\d+ is Ready \(generation 2\)/)!;
    expect(first(res.logs, /postStart hook/)).toBeNull();
    expect(parentReady - copyReady).toBeLessThan(15_000);
  }, 60_000);

  it('gives up at --max: a copy that starts for longer does not hold the parent longer', async () => {
    const res = await runScenario(rollout('5s', '40s'));
    expect(res.invariantViolations).toEqual([]);
    const held = first(res.logs, /postStart hook waits/)!;
    const released = first(res.logs, /postStart hook returned: its --max passed/)!;
    expect(released - held).toBeGreaterThanOrEqual(4_500);
    expect(released - held).toBeLessThanOrEqual(5_500);
    expect(first(res.logs, /kube-apiserver-checkpoint-m1 is Ready/)!).toBeGreaterThan(released);
  }, 60_000);
});
