import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { CaptureError, capture, downwardValue } from './capture.js';
import { memoryResolver, parentPod } from './fixtures.test-helpers.js';
import { COPY_GRACE_SECONDS, canonicalJson, SanitizeError, sanitize } from './sanitize.js';

const DIR = '/var/lib/lastseen/checkpoints/kube-system_kube-apiserver';
const OPTS = { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: DIR };

function volume(manifest: V1Pod, name: string) {
  return manifest.spec?.volumes?.find((v) => v.name === name);
}

describe('sanitize: metadata', () => {
  const { manifest } = sanitize(parentPod(), OPTS);
  const meta = manifest.metadata!;

  it('keeps name, namespace and labels, adds role and parent labels', () => {
    expect(meta.name).toBe('kube-apiserver-x7k2p');
    expect(meta.namespace).toBe('kube-system');
    expect(meta.labels).toEqual({
      app: 'kube-apiserver',
      'controller-revision-hash': 'abc',
      'lastseen.dev/role': 'checkpoint',
      'lastseen.dev/parent': 'kube-apiserver',
    });
  });

  it('sets checkpoint-of, drops lastseen.dev and server annotations (so it is never a parent itself)', () => {
    expect(meta.annotations).toEqual({ 'lastseen.dev/checkpoint-of': 'kube-apiserver-x7k2p', 'prometheus.io/scrape': 'true' });
  });

  it('points the owner at the parent pod, not the DaemonSet', () => {
    expect(meta.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Pod', name: 'kube-apiserver-x7k2p', uid: 'uid-parent-1' }]);
  });

  it.each(['uid', 'resourceVersion', 'creationTimestamp', 'managedFields', 'generateName'] as const)('drops metadata.%s', (field) => {
    expect(meta[field]).toBeUndefined();
  });

  it('drops status', () => {
    expect(manifest.status).toBeUndefined();
    expect(manifest.kind).toBe('Pod');
    expect(manifest.apiVersion).toBe('v1');
  });
});

describe('sanitize: spec', () => {
  const { manifest, files, folders } = sanitize(parentPod(), OPTS);
  const spec = manifest.spec!;

  it.each(['nodeName', 'nodeSelector', 'serviceAccountName', 'serviceAccount', 'automountServiceAccountToken', 'affinity', 'priority'] as const)(
    'clears spec.%s',
    (field) => {
      expect(spec[field]).toBeUndefined();
    },
  );

  it('with the host network, declares no ports (they would keep the parent pod out) and probes by number', () => {
    const pod = parentPod();
    const main = pod.spec!.containers[0]!;
    main.ports = [{ name: 'https', containerPort: 6443, protocol: 'TCP' }];
    main.readinessProbe = { httpGet: { path: '/readyz', port: 'https' as unknown as number, scheme: 'HTTPS' } };
    main.livenessProbe = { tcpSocket: { port: 6443 } };
    const c = sanitize(pod, OPTS).manifest.spec!.containers[0]!;
    expect(c.ports).toBeUndefined();
    expect(c.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 6443, scheme: 'HTTPS' });
    expect(c.livenessProbe?.tcpSocket).toEqual({ port: 6443 });
    // Without the host network, ports are the pod's own and stay.
    pod.spec!.hostNetwork = false;
    expect(sanitize(pod, OPTS).manifest.spec!.containers[0]!.ports).toEqual([{ name: 'https', containerPort: 6443, protocol: 'TCP' }]);
  });

  it('drops a preStop hook (a copy is stopped only to give the node back), keeping the rest of lifecycle', () => {
    const pod = parentPod();
    const main = pod.spec!.containers[0]!;
    main.lifecycle = { preStop: { sleep: { seconds: 20 } } };
    expect(sanitize(pod, OPTS).manifest.spec!.containers[0]!.lifecycle).toBeUndefined();
    main.lifecycle = { preStop: { sleep: { seconds: 20 } }, postStart: { exec: { command: ['true'] } } };
    expect(sanitize(pod, OPTS).manifest.spec!.containers[0]!.lifecycle).toEqual({ postStart: { exec: { command: ['true'] } } });
    expect(main.lifecycle.preStop).toBeDefined();
  });

  it('keeps what a static pod can use', () => {
    expect(spec.priorityClassName).toBe('system-node-critical');
    expect(spec.hostNetwork).toBe(true);
    expect(spec.tolerations).toEqual([{ operator: 'Exists' }]);
    expect(volume(manifest, 'host-etc')).toEqual({ name: 'host-etc', hostPath: { path: '/etc/ssl', type: 'Directory' } });
  });

  it.each([
    [undefined, COPY_GRACE_SECONDS],
    [30, COPY_GRACE_SECONDS],
    [2, 2],
    [0, 0],
  ])('a parent allowing itself %s s after SIGTERM gives its copy %s s (the parent waits for the ports)', (parentGrace, copyGrace) => {
    const pod = parentPod();
    if (parentGrace === undefined) delete pod.spec!.terminationGracePeriodSeconds;
    else pod.spec!.terminationGracePeriodSeconds = parentGrace;
    expect(sanitize(pod, OPTS).manifest.spec!.terminationGracePeriodSeconds).toBe(copyGrace);
  });

  it('keeps pod affinity but clears node affinity', () => {
    const pod = parentPod();
    pod.spec!.affinity!.podAntiAffinity = { preferredDuringSchedulingIgnoredDuringExecution: [] };
    expect(sanitize(pod, OPTS).manifest.spec!.affinity).toEqual({ podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } });
  });

  it.each([
    ['certs', 'secrets/certs'],
    ['config', 'configmaps/config'],
    ['kube-api-access', 'projected/kube-api-access'],
  ])('turns volume %s into a hostPath over %s', (name, folder) => {
    expect(volume(manifest, name)).toEqual({ name, hostPath: { path: `${DIR}/${folder}`, type: 'Directory' } });
    expect(folders).toContain(`${folder}/`);
  });

  it('lists every file to copy with its source and the access its own volume gives it (no securityContext: root, defaultMode or 0644)', () => {
    expect(files).toEqual([
      { relPath: 'secrets/certs', source: { kind: 'secret', namespace: 'kube-system', name: 'apiserver-certs', optional: false }, access: { mode: 0o400 } },
      {
        relPath: 'configmaps/config/config.yaml',
        source: { kind: 'configMap', namespace: 'kube-system', name: 'apiserver-config', key: 'config.yaml', optional: false },
        access: { mode: 0o644 },
      },
      {
        relPath: 'projected/kube-api-access/token',
        source: { kind: 'serviceAccountToken', namespace: 'kube-system', name: 'kube-apiserver', audience: undefined, expirationSeconds: 3607 },
        access: { mode: 0o644 },
      },
      {
        relPath: 'projected/kube-api-access/ca.crt',
        source: { kind: 'configMap', namespace: 'kube-system', name: 'kube-root-ca.crt', key: 'ca.crt', optional: false },
        access: { mode: 0o644 },
      },
      {
        relPath: 'projected/kube-api-access/namespace',
        source: { kind: 'downwardAPI', namespace: 'kube-system', fieldPath: 'metadata.namespace' },
        access: { mode: 0o644 },
      },
    ]);
  });

  it('marks the heartbeat sidecar (by name) as role checkpoint, replacing the parent role', () => {
    expect(spec.initContainers![0]!.env).toEqual([
      { name: 'LASTSEEN_ROLE', value: 'checkpoint' },
      { name: 'LASTSEEN_PARENT_KEY', value: 'kube-apiserver' },
    ]);
    expect(spec.containers[0]!.env).toBeUndefined();
  });

  it('recognises the heartbeat sidecar by its args too', () => {
    const pod = parentPod();
    pod.spec!.containers.push({ name: 'beat', image: 'lastseen:1', args: ['heartbeat'] });
    const out = sanitize(pod, OPTS).manifest.spec!.containers.find((c) => c.name === 'beat');
    expect(out?.env).toEqual([
      { name: 'LASTSEEN_ROLE', value: 'checkpoint' },
      { name: 'LASTSEEN_PARENT_KEY', value: 'kube-apiserver' },
    ]);
  });

  it('does not change the pod it was given', () => {
    const pod = parentPod();
    const before = canonicalJson(pod);
    sanitize(pod, OPTS);
    expect(canonicalJson(pod)).toBe(before);
  });
});

