/**
 * Smoke suite for the real control plane and for the @kubernetes/client-node 1.4 behaviour that
 * lastseen depends on. It doubles as executable documentation of two client-node traps:
 *
 * 1. MicroTime. `V1LeaseSpec.renewTime` is typed `V1MicroTime` (a Date subclass), but the
 *    generated serializer does not know that type and passes the value to JSON.stringify as is.
 *    A plain Date (which TypeScript accepts, the types being structurally equal) serializes with
 *    3 fractional digits and the api-server rejects the object (400: it parses MicroTime strictly
 *    with exactly 6 digits). A `V1MicroTime` serializes as `.mmm000Z`: accepted, but microseconds
 *    are always 000. Only a string with exactly six digits, cast to V1MicroTime, carries real
 *    microseconds; it passes through create, replace and merge patch unchanged. On the way back
 *    `renewTime` is a string at runtime (the deserializer does not know the type either), in
 *    typed reads and in watch events alike: never call Date methods on it.
 * 2. Watch. `Watch.watch()` calls `done` once when the stream ends for any reason (api-server
 *    gone, network, server timeout) and never reconnects; the caller re-watches from the last
 *    resourceVersion.
 */
import {
  ApiException,
  CoordinationV1Api,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Lease,
  V1MicroTime,
  Watch,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlane, kubeConfigFor, kubectl, startApiserver, stopApiserver, USER_NAME, useNamespace, waitFor } from './harness.js';

const SIX_DIGITS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** RFC 3339 with exactly six fractional digits: the millisecond from `ms`, then `micros` (0–999). */
function microTime(ms: number, micros: number): string {
  const iso = new Date(ms).toISOString(); // always YYYY-MM-DDTHH:mm:ss.sssZ
  return `${iso.slice(0, -1)}${String(micros).padStart(3, '0')}Z`;
}

/** The cast client-node needs to carry a MicroTime string (see the header). */
function asMicroTime(s: string): V1MicroTime {
  return s as unknown as V1MicroTime;
}

function httpStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

let ns: string;
let leases: CoordinationV1Api;

beforeAll(async () => {
  ns = await useNamespace('smoke');
  leases = kubeConfigFor('admin').makeApiClient(CoordinationV1Api);
});

describe('the control plane', () => {
  it('is ready and runs the pinned versions', async () => {
    const readyz = await kubectl(['get', '--raw', '/readyz']);
    expect(readyz).toMatchObject({ code: 0, stdout: 'ok' });

    const version = await kubectl(['version', '-o', 'json']);
    expect(version.code).toBe(0);
    const parsed = JSON.parse(version.stdout) as { clientVersion: { gitVersion: string }; serverVersion: { gitVersion: string } };
    expect(parsed.serverVersion.gitVersion).toBe('v1.36.3');
    expect(parsed.clientVersion.gitVersion).toBe('v1.36.3');
    expect(controlPlane().server).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });
});

