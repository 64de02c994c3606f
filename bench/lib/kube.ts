// Objects the benchmark creates: namespaces, Node objects and parent pods (bare Pods bound to a
// node name, their Ready condition written as a kubelet would; no kubelet runs them), and reading a
// node's NodeCheckpoint status.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';

export async function createNamespace(kc: KubeConfig, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name, labels: { 'lastseen.dev/bench': 'true' } } } });
  // No controller-manager runs here, and the ServiceAccount admission plugin refuses a pod whose
  // service account is missing: create `default` as the controller would (test/integration/harness.ts
  // namespaceBasics does the same)…
  await core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } });
  // …and the `kube-root-ca.crt` ConfigMap every pod's api-access volume projects (the agent's capture reads it).
  const cluster = kc.getCurrentCluster();
  const caPem = cluster?.caData ? Buffer.from(cluster.caData, 'base64').toString('utf8') : cluster?.caFile ? readFileSync(cluster.caFile, 'utf8') : '';
  await core.createNamespacedConfigMap({ namespace: name, body: { metadata: { name: 'kube-root-ca.crt' }, data: { 'ca.crt': caPem } } });
  return name;
}

/** A Node object named `name` (no kubelet behind it): the agent's capture reads the Node its parents run on. Idempotent. */
export async function createNode(kc: KubeConfig, name: string): Promise<void> {
  await kc
    .makeApiClient(CoreV1Api)
    .createNode({ body: { metadata: { name, labels: { 'lastseen.dev/bench': 'true' } } } })
    .catch((e: unknown) => {
      if ((e as { code?: number }).code !== 409) throw e;
    });
}

/**
 * A bare parent pod bound to `node`. `ready`: also report its Ready condition True, as a kubelet
 * would (none runs here): the agent keeps a checkpoint of an unprobed parent (`--probe none`) only
 * once its pod is Ready, so the activation section needs it.
 */
export async function createParentPod(
  kc: KubeConfig,
  ns: string,
  node: string,
  key: string,
  name = `${key}-${node}`,
  opts: { ready?: boolean } = {},
): Promise<{ name: string; uid: string }> {
  const core = kc.makeApiClient(CoreV1Api);
  const pod = await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name, labels: { 'lastseen.dev/parent': key, app: 'bench' }, annotations: { 'lastseen.dev/checkpoint': 'true' } },
      spec: { nodeName: node, containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
    },
  });
  if (opts.ready) {
    const now = new Date();
    await core.replaceNamespacedPodStatus({
      name,
      namespace: ns,
      body: { ...pod, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }] } },
    });
  }
  return { name: pod.metadata!.name!, uid: pod.metadata!.uid! };
}

/**
 * Creates `n` parent pods `p<i>` on `node`, ten at a time. `ready`: a Node object named `node` too,
 * and every pod Ready, so the agent captures each one as it would on a real node (its capture reads
 * the Node; an unprobed parent is kept only once its pod is Ready).
 */
export async function createParentPods(
  kc: KubeConfig,
  ns: string,
  node: string,
  n: number,
  key = (i: number) => `p${i}`,
  opts: { ready?: boolean } = {},
): Promise<Array<{ name: string; uid: string }>> {
  if (opts.ready) await createNode(kc, node);
  const out: Array<{ name: string; uid: string }> = [];
  for (let i = 0; i < n; i += 10) {
    const batch = Array.from({ length: Math.min(10, n - i) }, (_, j) => createParentPod(kc, ns, node, key(i + j), undefined, opts));
    out.push(...(await Promise.all(batch)));
  }
  return out;
}

export interface ParentStatusLite {
  key: string;
  namespace: string;
  state: string;
  lastSeen: string | null;
  checkpointActive?: boolean;
}

export async function nodeCheckpointParents(kc: KubeConfig, node: string): Promise<ParentStatusLite[]> {
  const o = (await kc
    .makeApiClient(CustomObjectsApi)
    .getClusterCustomObject({ group: 'lastseen.dev', version: 'v1alpha1', plural: 'nodecheckpoints', name: node })
    .catch(() => null)) as { status?: { parents?: ParentStatusLite[] } } | null;
  return o?.status?.parents ?? [];
}