describe('sanitize: warnings and refusals', () => {
  it('warns about what a static pod cannot resolve', () => {
    const pod = parentPod();
    pod.spec!.containers[0]!.env = [{ name: 'PW', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }];
    pod.spec!.volumes!.push({ name: 'data', persistentVolumeClaim: { claimName: 'c' } });
    pod.spec!.imagePullSecrets = [{ name: 'pull' }];
    const { warnings, manifest } = sanitize(pod, OPTS);
    expect(warnings).toHaveLength(3);
    expect(warnings.join('\n')).toMatch(/env PW/);
    expect(manifest.spec!.imagePullSecrets).toBeUndefined();
  });

  it.each(['../escape', '/abs', 'a/../../b'])('refuses item path %s', (path) => {
    const pod = parentPod();
    pod.spec!.volumes![0]!.secret!.items = [{ key: 'k', path }];
    expect(() => sanitize(pod, OPTS)).toThrow(SanitizeError);
  });

  it('refuses a pod without uid', () => {
    const pod = parentPod();
    delete pod.metadata!.uid;
    expect(() => sanitize(pod, OPTS)).toThrow(/uid/);
  });
});

describe('specHash', () => {
  const base = sanitize(parentPod(), OPTS).specHash;

  it('is a sha256 hex digest, the same on every run', () => {
    expect(base).toMatch(/^[0-9a-f]{64}$/);
    expect(sanitize(parentPod(), OPTS).specHash).toBe(base);
  });

  it('does not depend on key order', () => {
    const reverse = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reverse)
        : v && typeof v === 'object' && !(v instanceof Date)
          ? Object.fromEntries(
              Object.entries(v)
                .reverse()
                .map(([k, x]) => [k, reverse(x)]),
            )
          : v;
    const shuffled = reverse(parentPod()) as V1Pod;
    expect(Object.keys(shuffled)[0]).toBe('status');
    expect(sanitize(shuffled, OPTS).specHash).toBe(base);
  });

  it.each<[string, (p: V1Pod) => void]>([
    ['server-set metadata', (p) => Object.assign(p.metadata!, { resourceVersion: '9999', managedFields: [] })],
    ['status', (p) => Object.assign(p.status!, { phase: 'Pending', podIP: '10.9.9.9' })],
    ['beat annotations', (p) => Object.assign(p.metadata!.annotations!, { 'lastseen.dev/sequence': '18' })],
    ['node placement', (p) => Object.assign(p.spec!, { nodeName: 'node-b', nodeSelector: {} })],
    // A DaemonSet's pod deleted and created again: same template, new name and uid.
    ['the pod itself (another pod of the same template)', (p) => Object.assign(p.metadata!, { name: 'kube-apiserver-x7k2q', uid: 'another-uid' })],
  ])('ignores %s', (_name, change) => {
    const pod = parentPod();
    change(pod);
    expect(sanitize(pod, OPTS).specHash).toBe(base);
  });

  it.each<[string, (p: V1Pod) => void]>([
    ['the image', (p) => Object.assign(p.spec!.containers[0]!, { image: 'registry.k8s.io/kube-apiserver:v1.34.1' })],
    ['a flag', (p) => p.spec!.containers[0]!.command!.push('--v=2')],
    ['a label', (p) => Object.assign(p.metadata!.labels!, { 'controller-revision-hash': 'def' })],
    ['a volume', (p) => p.spec!.volumes!.pop()],
    ['the checkpoint folder', () => {}],
  ])('changes with %s', (name, change) => {
    const pod = parentPod();
    change(pod);
    const opts = name === 'the checkpoint folder' ? { ...OPTS, checkpointDir: '/elsewhere' } : OPTS;
    expect(sanitize(pod, opts).specHash).not.toBe(base);
  });
});

