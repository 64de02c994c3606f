// After the api-server returns, no parent is judged from a stale watch, against the real
// kube-apiserver: the agent and a parent's heartbeat running, kube-apiserver killed and started
// again, and right after its return a second parent whose sidecar beats from the start (its Lease
// written before its pod shows). Neither parent may go Silent: the watches list afresh before the
// loop hears that the api-server is back (src/agent/run-observers.ts).
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { leaseName } from '../../src/core/names.js';
import { captured, faultSetup, healthy, KEY, reachability, sleep, transitions } from './fault-helpers.js';
import { controlPlane, kubeConfigFor, restartApiserver, waitFor } from './harness.js';
import { lastseen } from './processes.js';

const POLICY =
  '{ interval: 250ms, window: 1s, startupGrace: 4s, startTimeout: 30s, handoverTimeout: 2s, handoverBackoff: { initial: 1s, max: 4s }, channels: [lease, local] }';

describe('watches after the api-server returns', () => {
  it('api-server killed and restarted, a parent created right after the return: no Silent transition', async () => {
    const s = await faultSetup('trust-watch', { policy: POLICY });
    const hb = s.heartbeat('lease,local'); // beats throughout the outage (local file)
    await captured(s);
    await healthy(s.agent);
    const mark = s.agent.logs.length;
    await restartApiserver({ signal: 'KILL', downMs: 3_000 });
    // The second parent: its sidecar first (its Lease exists before the agent knows the pod), then its pod.
    const key2 = `${KEY}-late`;
    const cp = controlPlane();
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    const name2 = `${key2}-${s.node}`;
    const hb2 = lastseen([
      'heartbeat',
      ...['--node', s.node, '--pod-name', name2, '--namespace', s.ns, '--parent-key', key2],
      ...[
        '--channels',
        'lease,local',
        '--interval',
        '250ms',
        '--probe',
        s.main.probe(),
        '--heartbeat-dir',
        s.dirs.heartbeats,
        '--kubeconfig',
        cp.adminKubeconfig,
      ],
    ]);
    const leases = kubeConfigFor('admin').makeApiClient(CoordinationV1Api);
    await waitFor(async () => (await leases.readNamespacedLease({ name: leaseName(key2, s.node), namespace: s.ns })) !== undefined, {
      timeoutMs: 60_000,
      what: 'the second parent Lease',
    });
    await core.createNamespacedPod({
      namespace: s.ns,
      body: {
        metadata: { name: name2, labels: { 'lastseen.dev/parent': key2 }, annotations: { 'lastseen.dev/checkpoint': 'true' } },
        spec: { nodeName: s.node, containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
      },
    });
    await reachability(s.agent, true, 90_000);
    await waitFor(() => s.agent.logs.slice(mark).some((l) => l.msg === 'transition' && l.parent === `${s.ns}/${key2}` && l.to === 'Healthy'), {
      timeoutMs: 60_000,
      what: 'the second parent Healthy',
    });
    // Well past both parents' startupGrace and windows.
    await sleep(8_000);
    // From the moment the agent heard that the api-server is back (a loaded machine may delay a
    // local beat past the 1 s window during the outage itself; that is not what this is about).
    const back = s.agent.logs.findIndex((l, i) => i > mark && l.msg === 'api-server reachability changed' && l.observer === undefined && l.reachable === true);
    expect(back).toBeGreaterThan(mark);
    const silent = transitions(s.agent, back).filter((t) => t.to === 'Silent');
    expect(silent, JSON.stringify(silent)).toEqual([]);
    await hb2.stop('SIGKILL');
    await hb.stop('SIGKILL');
    await s.agent.stop();
  });
});
