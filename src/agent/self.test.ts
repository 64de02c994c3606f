import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { DataResolver } from '../checkpoint/capture.js';
import { ManifestDir } from '../checkpoint/manifests.js';
import { Store } from '../checkpoint/store.js';
import { LABEL_PARENT } from '../core/names.js';
import { ANNOTATION_COPY_DATA, COPY_ENV, copyOfAgentPod, SelfCheckpoint } from './self.js';

const agentPod = (args: string[]): V1Pod => ({
  metadata: { name: 'lastseen-agent-abcde', namespace: 'lastseen-system' },
  spec: {
    hostNetwork: true,
    containers: [
      {
        name: 'agent',
        image: 'lastseen',
        args,
        ports: [{ name: 'health', containerPort: 9870 }],
        livenessProbe: { httpGet: { path: '/healthz', port: 'health' as unknown as number } },
        readinessProbe: { httpGet: { path: '/readyz', port: 9870 } },
      },
    ],
  },
});

describe("the agent's own copy", () => {
  it('serves its health endpoints on the next port, so it and the DaemonSet pod can run side by side', () => {
    const pod = agentPod(['agent', '--health-port=9870', '--policy-file=/etc/lastseen/policy.yaml']);
    const c = copyOfAgentPod(pod).spec!.containers[0]!;
    expect(c.args).toEqual(['agent', '--health-port=9871', '--policy-file=/etc/lastseen/policy.yaml']);
    expect(c.livenessProbe?.httpGet?.port).toBe(9871);
    expect(c.readinessProbe?.httpGet?.port).toBe(9871);
    expect(c.ports).toBeUndefined();
    // The pod itself is untouched.
    expect(pod.spec!.containers[0]!.args).toContain('--health-port=9870');
  });

  it('is told it is the copy (an env var: an older agent ignores it), once, beside the env the pod has', () => {
    const pod = agentPod(['agent']);
    pod.spec!.containers[0]!.env = [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: COPY_ENV, value: 'false' },
    ];
    const c = copyOfAgentPod(pod).spec!.containers[0]!;
    expect(c.env).toEqual([
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: COPY_ENV, value: 'true' },
    ]);
    expect(copyOfAgentPod(copyOfAgentPod(agentPod(['agent']))).spec!.containers[0]!.env).toEqual([{ name: COPY_ENV, value: 'true' }]);
    // The DaemonSet's pod itself is not.
    expect(pod.spec!.containers[0]!.env?.find((e) => e.name === COPY_ENV)?.value).toBe('false');
  });

  it('moves the default port too when the pod names none', () => {
    const c = copyOfAgentPod(agentPod(['agent'])).spec!.containers[0]!;
    expect(c.args).toEqual(['agent', '--health-port=9871']);
    expect(c.readinessProbe?.httpGet?.port).toBe(9871);
  });
});