describe('capture', () => {
  const opts = { ...OPTS, capturedAt: '2026-01-02T03:05:00.000Z', lastReadyAt: '2026-01-02T03:04:59.000Z' };

  it('fetches every file, expands whole objects, lists folders, fetches each object once', async () => {
    const resolver = memoryResolver();
    const { data, capture: cap } = await capture(parentPod(), opts, resolver);
    expect(Object.fromEntries([...data].map(([k, v]) => [k, v.toString()]))).toEqual({
      'secrets/certs/': '',
      'configmaps/config/': '',
      'projected/kube-api-access/': '',
      'secrets/certs/tls.crt': 'CERT-1',
      'secrets/certs/tls.key': 'KEY-1',
      'configmaps/config/config.yaml': 'a: 1\n',
      'projected/kube-api-access/token': 'token-for-kube-apiserver-api-3607',
      'projected/kube-api-access/ca.crt': 'CA',
      'projected/kube-api-access/namespace': 'kube-system',
    });
    expect(resolver.calls).toEqual([
      'secret kube-system/apiserver-certs',
      'configMap kube-system/apiserver-config',
      'token kube-system/kube-apiserver',
      'configMap kube-system/kube-root-ca.crt',
    ]);
    expect(cap).toMatchObject({ sourcePodUid: 'uid-parent-1', sourcePodName: 'kube-apiserver-x7k2p', capturedAt: opts.capturedAt });
  });

  it('fails on a missing secret that is not optional, skips one that is', async () => {
    await expect(capture(parentPod(), opts, memoryResolver({}))).rejects.toThrow(CaptureError);
    const pod = parentPod();
    pod.spec!.volumes![0]!.secret!.optional = true;
    const { data } = await capture(pod, opts, memoryResolver({}));
    expect(data.get('secrets/certs/')).toEqual(Buffer.alloc(0));
    expect([...data.keys()].filter((k) => k.startsWith('secrets/certs/t'))).toEqual([]);
  });

  it('fails on a missing key that is not optional', async () => {
    const resolver = memoryResolver(undefined, { 'kube-system/apiserver-config': {}, 'kube-system/kube-root-ca.crt': { 'ca.crt': 'CA' } });
    await expect(capture(parentPod(), opts, resolver)).rejects.toThrow(/no key config.yaml/);
  });

  it.each([
    ['metadata.name', 'kube-apiserver-x7k2p'],
    ['metadata.uid', 'uid-parent-1'],
    ["metadata.labels['app']", 'kube-apiserver'],
    ['metadata.labels', 'app="kube-apiserver"\ncontroller-revision-hash="abc"'],
    ['status.podIP', '10.0.0.1'],
  ])('downward API %s', (field, value) => {
    expect(downwardValue(parentPod(), field)).toBe(value);
  });
});

