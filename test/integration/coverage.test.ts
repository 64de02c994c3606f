// A capture that keeps failing is seen where an operator looks, and "is every parent covered?" has
// an answer a reboot tool can act on. A real agent against the real api-server: its parent mounts
// a Secret that is missing, so every capture fails (the pod's sources cannot be copied). Then:
// - lastseen_action_failures_total{action="capture",reason="PodSource"} counts each failure;
// - a CaptureFailing Warning Event on the parent pod, the NodeCheckpoint reason CaptureFailing;
// - lastseen_parent_covered 0, and `lastseen status --node N --covered` exits 1 naming the parent;
// once the Secret exists the next capture works: covered 1, and `--covered` exits 0.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { NODECHECKPOINT_GROUP, NODECHECKPOINT_PLURAL, NODECHECKPOINT_VERSION, type NodeCheckpoint } from '../../src/kube/nodecheckpoint-types.js';
import { faultSetup, KEY, metric, metricsText } from './fault-helpers.js';
import { controlPlane, kubeConfigFor, kubectl, waitFor } from './harness.js';
import { healthPort, runCommand } from './processes.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
const POLICY =
  '{ interval: 250ms, window: 1s, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, handoverBackoff: { initial: 1s, max: 4s }, channels: [lease] }';
/** Three failures in a row take 5 s + 10 s + 20 s of the core's back-off after the first. */
const FAILING_TIMEOUT_MS = 90_000;

describe('a capture that keeps failing, and the covered check', () => {
  it('is counted, said in an Event and the NodeCheckpoint, leaves the parent uncovered; fixed, it is covered', async () => {
    const s = await faultSetup('coverage', { policy: POLICY, secret: true });
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    // The parent's Secret goes away before its first capture (none happens before a Ready beat).
    await core.deleteNamespacedSecret({ name: 'demo-tls', namespace: s.ns });
    // A Ready agent pod on the node, as the DaemonSet would have (the agent here is a process).
    await core.createNamespacedPod({
      namespace: s.ns,
      body: {
        metadata: { name: `agent-${s.node}`, labels: { 'app.kubernetes.io/name': 'lastseen', 'app.kubernetes.io/component': 'agent' } },
        spec: { nodeName: s.node, automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'lastseen:test' }] },
      },
    });
    const ready = { status: { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }] } };
    const patched = await kubectl(['-n', s.ns, 'patch', 'pod', `agent-${s.node}`, '--subresource=status', '--type=merge', '-p', JSON.stringify(ready)]);
    expect(patched.stderr).toBe('');
    const port = await healthPort(s.agent);
    const hb = s.heartbeat();
    const covered = `lastseen_parent_covered{namespace="${s.ns}",parent="${KEY}"}`;
    const failures = 'lastseen_action_failures_total{action="capture",reason="PodSource"}';

    await waitFor(async () => ((await metric(await metricsText(port), failures)) >= 3 ? true : undefined), {
      timeoutMs: FAILING_TIMEOUT_MS,
      what: 'three failed captures counted',
    });
    expect(metric(await metricsText(port), covered)).toBe(0);
    await waitFor(
      async () =>
        (await core.listNamespacedEvent({ namespace: s.ns })).items.some(
          (e) => e.reason === 'CaptureFailing' && e.type === 'Warning' && e.involvedObject.name === s.pod.name && /PodSource/.test(e.message ?? ''),
        )
          ? true
          : undefined,
      { timeoutMs: 30_000, what: 'a CaptureFailing Warning Event on the parent pod' },
    );
    const custom = kubeConfigFor('admin').makeApiClient(CustomObjectsApi);
    const parentStatus = async () =>
      (
        (await custom.getClusterCustomObject({
          group: NODECHECKPOINT_GROUP,
          version: NODECHECKPOINT_VERSION,
          plural: NODECHECKPOINT_PLURAL,
          name: s.node,
        })) as NodeCheckpoint
      ).status?.parents?.find((p) => p.key === KEY);
    const failing = await waitFor(async () => ((await parentStatus())?.reason === 'CaptureFailing' ? parentStatus() : undefined), {
      timeoutMs: 30_000,
      what: 'the NodeCheckpoint reason CaptureFailing',
    });
    expect(failing).toMatchObject({ covered: false, coverageReason: 'CaptureFailing', checkpointStored: false });
    expect(failing?.message).toMatch(/^PodSource: \d+ captures failed in a row/);

    const check = () =>
      runCommand(process.execPath, ['--import', 'tsx', MAIN, 'status', '--kubeconfig', controlPlane().adminKubeconfig, '--node', s.node, '--covered'], {
        timeoutMs: 60_000,
      });
    const no = await check();
    expect(no.code, no.stderr).toBe(1);
    expect(no.stderr).toContain(`${s.node} ${s.ns}/${KEY}: CaptureFailing:`);
    expect(no.stdout).toMatch(/CaptureFailing/);

    // Fixed: the Secret exists again; the next retry captures, the parent is covered.
    await core.createNamespacedSecret({ namespace: s.ns, body: { metadata: { name: 'demo-tls' }, stringData: { 'tls.key': 'secret-key-bytes' } } });
    await waitFor(async () => ((await metric(await metricsText(port), covered)) === 1 ? true : undefined), {
      timeoutMs: FAILING_TIMEOUT_MS,
      what: 'the parent covered once the capture works',
    });
    const yes = await waitFor(
      async () => {
        const r = await check();
        return r.code === 0 ? r : undefined;
      },
      { timeoutMs: 30_000, what: '`status --covered` to exit 0' },
    );
    expect(yes.stderr).toContain(`every parent on ${s.node} is covered (1)`);
    await hb.stop();
    await s.agent.stop();
  });
});
