// The policy put back as it was clears "missing": by the file route (`--policy-file` removed, then
// written again with the same bytes), by the ConfigMap route (the `lastseen-policy` ConfigMap
// deleted, then created again with the same data) and across an agent restart (the agent starts
// while the ConfigMap is gone, on its persisted last good policy, and the same ConfigMap comes
// back). Each time `lastseen_policy_missing` returns to 0 and the NodeCheckpoint's PolicyValid
// condition to True/Valid, so `LastseenPolicyMissing` stops once the operator has fixed it.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { NODECHECKPOINT_GROUP, NODECHECKPOINT_PLURAL, NODECHECKPOINT_VERSION, type NodeCheckpoint } from '../../src/kube/nodecheckpoint-types.js';
import { faultSetup, metric, metricsText } from './fault-helpers.js';
import { controlPlane, kubeConfigFor, waitFor } from './harness.js';
import { healthPort, lastseen, type Proc } from './processes.js';

const POLICY =
  '{ interval: 250ms, window: 1s, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, handoverBackoff: { initial: 1s, max: 4s }, channels: [lease] }';
/** The file poll is 5 s; the kubelet-less ConfigMap route is a watch: both well within this. */
const RESTORE_TIMEOUT_MS = 30_000;

async function policyMissing(p: Proc): Promise<number> {
  return metric(await metricsText(await healthPort(p)), 'lastseen_policy_missing');
}

async function policyCondition(node: string): Promise<string | undefined> {
  const api = kubeConfigFor('admin').makeApiClient(CustomObjectsApi);
  try {
    const o = (await api.getClusterCustomObject({
      group: NODECHECKPOINT_GROUP,
      version: NODECHECKPOINT_VERSION,
      plural: NODECHECKPOINT_PLURAL,
      name: node,
    })) as NodeCheckpoint;
    const c = o.status?.conditions?.find((x) => x.type === 'PolicyValid');
    return c ? `${c.status}/${c.reason}` : undefined;
  } catch {
    return undefined;
  }
}

async function until(p: Proc, node: string, missing: 0 | 1, condition: string, what: string): Promise<void> {
  await waitFor(async () => ((await policyMissing(p)) === missing && (await policyCondition(node)) === condition ? true : undefined), {
    timeoutMs: RESTORE_TIMEOUT_MS,
    intervalMs: 250,
    what,
  });
}

describe('a policy restored as it was clears "missing"', () => {
  it('by the file route: removed, then the same bytes written back', async () => {
    const s = await faultSetup('restore-file', { policy: POLICY, secret: false });
    await until(s.agent, s.node, 0, 'True/Valid', 'the policy read (missing 0, PolicyValid True)');
    const text = await readFile(s.dirs.policy, 'utf8');
    await rm(s.dirs.policy);
    await until(s.agent, s.node, 1, 'False/Missing', 'the policy reported missing');
    await writeFile(s.dirs.policy, text);
    await until(s.agent, s.node, 0, 'True/Valid', 'the identical file to clear missing');
    await s.agent.stop();
  });

  it('by the ConfigMap route, and across an agent restart while the ConfigMap is gone', async () => {
    const s = await faultSetup('restore-cm', { policy: POLICY, secret: false });
    // This test's agent reads the ConfigMap, not the file: its own process, without --policy-file.
    await s.agent.stop();
    const text = await readFile(s.dirs.policy, 'utf8');
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    const configMap = () => core.createNamespacedConfigMap({ namespace: s.ns, body: { metadata: { name: 'lastseen-policy' }, data: { 'policy.yaml': text } } });
    const cp = controlPlane();
    const agent = () =>
      lastseen([
        'agent',
        ...['--node', s.node, '--pod-name', `agent-${s.node}`, '--namespace', s.ns, '--kubeconfig', cp.adminKubeconfig],
        ...['--manifest-dir', s.dirs.manifests, '--state-dir', s.dirs.state, '--heartbeat-dir', s.dirs.heartbeats],
        ...['--health-port', '0', '--health-host', '127.0.0.1', '--api-probe', '500ms', '--local-poll', '200ms', '--watchdog', '10s'],
      ]);
    await configMap();
    let a = agent();
    await until(a, s.node, 0, 'True/Valid', 'the ConfigMap policy read');

    await core.deleteNamespacedConfigMap({ name: 'lastseen-policy', namespace: s.ns });
    await until(a, s.node, 1, 'False/Missing', 'the deleted ConfigMap reported missing');
    await configMap();
    await until(a, s.node, 0, 'True/Valid', 'the identical ConfigMap to clear missing');

    // Restart while the ConfigMap is gone: the agent starts on its persisted last good policy (the
    // same text) and says missing; the same ConfigMap created again clears it.
    await core.deleteNamespacedConfigMap({ name: 'lastseen-policy', namespace: s.ns });
    await until(a, s.node, 1, 'False/Missing', 'the deleted ConfigMap reported missing (before the restart)');
    await a.stop();
    a = agent();
    await waitFor(() => a.logs.find((l) => l.msg === 'read the persisted last good policy'), { what: 'the restarted agent to read its last good policy' });
    await until(a, s.node, 1, 'False/Missing', 'the restarted agent to report the policy missing');
    await configMap();
    await until(a, s.node, 0, 'True/Valid', 'the identical ConfigMap to clear missing after the restart');
    expect(a.logs.filter((l) => l.msg === 'policy applied' && l.returned === true).length).toBeGreaterThanOrEqual(1);
    await a.stop();
  });
});