describe('sanitize: the owner, group and modes the parent’s own volumes give its pod', () => {
  const access = (pod: V1Pod) => {
    const r = sanitize(pod, OPTS);
    return { files: Object.fromEntries(r.files.map((f) => [f.relPath, f.access])), folders: r.folderAccess };
  };
  const nonRoot = (mutate: (pod: V1Pod) => void = () => {}) => {
    const pod = parentPod();
    pod.spec!.securityContext = { runAsUser: 1000, fsGroup: 1000 };
    pod.spec!.volumes![0] = {
      name: 'certs',
      secret: {
        secretName: 'apiserver-certs',
        items: [
          { key: 'tls.key', path: 'tls/key', mode: 0o400 },
          { key: 'tls.crt', path: 'tls.crt' },
        ],
      },
    };
    mutate(pod);
    return pod;
  };

  it('with runAsUser and fsGroup: files gain group fsGroup and 0440; the token is the user’s, 0600 + 0040; folders 2755 group fsGroup', () => {
    const { files, folders } = access(nonRoot());
    expect(files).toEqual({
      'secrets/certs/tls/key': { mode: 0o440, gid: 1000 },
      'secrets/certs/tls.crt': { mode: 0o644, gid: 1000 },
      'configmaps/config/config.yaml': { mode: 0o644, gid: 1000 },
      'projected/kube-api-access/token': { mode: 0o640, uid: 1000, gid: 1000 },
      'projected/kube-api-access/ca.crt': { mode: 0o644, gid: 1000 },
      'projected/kube-api-access/namespace': { mode: 0o644, gid: 1000 },
    });
    const dir = { mode: 0o2755, gid: 1000 };
    expect(folders).toEqual({ 'secrets/certs': dir, 'secrets/certs/tls': dir, 'configmaps/config': dir, 'projected/kube-api-access': dir });
  });

  it('fsUser needs every container (init containers included) to run as the same user', () => {
    // The heartbeat sidecar runs as another user: no fsUser, the token stays root's, 0600 (fsGroup set).
    const mixed = access(nonRoot((pod) => (pod.spec!.initContainers![0]!.securityContext = { runAsUser: 65532 })));
    expect(mixed.files['projected/kube-api-access/token']).toEqual({ mode: 0o640, gid: 1000 });
    // Every container sets the same user itself, the pod none, no fsGroup: the token is that user's, 0600.
    const same = access(
      nonRoot((pod) => {
        pod.spec!.securityContext = {};
        for (const c of [...pod.spec!.initContainers!, ...pod.spec!.containers]) c.securityContext = { runAsUser: 1234 };
      }),
    );
    expect(same.files['projected/kube-api-access/token']).toEqual({ mode: 0o600, uid: 1234 });
    expect(same.files['secrets/certs/tls.crt']).toEqual({ mode: 0o644 });
    expect(same.folders['secrets/certs']).toEqual({ mode: 0o755 });
  });

  it('honours defaultMode of secret, configMap and projected volumes, and item modes', () => {
    const pod = parentPod();
    pod.spec!.volumes![1] = { name: 'config', configMap: { name: 'apiserver-config', defaultMode: 0o600 } };
    const proj = pod.spec!.volumes![2]!.projected!;
    proj.defaultMode = 0o640;
    proj.sources![1]!.configMap!.items![0]!.mode = 0o444;
    const { files } = access(pod);
    expect(files['configmaps/config']).toEqual({ mode: 0o600 });
    expect(files['projected/kube-api-access/token']).toEqual({ mode: 0o640 });
    expect(files['projected/kube-api-access/ca.crt']).toEqual({ mode: 0o444 });
    expect(files['projected/kube-api-access/namespace']).toEqual({ mode: 0o640 });
  });

  it('capture plans the access of every expanded file and folder, and none for a folder whose optional files are missing', async () => {
    const pod = nonRoot();
    pod.spec!.volumes!.push({ name: 'extra', secret: { secretName: 'absent', optional: true, items: [{ key: 'k', path: 'deep/k' }] } });
    pod.spec!.volumes![1] = { name: 'config', configMap: { name: 'apiserver-config' } };
    const resolver = memoryResolver(
      { 'kube-system/apiserver-certs': { 'tls.crt': 'CERT', 'tls.key': 'KEY' } },
      { 'kube-system/apiserver-config': { 'a.yaml': 'A', 'b.yaml': 'B' }, 'kube-system/kube-root-ca.crt': { 'ca.crt': 'CA' } },
    );
    const r = await capture(pod, { ...OPTS, capturedAt: '2026-01-02T03:05:00.000Z', lastReadyAt: null }, resolver);
    expect(r.capture.access).toMatchObject({
      'configmaps/config/a.yaml': { mode: 0o644, gid: 1000 },
      'configmaps/config/b.yaml': { mode: 0o644, gid: 1000 },
      'secrets/extra': { mode: 0o2755, gid: 1000 },
    });
    expect(r.capture.access?.['secrets/extra/deep']).toBeUndefined();
    for (const path of Object.keys(r.capture.access ?? {}))
      expect(r.data.has(path) || r.data.has(`${path}/`) || [...r.data.keys()].some((k) => k.startsWith(`${path}/`))).toBe(true);
  });
});

