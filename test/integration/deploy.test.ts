/**
 * deploy/ and crds/ against a real kube-apiserver: the kustomize base applies, the CRD's schema
 * accepts what the agent writes and refuses what it must not, the RBAC grants exactly what each
 * identity needs, and the admission policies tie a node's credentials to that node.
 *
 * The base is applied for real (a server dry run of namespaced objects needs their namespace to
 * exist, and only real objects can be exercised). Impersonation stands in for pod-bound tokens:
 * `--as-user-extra authentication.kubernetes.io/node-name=...` is exactly the extra a kubelet-issued
 * token carries. The admission policies are deleted after this file so that later files, whose
 * service accounts carry no node extra, are not judged by them.
 */
import { readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { summarize } from '../../src/kube/nodecheckpoint-types.js';
import { BUILTIN_DEFAULTS, parsePolicyText, policyFor } from '../../src/policy/policy.js';
import { controlPlane, kubeConfigFor, kubectl, waitFor } from './harness.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NS = 'lastseen-system';
const AGENT = `system:serviceaccount:${NS}:lastseen-agent`;
const HEARTBEAT = `system:serviceaccount:${NS}:lastseen-heartbeat`;
const POLICIES = ['lastseen-lease-own-node', 'lastseen-nodecheckpoint-own-node', 'lastseen-heartbeat-pod-annotations'];
/** Unique per run, so NodeCheckpoints of other files (cluster-scoped) never collide. */
const RUN = Math.random().toString(36).slice(2, 8);
const NODE_A = `dep-${RUN}-node-a`;
const NODE_B = `dep-${RUN}-node-b`;

/** kubectl flags that impersonate a pod-bound service-account token (kubelet-issued) on `node`. */
function asPod(user: string, node: string | null, pod?: string): string[] {
  const flags = ['--as', user, '--as-group', 'system:serviceaccounts', '--as-group', `system:serviceaccounts:${NS}`, '--as-uid', `uid-${RUN}`];
  if (node !== null) flags.push('--as-user-extra', `authentication.kubernetes.io/node-name=${node}`);
  if (pod) flags.push('--as-user-extra', `authentication.kubernetes.io/pod-name=${pod}`);
  return flags;
}

function leaseYaml(name: string, labels: Record<string, string>, holder = 'pod-1'): string {
  return JSON.stringify({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace: NS, labels },
    spec: { holderIdentity: holder, leaseDurationSeconds: 20 },
  });
}

const heartbeatLabels = (node: string) => ({
  'lastseen.dev/node': node,
  'lastseen.dev/parent': 'kube-apiserver',
  'app.kubernetes.io/managed-by': 'lastseen',
});

function nodeCheckpoint(name: string): string {
  return JSON.stringify({ apiVersion: 'lastseen.dev/v1alpha1', kind: 'NodeCheckpoint', metadata: { name } });
}

const T = '2026-12-02T10:00:00Z';
function validStatus(node: string) {
  return summarize(
    node,
    [
      {
        namespace: 'kube-system',
        key: 'kube-apiserver',
        state: 'Active',
        phase: '',
        lastSeen: null,
        checkpointStored: true,
        checkpointActive: true,
        reason: 'no beat for 20s; confirmed',
        lastTransitionTime: T,
        policyOverrides: ['kube-apiserver'],
        tokensExpireAt: '2026-12-02T10:50:00Z',
      },
      {
        namespace: 'kube-system',
        key: 'kube-scheduler',
        state: 'Healthy',
        phase: 'Ready',
        lastSeen: T,
        checkpointStored: true,
        checkpointActive: false,
        reason: 'fresh',
        lastTransitionTime: T,
      },
    ],
    [{ type: 'Ready', status: 'True', lastTransitionTime: T, reason: 'AgentRunning', message: 'covering 2 parents' }],
    T,
  );
}

/** Update the status subresource as admin, the way the agent does (replace, keeping nulls). */
async function replaceStatus(name: string, status: unknown) {
  const got = JSON.parse((await kubectl(['get', 'nodecheckpoint', name, '-o', 'json'])).stdout);
  return kubectl(['replace', '--subresource=status', '-f', '-'], { input: JSON.stringify({ ...got, status }) });
}

