/**
 * The test control plane is a real cluster's admission chain, and what the agent
 * records about a gone parent gets through it.
 *
 * The api-server runs the default admission plugins (ServiceAccount among them) plus
 * NodeRestriction, with `--authorization-mode=Node,RBAC`: a pod gets the `kube-api-access-*`
 * volume, a node identity reads only what its own pods mount and may create only mirror pods.
 * Before, the control plane ran with `--disable-admission-plugins=ServiceAccount` and RBAC alone,
 * and no test could see any of that.
 */
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_SCOPED_EVENTS_NAMESPACE, makeActuators } from '../../src/agent/actuators.js';
import type { ParentView } from '../../src/agent/agent.js';
import { makeKubeClient } from '../../src/kube/client.js';
import { kubeConfigFor, kubectl, useNamespace, waitFor } from './harness.js';

const RUN = Math.random().toString(36).slice(2, 8);
const NODE_A = `adm-${RUN}-a`;
const NODE_B = `adm-${RUN}-b`;
/** kubectl flags for the kubelet's identity on `node` (as its client certificate would say). */
const asNode = (node: string) => ['--as', `system:node:${node}`, '--as-group', 'system:nodes', '--as-group', 'system:authenticated'];

let ns = '';
let core: CoreV1Api;

function podOn(name: string, node: string, secret: string): V1Pod {
  return {
    metadata: { name, namespace: ns },
    spec: {
      nodeName: node,
      containers: [{ name: 'c', image: 'example.invalid/app:1', volumeMounts: [{ name: 's', mountPath: '/s' }] }],
      volumes: [{ name: 's', secret: { secretName: secret } }],
    },
  };
}

beforeAll(async () => {
  ns = await useNamespace('admission');
  core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
});

describe('the test control plane runs a real cluster’s admission chain', () => {
  it('ServiceAccount admission: a pod gets its account and the kube-api-access-* volume, mounted in every container', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'sa-demo' }, stringData: { k: 'v' } } });
    const pod = await core.createNamespacedPod({ namespace: ns, body: podOn('sa-demo', NODE_A, 'sa-demo') });
    expect(pod.spec?.serviceAccountName).toBe('default');
    const access = pod.spec?.volumes?.find((v) => /^kube-api-access-[a-z0-9]{5}$/.test(v.name));
    expect(access?.projected?.sources?.map((s) => Object.keys(s)[0])).toEqual(['serviceAccountToken', 'configMap', 'downwardAPI']);
    expect(pod.spec?.containers[0]?.volumeMounts?.map((m) => m.name)).toContain(access?.name);
  });

  it('Node authorizer: a node reads a Secret that a pod bound to it mounts, and no other', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'for-a' }, stringData: { k: 'a' } } });
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'for-b' }, stringData: { k: 'b' } } });
    await core.createNamespacedPod({ namespace: ns, body: podOn('on-a', NODE_A, 'for-a') });
    await core.createNamespacedPod({ namespace: ns, body: podOn('on-b', NODE_B, 'for-b') });
    // The authorizer's graph follows pods through an informer: wait until the grant shows.
    await waitFor(async () => (await kubectl(['get', 'secret', 'for-a', '-n', ns, ...asNode(NODE_A)])).code === 0, { what: `${NODE_A} reads secret for-a` });
    const other = await kubectl(['get', 'secret', 'for-b', '-n', ns, ...asNode(NODE_A)]);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toMatch(/no relationship found between node '.*' and this object/);
  });

  it('NodeRestriction: a node may create mirror pods only, and only of its own', async () => {
    const plain = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'not-mirror', namespace: ns },
      spec: { nodeName: NODE_A, containers: [{ name: 'c', image: 'x' }] },
    };
    const r = await kubectl(['create', '-f', '-', ...asNode(NODE_A)], { input: JSON.stringify(plain) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/can only create mirror pods/);
    const mirrorElsewhere = {
      ...plain,
      metadata: { ...plain.metadata, name: 'mirror-b', annotations: { 'kubernetes.io/config.mirror': 'x' } },
      spec: { ...plain.spec, nodeName: NODE_B },
    };
    const r2 = await kubectl(['create', '-f', '-', ...asNode(NODE_A)], { input: JSON.stringify(mirrorElsewhere) });
    expect(r2.code).not.toBe(0);
    expect(r2.stderr).toMatch(/can only create pods with spec.nodeName set to itself/);
  });
});