describe('Lease renewTime (MicroTime) through client-node 1.4', () => {
  it('a plain Date goes out with 3 fractional digits and is rejected with 400', async () => {
    const sent = new Date();
    expect(JSON.stringify(sent)).toMatch(/\.\d{3}Z"$/);
    const err = await leases.createNamespacedLease({ namespace: ns, body: { metadata: { name: 'plain-date' }, spec: { renewTime: sent } } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(httpStatus(err)).toBe(400);
    expect(String((err as ApiException<unknown>).body)).toContain('2006-01-02T15:04:05.000000Z07:00');
  });

  it('a V1MicroTime goes out with 6 digits whose last three are always 000', async () => {
    const sent = new V1MicroTime(Date.UTC(2030, 0, 2, 3, 4, 5, 678));
    const created = await leases.createNamespacedLease({
      namespace: ns,
      body: { metadata: { name: 'v1microtime' }, spec: { renewTime: sent } },
    });
    expect(created.spec?.renewTime).toBe('2030-01-02T03:04:05.678000Z');
  });

  it('a six-digit string keeps its microseconds through create, optimistic replace and merge patch', async () => {
    const first = microTime(Date.now(), 789);
    const created = await leases.createNamespacedLease({
      namespace: ns,
      body: {
        metadata: { name: 'renewed' },
        spec: { holderIdentity: 'pod-a', leaseDurationSeconds: 40, renewTime: asMicroTime(first), acquireTime: asMicroTime(first) },
      },
    });
    // Read back as a string at runtime, whatever the type says.
    expect(typeof created.spec?.renewTime).toBe('string');
    expect(created.spec?.renewTime).toBe(first);
    expect(String(created.spec?.renewTime)).toMatch(SIX_DIGITS);

    // The kubelet's way: update from the cached object, no GET per renewal.
    const second = microTime(Date.now() + 1, 1);
    const renewed = await leases.replaceNamespacedLease({
      name: 'renewed',
      namespace: ns,
      body: { ...created, spec: { ...created.spec, renewTime: asMicroTime(second) } },
    });
    expect(renewed.spec?.renewTime).toBe(second);
    expect(renewed.spec?.acquireTime).toBe(first); // the cached string went back out unchanged
    expect(renewed.metadata?.resourceVersion).not.toBe(created.metadata?.resourceVersion);

    // A renewal from a stale cache is a 409, which the heartbeat answers with a re-read.
    const stale = await leases
      .replaceNamespacedLease({ name: 'renewed', namespace: ns, body: { ...created, spec: { ...created.spec, renewTime: asMicroTime(second) } } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(httpStatus(stale)).toBe(409);

    const third = microTime(Date.now() + 2, 999);
    const patched = await leases.patchNamespacedLease({ name: 'renewed', namespace: ns, body: { spec: { renewTime: third } } }, mergePatch);
    expect(patched.spec?.renewTime).toBe(third);

    const read = await kubectl(['get', 'lease', 'renewed', '-n', ns, '-o', 'jsonpath={.spec.renewTime}']);
    expect(read.stdout).toBe(third);
    expect(read.stdout).toMatch(SIX_DIGITS);
  });

  it.each(['2030-01-02T03:04:05.123Z', '2030-01-02T03:04:05.123456789Z', '2030-01-02T03:04:05Z'])(
    'the api-server rejects renewTime %s (not six digits)',
    async (renewTime) => {
      const err = await leases
        .createNamespacedLease({ namespace: ns, body: { metadata: { generateName: 'bad-' }, spec: { renewTime: asMicroTime(renewTime) } } })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(httpStatus(err)).toBe(400);
    },
  );
});

interface WatchEvent {
  type: string;
  lease: V1Lease;
}

describe('watching Leases', () => {
  it('sees a renewal arrive, with the six-digit renewTime as a string', async () => {
    const created = await leases.createNamespacedLease({
      namespace: ns,
      body: { metadata: { name: 'watched' }, spec: { holderIdentity: 'pod-w', renewTime: asMicroTime(microTime(Date.now(), 1)) } },
    });
    const events: WatchEvent[] = [];
    const ended: unknown[] = [];
    const abort = await new Watch(kubeConfigFor('admin')).watch(
      `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`,
      { resourceVersion: created.metadata?.resourceVersion },
      (type: string, lease: V1Lease) => events.push({ type, lease }),
      (err: unknown) => ended.push(err),
    );
    try {
      const renewTime = microTime(Date.now() + 5, 321);
      await leases.patchNamespacedLease({ name: 'watched', namespace: ns, body: { spec: { renewTime } } }, mergePatch);
      const seen = await waitFor(
        () => events.find((e) => e.type === 'MODIFIED' && e.lease.metadata?.name === 'watched' && String(e.lease.spec?.renewTime) === renewTime),
        { what: 'the MODIFIED event carrying the renewal' },
      );
      expect(typeof seen.lease.spec?.renewTime).toBe('string');
      expect(ended).toEqual([]);
    } finally {
      abort.abort();
    }
  });
});

describe('CRDs', () => {
  const crd = 'smokewidgets.smoke.lastseen.test';
  afterAll(async () => {
    await kubectl(['delete', 'crd', crd, '--ignore-not-found', '--wait=false']);
  });

  it('applies a CRD with kubectl, enforces its schema and reads objects back', async () => {
    const apply = await kubectl(['apply', '-f', '-'], {
      input: `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ${crd}}
spec:
  group: smoke.lastseen.test
  scope: Namespaced
  names: {plural: smokewidgets, singular: smokewidget, kind: SmokeWidget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
`,
    });
    expect(apply.stderr).toBe('');
    expect(apply.code).toBe(0);
    const established = await kubectl(['wait', '--for=condition=Established', '--timeout=60s', `crd/${crd}`]);
    expect(established.code).toBe(0);

    const widget = (size: number): string =>
      `{"apiVersion":"smoke.lastseen.test/v1","kind":"SmokeWidget","metadata":{"name":"w${size}","namespace":"${ns}"},"spec":{"size":${size}}}`;
    const good = await kubectl(['apply', '-f', '-'], { input: widget(3) });
    expect(good.code).toBe(0);
    const read = await kubectl(['get', 'smokewidgets', 'w3', '-n', ns, '-o', 'jsonpath={.spec.size}']);
    expect(read).toMatchObject({ code: 0, stdout: '3' });

    const bad = await kubectl(['apply', '-f', '-'], { input: widget(0) });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('spec.size');
  });
});

describe('RBAC', () => {
  it('denies the user identity (403) until a RoleBinding grants it, and only in that namespace', async () => {
    const asUser = kubeConfigFor('user').makeApiClient(CoordinationV1Api);
    const listAsUser = (namespace: string) =>
      asUser.listNamespacedLease({ namespace }).then(
        () => 200,
        (e: unknown) => httpStatus(e) ?? -1,
      );

    expect(await listAsUser(ns)).toBe(403);
    const denied = await kubectl(['get', 'leases', '-n', ns], { identity: 'user' });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain('Forbidden');
    expect(denied.stderr).toContain(USER_NAME);

    const rbac = kubeConfigFor('admin').makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'lease-reader' },
        rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'lease-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'lease-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: USER_NAME }],
      },
    });

    // The RBAC authorizer reads through informers: the grant takes effect within moments.
    await waitFor(async () => (await listAsUser(ns)) === 200, { what: 'the RoleBinding to take effect' });
    const allowed = await kubectl(['get', 'leases', '-n', ns, '-o', 'name'], { identity: 'user' });
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toContain('lease.coordination.k8s.io/renewed');

    expect(await listAsUser('default')).toBe(403);
    const write = await asUser.createNamespacedLease({ namespace: ns, body: { metadata: { name: 'by-user' } } }).then(
      () => 201,
      (e: unknown) => httpStatus(e),
    );
    expect(write).toBe(403);
  });
});