/**
 * A merge patch sent as an impersonated pod-bound token, straight to the api-server: `kubectl
 * patch` would GET first, which the heartbeat may not (and does not) do.
 */
async function mergePatchAs(path: string, body: unknown, user: string, extra: Record<string, string>): Promise<{ status: number; text: string }> {
  const opts: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  await kubeConfigFor('admin').applyToHTTPSOptions(opts);
  const headers: Record<string, string | string[]> = {
    'Content-Type': 'application/merge-patch+json',
    'Impersonate-User': user,
    'Impersonate-Group': ['system:serviceaccounts', `system:serviceaccounts:${NS}`],
    'Impersonate-Uid': `uid-${RUN}`,
  };
  for (const [k, v] of Object.entries(extra)) headers[`Impersonate-Extra-${encodeURIComponent(k)}`] = v;
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, controlPlane().server), { method: 'PATCH', headers, ca: opts.ca, cert: opts.cert, key: opts.key }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Merge-patch the status subresource as admin. */
function patchStatus(name: string, status: unknown) {
  return kubectl(['patch', 'nodecheckpoint', name, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
}

beforeAll(async () => {
  const apply = await kubectl(['apply', '-k', `${ROOT}deploy/base`]);
  expect(apply.stderr).toBe('');
  expect(apply.code).toBe(0);
  for (const name of [NODE_A, NODE_B]) expect((await kubectl(['create', '-f', '-'], { input: nodeCheckpoint(name) })).code).toBe(0);
});

afterAll(async () => {
  await kubectl(['delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', ...POLICIES, '--ignore-not-found']);
  await kubectl(['delete', '-f', `${ROOT}deploy/components/annotation-channel/rbac.yaml`, '--ignore-not-found']);
  await kubectl(['delete', 'nodecheckpoint', NODE_A, NODE_B, `dep-${RUN}-new`, '--ignore-not-found']);
});

describe('the kustomize base', () => {
  it('passes a server-side dry run once applied (every object valid, namespace present)', async () => {
    const dry = await kubectl(['apply', '--dry-run=server', '-k', `${ROOT}deploy/base`]);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    for (const kind of [
      'daemonset.apps/lastseen-agent',
      'configmap/lastseen-policy',
      'validatingadmissionpolicy.admissionregistration.k8s.io/lastseen-lease-own-node',
    ]) {
      expect(dry.stdout).toContain(kind);
    }
  });

  it('ships a policy ConfigMap that spells out exactly the built-in defaults, plus the kube-apiserver override', async () => {
    const cm = await kubectl(['get', 'configmap', 'lastseen-policy', '-n', NS, '-o', 'jsonpath={.data.policy\\.yaml}']);
    expect(cm.code).toBe(0);
    expect(cm.stdout).toBe(await readFile(`${ROOT}deploy/base/policy.yaml`, 'utf8'));
    const r = parsePolicyText(cm.stdout);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.policy.defaults).toEqual(BUILTIN_DEFAULTS);
    const apiserver = policyFor(r.policy, { namespace: 'kube-system', key: 'kube-apiserver', labels: {} });
    expect(apiserver.applied).toEqual(['kube-apiserver']);
    expect(apiserver.policy.whenApiUnreachable).toBe('activate');
    expect(policyFor(r.policy, { namespace: 'kube-system', key: 'etcd', labels: {} }).policy.whenApiUnreachable).toBe('hold');
  });

  it('runs the agent with the least privilege that works', async () => {
    const got = await kubectl(['get', 'daemonset', 'lastseen-agent', '-n', NS, '-o', 'json']);
    expect(got.code).toBe(0);
    const ds = JSON.parse(got.stdout);
    const pod = ds.spec.template.spec;
    const c = pod.containers[0];
    expect(pod).toMatchObject({ hostNetwork: true, priorityClassName: 'system-node-critical', serviceAccountName: 'lastseen-agent' });
    expect(pod.tolerations).toContainEqual({ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' });
    expect(c.securityContext).toMatchObject({
      runAsUser: 0,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    // Only what copies of non-root parents need (owner, group and mode of their volumes), and
    // NET_ADMIN for the node-local nftables redirect of `handover: redirect` (the agent is hostNetwork).
    expect(c.securityContext.capabilities.add).toEqual(['CHOWN', 'FOWNER', 'DAC_READ_SEARCH', 'NET_ADMIN']);
    expect(c.securityContext.privileged).toBe(false);
    expect(c.resources).toEqual({ requests: { cpu: '20m', memory: '128Mi' }, limits: { cpu: '200m', memory: '256Mi' } });
    expect(c.livenessProbe.httpGet).toMatchObject({ path: '/healthz', port: 'health' });
    expect(c.readinessProbe.httpGet).toMatchObject({ path: '/readyz', port: 'health' });
    expect(c.ports).toContainEqual(expect.objectContaining({ name: 'health', containerPort: 9870 }));
    const env = Object.fromEntries(
      c.env.map((e: { name: string; valueFrom: { fieldRef: { fieldPath: string } } }) => [e.name, e.valueFrom.fieldRef.fieldPath]),
    );
    expect(env).toEqual({ NODE_NAME: 'spec.nodeName', POD_NAME: 'metadata.name', POD_NAMESPACE: 'metadata.namespace', POD_UID: 'metadata.uid' });
    const hostPaths = Object.fromEntries(
      pod.volumes.filter((v: { hostPath?: unknown }) => v.hostPath).map((v: { name: string; hostPath: { path: string } }) => [v.hostPath.path, v.name]),
    );
    expect(Object.keys(hostPaths).sort()).toEqual(['/etc/kubernetes/manifests', '/run/lastseen/heartbeats', '/var/lib/lastseen']);
    const mount = (name: string) => c.volumeMounts.find((m: { name: string }) => m.name === name);
    // Writable: the agent removes a retired checkpoint's own beat file (src/agent/actuators.ts).
    expect(mount(hostPaths['/run/lastseen/heartbeats']).readOnly).toBeFalsy();
    expect(mount(hostPaths['/etc/kubernetes/manifests']).readOnly).toBeFalsy();
    for (const o of [ds, ds.spec.template]) expect(o.metadata.labels['app.kubernetes.io/name']).toBe('lastseen');
  });

  it('the example overlay changes the node selector and the policy, and passes a server dry run', async () => {
    const built = await kubectl(['kustomize', `${ROOT}deploy/overlays/example`]);
    expect(built.code).toBe(0);
    const docs = parseAllDocuments(built.stdout).map((d) => d.toJS());
    const ds = docs.find((d) => d.kind === 'DaemonSet');
    expect(ds.spec.template.spec.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux', 'node-role.kubernetes.io/control-plane': '' });
    const cm = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'lastseen-policy');
    const r = parsePolicyText(cm.data['policy.yaml']);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.policy.defaults.intervalMs).toBe(2_000);
    expect(docs.some((d) => d.kind === 'ClusterRole' && d.metadata.name === 'lastseen-heartbeat-annotations')).toBe(true);
    const dry = await kubectl(['apply', '--dry-run=server', '-k', `${ROOT}deploy/overlays/example`]);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
  });
});

describe('the NodeCheckpoint CRD', () => {
  it('accepts the status summarize() builds and shows it in its printer columns', async () => {
    const r = await replaceStatus(NODE_A, validStatus(NODE_A));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const back = await kubectl(['get', 'nckpt', NODE_A, '-o', 'json']);
    expect(JSON.parse(back.stdout).status).toEqual(validStatus(NODE_A));
    const table = await kubectl(['get', 'nodecheckpoints', NODE_A]);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header?.split(/\s{2,}/)).toEqual(['NAME', 'PARENTS', 'ACTIVE', 'OLDEST SILENCE', 'AGE']);
    expect(row?.split(/\s+/).slice(0, 3)).toEqual([NODE_A, '2', '1']);
  });

  const parent = { namespace: 'kube-system', key: 'etcd', state: 'Healthy' };
  it.each([
    ['an unknown state', { parents: [{ ...parent, state: 'Dead' }] }, 'Unsupported value: "Dead"'],
    ['an unknown phase', { parents: [{ ...parent, phase: 'Running' }] }, 'Unsupported value: "Running"'],
    ['a string for a boolean', { parents: [{ ...parent, checkpointActive: 'yes' }] }, 'must be of type boolean'],
    ['a number for a string', { parents: [{ ...parent, reason: 42 }] }, 'must be of type string'],
    ['a parent without a key', { parents: [{ namespace: 'kube-system', state: 'Healthy' }] }, 'Required value'],
    ['a lastSeen that is not a date-time', { parents: [{ ...parent, lastSeen: 'yesterday' }] }, 'lastSeen'],
    ['a negative count', { parentCount: -1 }, 'parentCount'],
    [
      'a condition status outside True/False/Unknown',
      { conditions: [{ type: 'Ready', status: 'Yes', lastTransitionTime: T, reason: 'X', message: '' }] },
      'Unsupported value: "Yes"',
    ],
    ['status.node naming another node', { node: 'someone-else' }, 'status.node must equal metadata.name'],
  ])('rejects %s', async (_what, status, message) => {
    const r = await patchStatus(NODE_B, status);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(message);
  });
});

type Scope = { ns: string } | 'all' | 'cluster';
const RBAC: Array<[string, string, string, string, Scope, boolean]> = [
  // who, verb, resource, why, scope, allowed
  ['agent', 'watch', 'pods', 'watches its node’s pods in every namespace', 'all', true],
  ['agent', 'list', 'pods', 'lists them', 'all', true],
  ['agent', 'get', 'pods', 'reads a parent', { ns: 'kube-system' }, true],
  ['agent', 'delete', 'pods', 'never deletes pods', { ns: 'kube-system' }, false],
  ['agent', 'patch', 'pods', 'never changes pods', { ns: 'kube-system' }, false],
  ['agent', 'create', 'pods/exec', 'never execs', { ns: 'kube-system' }, false],
  ['agent', 'watch', 'leases.coordination.k8s.io', 'watches heartbeats', 'all', true],
  ['agent', 'get', 'leases.coordination.k8s.io', 'confirms silence with a live read', { ns: 'kube-system' }, true],
  ['agent', 'create', 'leases.coordination.k8s.io', 'never writes heartbeats', { ns: 'kube-system' }, false],
  ['agent', 'update', 'leases.coordination.k8s.io', 'never writes heartbeats', { ns: 'kube-system' }, false],
  ['agent', 'delete', 'leases.coordination.k8s.io', 'never deletes heartbeats', { ns: 'kube-system' }, false],
  ['agent', 'get', 'secrets', 'copies the secrets a parent mounts', { ns: 'kube-system' }, true],
  ['agent', 'list', 'secrets', 'never lists secrets', { ns: 'kube-system' }, false],
  ['agent', 'watch', 'secrets', 'never watches secrets', 'all', false],
  ['agent', 'update', 'secrets', 'never writes secrets', { ns: 'kube-system' }, false],
  ['agent', 'get', 'configmaps', 'copies the configMaps a parent mounts', { ns: 'kube-system' }, true],
  ['agent', 'list', 'configmaps', 'does not list configMaps elsewhere', { ns: 'kube-system' }, false],
  ['agent', 'watch', 'configmaps/lastseen-policy', 'watches its policy', { ns: NS }, true],
  ['agent', 'watch', 'configmaps/other', 'watches no other configMap', { ns: NS }, false],
  ['agent', 'create', 'events', 'records Events', { ns: 'kube-system' }, true],
  ['agent', 'patch', 'events', 'updates repeated Events', { ns: 'kube-system' }, true],
  ['agent', 'create', 'events.events.k8s.io', 'records Events (events.k8s.io)', { ns: 'kube-system' }, true],
  ['agent', 'delete', 'events', 'never deletes Events', { ns: 'kube-system' }, false],
  ['agent', 'create', 'nodecheckpoints.lastseen.dev', 'creates its NodeCheckpoint', 'cluster', true],
  ['agent', 'update', 'nodecheckpoints.lastseen.dev/status', 'writes its status', 'cluster', true],
  ['agent', 'delete', 'nodecheckpoints.lastseen.dev', 'never deletes NodeCheckpoints', 'cluster', false],
  ['agent', 'list', 'nodecheckpoints.lastseen.dev', 'has no need to list NodeCheckpoints', 'cluster', false],
  ['agent', 'get', 'nodes', 'reads its Node (the owner of its NodeCheckpoint)', 'cluster', true],
  ['agent', 'list', 'nodes', 'lists no nodes', 'cluster', false],
  ['agent', 'update', 'nodes', 'never writes nodes', 'cluster', false],
  ['agent', 'create', 'serviceaccounts/token', 'mints no tokens unless lastseen-agent-tokens is bound', { ns: 'kube-system' }, false],
  ['agent', 'create', 'serviceaccounts/lastseen-agent/token', "mints its own account's token (its static-pod copy mounts one)", { ns: NS }, true],
  ['agent', 'create', 'serviceaccounts/lastseen-heartbeat/token', 'mints no other token in its namespace', { ns: NS }, false],
  ['heartbeat', 'create', 'leases.coordination.k8s.io', 'creates its Lease', { ns: NS }, true],
  ['heartbeat', 'update', 'leases.coordination.k8s.io', 'renews it', { ns: NS }, true],
  ['heartbeat', 'get', 'leases.coordination.k8s.io', 're-reads it on conflict', { ns: NS }, true],
  ['heartbeat', 'delete', 'leases.coordination.k8s.io', 'cannot delete Leases', { ns: NS }, false],
  ['heartbeat', 'patch', 'leases.coordination.k8s.io', 'does not patch Leases', { ns: NS }, false],
  ['heartbeat', 'list', 'leases.coordination.k8s.io', 'does not list Leases', { ns: NS }, false],
  ['heartbeat', 'create', 'leases.coordination.k8s.io', 'has no grant outside its namespace', { ns: 'kube-system' }, false],
  ['heartbeat', 'patch', 'pods', 'has no pods/patch unless the annotation-channel component is added', { ns: NS }, false],
  ['heartbeat', 'get', 'pods', 'reads no pods', { ns: NS }, false],
  ['heartbeat', 'delete', 'pods', 'cannot delete pods', { ns: NS }, false],
  ['heartbeat', 'get', 'secrets', 'reads no secrets', { ns: NS }, false],
  ['heartbeat', 'get', 'configmaps', 'reads no configMaps (its policy is a mounted file)', { ns: NS }, false],
  ['heartbeat', 'create', 'events', 'records no Events', { ns: NS }, false],
  ['heartbeat', 'get', 'nodecheckpoints.lastseen.dev', 'has no business with NodeCheckpoints', 'cluster', false],
];

describe('RBAC (kubectl auth can-i as each service account)', () => {
  it.each(RBAC)('%s: %s %s (%s)', async (who, verb, resource, _why, scope, allowed) => {
    // `resource/subresource`, `configmaps/<name>`, or `resource/<name>/subresource`.
    const [res, second, third] = resource.split('/');
    const args = ['auth', 'can-i', verb, third ? `${res}/${second}` : second && !resource.startsWith('configmaps/') ? res! : resource];
    if (third) args.push(`--subresource=${third}`);
    else if (second && !resource.startsWith('configmaps/')) args.push(`--subresource=${second}`);
    if (scope === 'all') args.push('--all-namespaces');
    else if (scope !== 'cluster') args.push('-n', scope.ns);
    args.push('--as', who === 'agent' ? AGENT : HEARTBEAT);
    const r = await kubectl(args);
    expect(r.stdout.trim()).toBe(allowed ? 'yes' : 'no');
  });
});

describe('admission: a node’s credentials are good for that node only', () => {
  const createLease = (node: string | null, name: string, labels: Record<string, string>) =>
    kubectl(['create', '-f', '-', ...asPod(HEARTBEAT, node)], { input: leaseYaml(name, labels) });
  const replaceLease = (node: string, name: string, labels: Record<string, string>, holder: string) =>
    kubectl(['replace', '-f', '-', ...asPod(HEARTBEAT, node)], { input: leaseYaml(name, labels, holder) });

  it('refuses a heartbeat Lease for another node (once the policy is in force) and allows its own', async () => {
    // Policies reach the admission plugin through an informer: wait until the refusal shows.
    const refused = await waitFor(
      async () => {
        const r = await createLease(NODE_A, `kube-apiserver.${NODE_B}`, heartbeatLabels(NODE_B));
        return r.code !== 0 && r.stderr.includes('lastseen-lease-own-node') ? r : undefined;
      },
      { what: 'the lease policy to refuse a write for another node', timeoutMs: 30_000 },
    );
    expect(refused.stderr).toContain(`may not write a Lease labelled lastseen.dev/node=${NODE_B}`);
    const own = await createLease(NODE_A, `kube-apiserver.${NODE_A}`, heartbeatLabels(NODE_A));
    expect(own.stderr).toBe('');
    expect(own.code).toBe(0);
  });

  it('allows renewing its own Lease; refuses renewing or taking over another node’s', async () => {
    const name = `kube-apiserver.${NODE_A}`;
    expect((await replaceLease(NODE_A, name, heartbeatLabels(NODE_A), 'pod-2')).code).toBe(0);
    const renewOther = await replaceLease(NODE_B, name, heartbeatLabels(NODE_A), 'pod-evil');
    expect(renewOther.code).not.toBe(0);
    expect(renewOther.stderr).toContain(`a heartbeat on node ${NODE_B} may not write a Lease labelled lastseen.dev/node=${NODE_A}`);
    const takeOver = await replaceLease(NODE_B, name, heartbeatLabels(NODE_B), 'pod-evil');
    expect(takeOver.code).not.toBe(0);
    expect(takeOver.stderr).toContain(`may not take over the Lease of node ${NODE_A}`);
    const holder = await kubectl(['get', 'lease', name, '-n', NS, '-o', 'jsonpath={.spec.holderIdentity}']);
    expect(holder.stdout).toBe('pod-2');
  });

  it('refuses a Lease named for another node even when labelled with its own (name squatting)', async () => {
    const squat = await createLease(NODE_A, `kube-apiserver.${NODE_B}`, heartbeatLabels(NODE_A));
    expect(squat.code).not.toBe(0);
    expect(squat.stderr).toContain(`a heartbeat on node ${NODE_A} may only write the Lease named kube-apiserver.${NODE_A}`);
    expect(squat.stderr).toContain(`not kube-apiserver.${NODE_B}`);
    // A checkpoint copy's own Lease carries the .checkpoint suffix, and only with the checkpoint role.
    const checkpointLabels = { ...heartbeatLabels(NODE_A), 'lastseen.dev/role': 'checkpoint' };
    const ownCheckpoint = await createLease(NODE_A, `kube-apiserver.${NODE_A}.checkpoint`, checkpointLabels);
    expect(ownCheckpoint.stderr).toBe('');
    expect(ownCheckpoint.code).toBe(0);
    const squatCheckpoint = await createLease(NODE_A, `kube-apiserver.${NODE_B}.checkpoint`, checkpointLabels);
    expect(squatCheckpoint.code).not.toBe(0);
    expect(squatCheckpoint.stderr).toContain(`may only write the Lease named kube-apiserver.${NODE_A}.checkpoint`);
    const otherKey = await createLease(NODE_A, `etcd.${NODE_A}`, heartbeatLabels(NODE_A));
    expect(otherKey.code).not.toBe(0);
    expect(otherKey.stderr).toContain(`not etcd.${NODE_A}`);
  });

  it('refuses a token bound to no node, and Leases that are not lastseen heartbeats', async () => {
    const unbound = await createLease(null, `kube-apiserver.${NODE_A}-x`, heartbeatLabels(NODE_A));
    expect(unbound.code).not.toBe(0);
    expect(unbound.stderr).toContain('authentication.kubernetes.io/node-name is missing');
    const leaderElection = await createLease(NODE_A, 'kube-scheduler', {});
    expect(leaderElection.code).not.toBe(0);
    expect(leaderElection.stderr).toContain('may only write Leases labelled lastseen.dev/node');
  });

  it('lets the agent create and write the status of its own NodeCheckpoint only', async () => {
    const own = await kubectl(['create', '-f', '-', ...asPod(AGENT, `dep-${RUN}-new`)], { input: nodeCheckpoint(`dep-${RUN}-new`) });
    expect(own.stderr).toBe('');
    expect(own.code).toBe(0);
    const other = await kubectl(['create', '-f', '-', ...asPod(AGENT, NODE_A)], { input: nodeCheckpoint(`dep-${RUN}-other`) });
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain(`the lastseen agent on node ${NODE_A} may only write the NodeCheckpoint named after its own node`);

    // The agent holds update (not patch) on the status subresource: replace, with a resourceVersion.
    const statusUpdate = async (object: string, node: string) => {
      const got = JSON.parse((await kubectl(['get', 'nckpt', object, '-o', 'json'])).stdout);
      got.status = validStatus(object);
      return kubectl(['replace', '--subresource=status', '-f', '-', ...asPod(AGENT, node)], { input: JSON.stringify(got) });
    };
    const ownStatus = await statusUpdate(NODE_B, NODE_B);
    expect(ownStatus.stderr).toBe('');
    expect(ownStatus.code).toBe(0);
    const otherStatus = await statusUpdate(NODE_A, NODE_B);
    expect(otherStatus.code).not.toBe(0);
    expect(otherStatus.stderr).toContain(`may only write the NodeCheckpoint named after its own node, not ${NODE_A}`);
  });

  it('with the annotation channel, lets a heartbeat change only lastseen.dev/* annotations of its own pod', async () => {
    expect((await kubectl(['apply', '-f', `${ROOT}deploy/components/annotation-channel/rbac.yaml`])).code).toBe(0);
    for (const name of [`hb-${RUN}`, `other-${RUN}`]) {
      // As a parent with the heartbeat sidecar runs: under its account (the ServiceAccount admission plugin refuses a pod whose account does not exist).
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: NS, labels: { app: 'x' } },
        spec: { serviceAccountName: 'lastseen-heartbeat', containers: [{ name: 'c', image: 'example.invalid/x:1' }] },
      };
      expect((await kubectl(['create', '-f', '-'], { input: JSON.stringify(pod) })).code).toBe(0);
    }
    const patch = (pod: string, body: unknown) =>
      mergePatchAs(`/api/v1/namespaces/${NS}/pods/${pod}`, body, HEARTBEAT, {
        'authentication.kubernetes.io/node-name': NODE_A,
        'authentication.kubernetes.io/pod-name': `hb-${RUN}`,
      });
    const beat = { metadata: { annotations: { 'lastseen.dev/last-seen': '2026-12-02T10:00:00.000000Z', 'lastseen.dev/sequence': '7' } } };
    // RBAC grants take effect through an informer too.
    await waitFor(async () => (await patch(`hb-${RUN}`, beat)).status === 200, { what: 'pods/patch for the heartbeat to take effect' });
    const annotated = await kubectl(['get', 'pod', `hb-${RUN}`, '-n', NS, '-o', 'jsonpath={.metadata.annotations.lastseen\\.dev/sequence}']);
    expect(annotated.stdout).toBe('7');

    const other = await patch(`other-${RUN}`, beat);
    expect(other.status).toBe(403);
    expect(other.text).toContain('may only patch its own pod');
    const foreignAnnotation = await patch(`hb-${RUN}`, { metadata: { annotations: { 'example.com/x': 'y' } } });
    expect(foreignAnnotation.status).toBe(403);
    expect(foreignAnnotation.text).toContain('may only change lastseen.dev/* annotations');
    const label = await patch(`hb-${RUN}`, { metadata: { labels: { app: 'hijacked' } } });
    expect(label.status).toBe(403);
    expect(label.text).toContain('spec, labels, finalizers and owners must stay');
    // The whole container with a new image (a merge patch replaces the list; dropping the
    // kube-api-access mount the ServiceAccount admission plugin added would be refused as invalid
    // before the policy is asked).
    const own = JSON.parse((await kubectl(['get', 'pod', `hb-${RUN}`, '-n', NS, '-o', 'json'])).stdout);
    const image = await patch(`hb-${RUN}`, { spec: { containers: [{ ...own.spec.containers[0], image: 'example.invalid/evil:1' }] } });
    expect(image.status).toBe(403);
    expect(image.text).toContain('lastseen-heartbeat-pod-annotations');
    const read = await kubectl(['get', 'pod', `hb-${RUN}`, '-n', NS, '-o', 'jsonpath={.spec.containers[0].image}']);
    expect(read.stdout).toBe('example.invalid/x:1');
  });
});