describe('Events about a parent whose pod is gone', () => {
  it('CheckpointActivated and CheckpointCollected are recorded (on the NodeCheckpoint, in default), never refused with HTTP 422', async () => {
    const node = `ev-${RUN}`;
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const kube = makeKubeClient(kubeConfigFor('admin'), { requestTimeoutMs: 10_000 });
    try {
      const a = makeActuators({ node, instance: 'agent-test', store: {} as never, manifests: {} as never, kube: () => kube, logger });
      // The usual case: the parent pod is gone, so the view has none.
      const parent = { id: `${ns}/gone`, namespace: ns, key: 'gone', pod: null } as unknown as ParentView<V1Pod>;
      for (const reason of ['CheckpointActivated', 'CheckpointCollected']) {
        await a.event(parent, { type: 'event', eventType: 'Normal', reason, message: `${parent.id}: ${reason}` });
      }
      expect(lines.filter((l) => l.msg === 'event not recorded')).toEqual([]);
      const events = await core.listNamespacedEvent({ namespace: CLUSTER_SCOPED_EVENTS_NAMESPACE, labelSelector: `lastseen.dev/node=${node}` });
      expect(events.items.map((e) => [e.reason, e.involvedObject.kind, e.involvedObject.name]).sort()).toEqual([
        ['CheckpointActivated', 'NodeCheckpoint', node],
        ['CheckpointCollected', 'NodeCheckpoint', node],
      ]);
      for (const e of events.items) expect(e.message).toContain(`${ns}/gone`);
    } finally {
      kube.close();
    }
  });
});

describe('Lease names split one way only, whatever the node names (dot-suffixed nodes)', () => {
  const ROOT = fileURLToPath(new URL('../../', import.meta.url));
  // Two nodes where one name ends with the other's: `cp-<run>` and `x.cp-<run>`.
  const SHORT = `cp-${RUN}`;
  const DOTTED = `x.${SHORT}`;
  let hbNs = '';
  const asHeartbeat = (node: string) => [
    '--as',
    `system:serviceaccount:${hbNs}:lastseen-heartbeat`,
    '--as-group',
    'system:serviceaccounts',
    '--as-group',
    `system:serviceaccounts:${hbNs}`,
    '--as-user-extra',
    `authentication.kubernetes.io/node-name=${node}`,
  ];
  const lease = (name: string, parent: string, node: string) =>
    JSON.stringify({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name, namespace: hbNs, labels: { 'lastseen.dev/node': node, 'lastseen.dev/parent': parent, 'app.kubernetes.io/managed-by': 'lastseen' } },
      spec: { holderIdentity: 'pod-1', leaseDurationSeconds: 20 },
    });
  const create = (node: string, name: string, parent: string) => kubectl(['create', '-f', '-', ...asHeartbeat(node)], { input: lease(name, parent, node) });

  beforeAll(async () => {
    hbNs = await useNamespace('adm-dots');
    const policy = await kubectl(['apply', '-f', `${ROOT}deploy/base/admission-policy.yaml`]);
    expect(policy.code, policy.stderr).toBe(0);
    const rbac = await kubectl(['create', 'role', 'hb', '--verb=create,update,get', '--resource=leases.coordination.k8s.io', '-n', hbNs]);
    expect(rbac.code, rbac.stderr).toBe(0);
    const bind = await kubectl(['create', 'rolebinding', 'hb', '--role=hb', `--serviceaccount=${hbNs}:lastseen-heartbeat`, '-n', hbNs]);
    expect(bind.code, bind.stderr).toBe(0);
  });

  it(`node cp-… cannot squat node x.cp-…'s Lease through a dotted parent key; each node writes its own`, async () => {
    // The squat: for node cp-…, `kube-apiserver.x` + `.cp-…` is its own name by the old check, and
    // exactly the Lease of node x.cp-… for parent kube-apiserver. Wait for the policy to be in force.
    const squatName = `kube-apiserver.${DOTTED}`;
    // A retry starts clean, and a squat that got through before the policy was in force (its
    // binding takes a moment) is removed, or the rightful owner's create below finds it.
    const clean = () => kubectl(['delete', 'lease', squatName, `kube-apiserver.${SHORT}`, '-n', hbNs, '--ignore-not-found']);
    await clean();
    const squat = await waitFor(
      async () => {
        const r = await create(SHORT, squatName, 'kube-apiserver.x');
        if (r.code === 0) await clean();
        return r.code !== 0 && r.stderr.includes('lastseen-lease-own-node') ? r : undefined;
      },
      { what: 'the lease policy to refuse the dotted parent key', timeoutMs: 30_000 },
    );
    expect(squat.stderr).toContain('may not name a parent key with a dot (kube-apiserver.x)');
    // The rightful owner writes it, and the short-named node its own.
    const owner = await create(DOTTED, squatName, 'kube-apiserver');
    expect(owner.stderr).toBe('');
    expect(owner.code).toBe(0);
    const own = await create(SHORT, `kube-apiserver.${SHORT}`, 'kube-apiserver');
    expect(own.stderr).toBe('');
    expect(own.code).toBe(0);
    // The other way round: node x.cp-… cannot take cp-…'s Lease.
    const reverse = await create(DOTTED, `kube-apiserver.${SHORT}`, 'kube-apiserver');
    expect(reverse.code).not.toBe(0);
    expect(reverse.stderr).toContain(`may only write the Lease named kube-apiserver.${DOTTED}`);
  });
});