describe('a watch across a kube-apiserver restart', () => {
  it.each(['TERM', 'KILL'] as const)('recovers after SIG%s and sees an update made after the restart', async (signal) => {
    const name = `restart-${signal.toLowerCase()}`;
    const created = await leases.createNamespacedLease({
      namespace: ns,
      body: { metadata: { name }, spec: { holderIdentity: 'before' } },
    });

    // A minimal re-watch loop: resume from the last resourceVersion; on 410 Gone, start afresh.
    const holders: string[] = [];
    let resourceVersion = created.metadata?.resourceVersion;
    let watchesStarted = 0;
    let watchesEnded = 0;
    let closed = false;
    let current: AbortController | undefined;
    const kc = kubeConfigFor('admin');
    const startWatch = async (): Promise<void> => {
      if (closed) return;
      watchesStarted++;
      current = await new Watch(kc).watch(
        `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`,
        { resourceVersion, fieldSelector: `metadata.name=${name}`, allowWatchBookmarks: true },
        (type: string, obj: V1Lease & { code?: number }) => {
          if (type === 'ERROR') {
            if (obj.code === 410) resourceVersion = undefined;
            return;
          }
          resourceVersion = obj.metadata?.resourceVersion ?? resourceVersion;
          if (type !== 'BOOKMARK' && obj.spec?.holderIdentity) holders.push(obj.spec.holderIdentity);
        },
        () => {
          watchesEnded++;
          if (!closed) setTimeout(() => void startWatch(), 250);
        },
      );
      if (closed) current.abort();
    };

    try {
      await startWatch();
      const setHolder = (holderIdentity: string) => leases.patchNamespacedLease({ name, namespace: ns, body: { spec: { holderIdentity } } }, mergePatch);
      await setHolder('live');
      await waitFor(() => holders.includes('live'), { what: 'the watch to see an update before the restart' });

      await stopApiserver(signal);
      await waitFor(() => watchesEnded > 0, { what: `the watch to end when kube-apiserver got SIG${signal}` });
      await startApiserver();

      // The first request after a restart may meet a pooled connection the old server closed.
      await waitFor(() => setHolder('after-restart').then(() => true), { what: 'an update after the restart' });
      await waitFor(() => holders.includes('after-restart'), {
        what: 'the re-established watch to see the update made after the restart',
        timeoutMs: 60_000,
      });
      expect(watchesStarted).toBeGreaterThan(1);
      expect(holders.indexOf('after-restart')).toBeGreaterThan(holders.indexOf('live'));
    } finally {
      closed = true;
      current?.abort();
    }
  });
});