describe('which pod the copy is captured from', () => {
  // Nothing here captures: the folders are never written and no api-server is asked.
  const deps = {
    store: new Store({ stateDir: join(tmpdir(), 'lastseen-self-test-state') }),
    manifests: new ManifestDir({ dir: join(tmpdir(), 'lastseen-self-test-manifests') }),
    kube: (): never => {
      throw new Error('no api-server in these tests');
    },
    logger: pino({ level: 'silent' }),
  };
  const self = () =>
    new SelfCheckpoint({
      node: 'n1',
      podName: 'lastseen-agent-old-n1',
      namespace: 'lastseen-system',
      ...deps,
    });
  const labels = { 'app.kubernetes.io/name': 'lastseen', 'app.kubernetes.io/component': 'agent' };
  const dsPod = (name: string, extra: Partial<V1Pod['metadata']> = {}): V1Pod => ({
    metadata: {
      name,
      namespace: 'lastseen-system',
      labels,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'lastseen-agent', uid: 'u', controller: true }],
      ...extra,
    },
    spec: { nodeName: 'n1', containers: [{ name: 'agent' }] },
    status: { containerStatuses: [{ name: 'agent', ready: false, restartCount: 0, image: 'lastseen', imageID: '', state: { running: {} } }] },
  });
  const mirror: V1Pod = {
    metadata: {
      name: 'lastseen-agent-old-n1',
      namespace: 'lastseen-system',
      labels: { ...labels, [LABEL_PARENT]: 'lastseen-agent' },
      annotations: { 'kubernetes.io/config.mirror': 'x' },
    },
    spec: { nodeName: 'n1', containers: [] },
  };

  it('the DaemonSet pod follows only itself', () => {
    const s = new SelfCheckpoint({
      node: 'n1',
      podName: 'lastseen-agent-abcde',
      namespace: 'lastseen-system',
      ...deps,
    });
    const pods = [mirror, dsPod('lastseen-agent-abcde'), dsPod('lastseen-agent-other')];
    expect(pods.filter((p) => s.isOwnDaemonSetPod(p)).map((p) => p.metadata?.name)).toEqual(['lastseen-agent-abcde']);
  });

  it('the static copy follows the DaemonSet pod of its node once it has seen itself as a mirror pod (a DaemonSet update reaches it)', () => {
    const s = self();
    const next = dsPod('lastseen-agent-new');
    expect(s.isOwnDaemonSetPod(next)).toBe(false); // not yet known to be the copy
    expect(s.isOwnDaemonSetPod(mirror)).toBe(false);
    expect(s.isOwnDaemonSetPod(next)).toBe(true);
    // Never a pod being deleted, of another node, of another namespace, not owned by a DaemonSet,
    // not an agent, or of another DaemonSet (another copy's).
    expect(s.isOwnDaemonSetPod(dsPod('lastseen-agent-gone', { deletionTimestamp: new Date() }))).toBe(false);
    expect(s.isOwnDaemonSetPod({ ...next, spec: { nodeName: 'n2', containers: [] } })).toBe(false);
    // Nor one whose container does not run yet: the copy would stop before that pod retries the node lock.
    expect(s.isOwnDaemonSetPod({ ...next, status: { containerStatuses: [] } })).toBe(false);
    expect(
      s.isOwnDaemonSetPod({
        ...next,
        status: {
          containerStatuses: [{ name: 'agent', ready: false, restartCount: 0, image: 'x', imageID: '', state: { waiting: { reason: 'ImagePullBackOff' } } }],
        },
      }),
    ).toBe(false);
    expect(s.isOwnDaemonSetPod(dsPod('x', { namespace: 'kube-system' }))).toBe(false);
    expect(s.isOwnDaemonSetPod(dsPod('y', { ownerReferences: [] }))).toBe(false);
    expect(s.isOwnDaemonSetPod(dsPod('z', { labels: { 'app.kubernetes.io/name': 'other' } }))).toBe(false);
    expect(
      s.isOwnDaemonSetPod(
        dsPod('lastseen-agent-b-xyz', {
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'lastseen-agent-b', uid: 'u2', controller: true }],
        }),
      ),
    ).toBe(false);
  });
});