describe('sanitize: the per-pod kube-api-access volume', () => {
  const withPerPodVolume = (suffix: string, uid: string) => {
    const pod = parentPod();
    pod.metadata!.uid = uid;
    pod.metadata!.name = `kube-apiserver-${suffix}`;
    pod.spec!.volumes![2]!.name = `kube-api-access-${suffix}`;
    pod.spec!.containers[0]!.volumeMounts![2]!.name = `kube-api-access-${suffix}`;
    pod.spec!.initContainers![0]!.volumeMounts = [{ name: `kube-api-access-${suffix}`, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' }];
    return pod;
  };

  it('is named kube-api-access in the copy, mounts included, so folder and manifest agree across re-created pods', () => {
    const a = sanitize(withPerPodVolume('ab12c', 'uid-a'), OPTS);
    const b = sanitize(withPerPodVolume('zz9x8', 'uid-b'), OPTS);
    for (const r of [a, b]) {
      expect(volume(r.manifest, 'kube-api-access')).toEqual({
        name: 'kube-api-access',
        hostPath: { path: `${DIR}/projected/kube-api-access`, type: 'Directory' },
      });
      expect(r.manifest.spec!.containers[0]!.volumeMounts![2]!.name).toBe('kube-api-access');
      expect(r.manifest.spec!.initContainers![0]!.volumeMounts![0]!.name).toBe('kube-api-access');
      expect(r.folders).toContain('projected/kube-api-access/');
      expect(r.files.filter((f) => f.relPath.startsWith('projected/')).map((f) => f.relPath)).toEqual([
        'projected/kube-api-access/token',
        'projected/kube-api-access/ca.crt',
        'projected/kube-api-access/namespace',
      ]);
    }
    // Only the name and owner of the pod differ between the two: the spec is the same.
    expect(a.manifest.spec).toEqual(b.manifest.spec);
  });

  it('keeps the name when the pod has its own kube-api-access volume', () => {
    const pod = withPerPodVolume('ab12c', 'uid-a');
    pod.spec!.volumes!.push({ name: 'kube-api-access', emptyDir: {} });
    const r = sanitize(pod, OPTS);
    expect(volume(r.manifest, 'kube-api-access-ab12c')?.hostPath?.path).toBe(`${DIR}/projected/kube-api-access-ab12c`);
  });
});