// The copy as the store writes it and the kubelet runs it: a real Store and manifest folder in a
// temporary folder, the api-server's answers from a resolver over fixed objects.
describe("the agent's own copy on disk", () => {
  const NS = 'lastseen-system';
  const ID = `${NS}/lastseen-agent`;
  const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
  const labels = { 'app.kubernetes.io/name': 'lastseen', 'app.kubernetes.io/component': 'agent' };
  let dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    dirs = [];
  });

  /** The agent's DaemonSet pod as the api-server returns it, with the volume the ServiceAccount admission plugin adds. */
  const dsPod = (name: string, image: string, uid = `uid-${name}`): V1Pod => ({
    metadata: {
      name,
      namespace: NS,
      uid,
      labels,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'lastseen-agent', uid: 'uid-ds', controller: true }],
    },
    spec: {
      nodeName: 'n1',
      serviceAccountName: 'lastseen-agent',
      hostNetwork: true,
      containers: [
        {
          name: 'agent',
          image,
          args: ['agent', '--health-port=9870', '--policy-file=/etc/lastseen/policy.yaml'],
          volumeMounts: [
            { name: 'checkpoints', mountPath: '/var/lib/lastseen' },
            { name: 'policy', mountPath: '/etc/lastseen', readOnly: true },
            { name: 'kube-api-access-x7k2p', mountPath: SA_DIR, readOnly: true },
          ],
        },
      ],
      volumes: [
        { name: 'checkpoints', hostPath: { path: '/var/lib/lastseen', type: 'DirectoryOrCreate' } },
        { name: 'policy', configMap: { name: 'lastseen-policy', optional: true } },
        {
          name: 'kube-api-access-x7k2p',
          projected: {
            defaultMode: 0o644,
            sources: [
              { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
            ],
          },
        },
      ],
    },
    // Its agent runs (as a standby, not Ready, while the copy holds the node lock).
    status: { containerStatuses: [{ name: 'agent', ready: false, restartCount: 0, image, imageID: '', state: { running: {} } }] },
  });

  /** The api-server's objects; every TokenRequest gets a new token, as the real one does. */
  const cluster = (policy = 'defaults: {}\n') => {
    const calls: string[] = [];
    let minted = 0;
    const resolver: DataResolver = {
      secret: async (ns, name) => {
        calls.push(`secret ${ns}/${name}`);
        return null;
      },
      configMap: async (ns, name): Promise<Record<string, Buffer> | null> => {
        calls.push(`configMap ${ns}/${name}`);
        if (ns === NS && name === 'kube-root-ca.crt') return { 'ca.crt': Buffer.from('CLUSTER-CA') };
        if (ns === NS && name === 'lastseen-policy') return { 'policy.yaml': Buffer.from(policy) };
        return null;
      },
      serviceAccountToken: async (ns, sa) => {
        calls.push(`token ${ns}/${sa}`);
        return Buffer.from(`token-${ns}-${sa}-${++minted}`);
      },
    };
    return { calls, resolver };
  };

  const node = () => {
    const root = mkdtempSync(join(tmpdir(), 'lastseen-self-copy-'));
    dirs.push(root);
    const store = new Store({ stateDir: join(root, 'state') });
    mkdirSync(join(root, 'manifests'));
    const manifests = new ManifestDir({ dir: join(root, 'manifests') });
    /** One agent process: a new one knows nothing of what an earlier one captured. */
    const agent = (podName: string, resolver: DataResolver) =>
      new SelfCheckpoint({
        node: 'n1',
        podName,
        namespace: NS,
        store,
        manifests,
        kube: (): never => {
          throw new Error('the resolver answers for the api-server here');
        },
        resolver: () => resolver,
        logger: pino({ level: 'silent' }),
      });
    const folder = store.checkpointDir(ID);
    const active = (): V1Pod => JSON.parse(readFileSync(join(manifests.dir, 'lastseen-lastseen-system-lastseen-agent.json'), 'utf8'));
    return { store, manifests, agent, folder, active };
  };

  /** The static copy's mirror pod, as the kubelet creates it from the active manifest. */
  const mirrorOf = (manifest: V1Pod): V1Pod => ({
    metadata: {
      ...manifest.metadata,
      name: `${manifest.metadata?.name}-n1`,
      annotations: { ...manifest.metadata?.annotations, 'kubernetes.io/config.mirror': 'x' },
    },
    spec: { containers: [], ...manifest.spec, nodeName: 'n1' },
  });

  it("on an upgrade the acting copy captures the DaemonSet's new pod, the service account's token, ca.crt and namespace with it", async () => {
    const n = node();
    const api = cluster();
    await n.agent('lastseen-agent-aaaaa', api.resolver).refresh(dsPod('lastseen-agent-aaaaa', 'lastseen:1'));
    // The DaemonSet's pod went (the update) and the copy took the node lock; the new pod stands by.
    const copy = n.agent('lastseen-agent-aaaaa-n1', api.resolver);
    const next = dsPod('lastseen-agent-bbbbb', 'lastseen:2');
    const pods = [next, mirrorOf(n.active())];
    for (let i = 0; i < 2; i++) {
      const own = pods.find((p) => copy.isOwnDaemonSetPod(p));
      if (own) await copy.refresh(own);
    }

    const stored = await n.store.load(ID);
    expect(stored?.sourcePodName).toBe('lastseen-agent-bbbbb');
    expect(stored?.manifest.spec?.containers.map((c) => c.image)).toEqual(['lastseen:2']);
    expect(n.active()).toEqual(stored?.manifest);
    // The service account's files: a folder of the copy, mounted where the agent reads them.
    const spec = stored?.manifest.spec;
    expect(spec?.volumes?.find((v) => v.name === 'kube-api-access')?.hostPath).toEqual({
      path: join(n.folder, 'projected/kube-api-access'),
      type: 'Directory',
    });
    expect(spec?.containers[0]?.volumeMounts?.find((m) => m.mountPath === SA_DIR)?.name).toBe('kube-api-access');
    const sa = (f: string) => readFileSync(join(n.folder, 'projected/kube-api-access', f), 'utf8');
    expect(sa('token')).toMatch(/^token-lastseen-system-lastseen-agent-\d+$/);
    expect(sa('ca.crt')).toBe('CLUSTER-CA');
    expect(sa('namespace')).toBe(NS);
    expect(stored?.tokens?.map((t) => t.relPath)).toEqual(['projected/kube-api-access/token']);
    // Its health port is the copy's, not the DaemonSet pod's.
    expect(spec?.containers[0]?.args).toContain('--health-port=9871');
  });

  it('a copy running on its folder keeps it: a new agent capturing the same spec again (a new token) leaves the folder and the manifest as they are', async () => {
    const n = node();
    const api = cluster();
    const pod = dsPod('lastseen-agent-aaaaa', 'lastseen:1');
    await n.agent('lastseen-agent-aaaaa', api.resolver).refresh(pod);
    const sa = join(n.folder, 'projected/kube-api-access');
    // What the running copy's bind mount holds: this folder itself, whatever is renamed in at its path.
    const mount = openSync(sa, 'r');
    const mounted = (f: string) => readFileSync(`/proc/self/fd/${mount}/${f}`, 'utf8');
    const token = mounted('token');
    const manifest = readFileSync(join(n.manifests.dir, 'lastseen-lastseen-system-lastseen-agent.json'));

    // The DaemonSet pod's agent restarted, then the copy acting after a reboot, then a new
    // DaemonSet pod of the same template: each captures anew (and mints another token).
    await n.agent('lastseen-agent-aaaaa', api.resolver).refresh(pod);
    const copy = n.agent('lastseen-agent-aaaaa-n1', api.resolver);
    copy.isOwnDaemonSetPod(mirrorOf(n.active()));
    await copy.refresh(pod);
    await n.agent('lastseen-agent-ccccc', api.resolver).refresh(dsPod('lastseen-agent-ccccc', 'lastseen:1'));

    // The running copy's mount is that very folder: it must not have been swapped and deleted.
    try {
      expect([mounted('token'), mounted('ca.crt'), mounted('namespace')]).toEqual([token, 'CLUSTER-CA', NS]);
    } finally {
      closeSync(mount);
    }
    expect(readFileSync(join(sa, 'token'), 'utf8')).toBe(token);
    expect(readFileSync(join(n.manifests.dir, 'lastseen-lastseen-system-lastseen-agent.json'))).toEqual(manifest);
    // Each of the four did capture: the api-server was asked for four tokens.
    expect(api.calls.filter((c) => c.startsWith('token')).length).toBe(4);
  });

  it('asks the api-server nothing for a spec it has looked at already (it is asked on every publish)', async () => {
    const n = node();
    const api = cluster();
    const a = n.agent('lastseen-agent-aaaaa', api.resolver);
    const pod = dsPod('lastseen-agent-aaaaa', 'lastseen:1');
    await a.refresh(pod);
    const asked = api.calls.length;
    expect(asked).toBeGreaterThan(0);
    await a.refresh(pod);
    await a.refresh(pod);
    expect(api.calls.length).toBe(asked);
  });

  it('a change of the data the copy mounts (a policy edit) changes its manifest, so the kubelet restarts it on the new folder', async () => {
    const n = node();
    const pod = dsPod('lastseen-agent-aaaaa', 'lastseen:1');
    await n.agent('lastseen-agent-aaaaa', cluster('defaults: {}\n').resolver).refresh(pod);
    const before = n.active();
    await n.agent('lastseen-agent-aaaaa', cluster('defaults: {intervalMs: 2000}\n').resolver).refresh(pod);
    const after = n.active();
    expect(after.metadata?.annotations?.[ANNOTATION_COPY_DATA]).toMatch(/^[0-9a-f]{64}$/);
    expect(after.metadata?.annotations?.[ANNOTATION_COPY_DATA]).not.toBe(before.metadata?.annotations?.[ANNOTATION_COPY_DATA]);
    expect(readFileSync(join(n.folder, 'configmaps/policy/policy.yaml'), 'utf8')).toBe('defaults: {intervalMs: 2000}\n');
    expect((await n.store.load(ID))?.manifest).toEqual(after);
  });
});
