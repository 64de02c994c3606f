import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig, makeKubeClient } from './client.js';
import { classifyKubeError } from './errors.js';

let server: Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

/** A plain-http fake api-server (client-node allows http only with skipTLSVerify). */
async function fakeServer(handler: Parameters<typeof createServer>[1]): Promise<{ kc: KubeConfig; connections: () => number }> {
  let connections = 0;
  server = createServer(handler);
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't0ken' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return { kc, connections: () => connections };
}

const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l', namespace: 'ns' }, spec: {} };

describe('makeKubeClient', () => {
  it('aborts a request the server never answers after requestTimeoutMs', async () => {
    const { kc } = await fakeServer(() => {});
    const client = makeKubeClient(kc, { requestTimeoutMs: 150 });
    const t0 = performance.now();
    const err = await client.coordination.readNamespacedLease({ name: 'l', namespace: 'ns' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(classifyKubeError(err, 'lease ns/l')).toMatchObject({ kind: 'unreachable', reason: 'Timeout' });
    client.close();
  });

  it('keeps one connection alive across requests, sends auth, counts requests; close() drops the pool', async () => {
    const auth: Array<string | undefined> = [];
    const { kc, connections } = await fakeServer((req, res) => {
      auth.push(req.headers.authorization);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(lease));
    });
    const seen: string[] = [];
    const client = makeKubeClient(kc, { requestTimeoutMs: 1000, onRequest: (m, url) => seen.push(`${m} ${new URL(url).pathname}`) });
    for (let i = 0; i < 10; i++) await client.coordination.readNamespacedLease({ name: 'l', namespace: 'ns' });
    // client-node alone opens one connection per request (10 here). undici may open a second
    // connection while it still finishes reading the first response; after that it reuses them.
    const pooled = connections();
    expect(pooled).toBeLessThanOrEqual(2);
    expect(auth).toEqual(Array(10).fill('Bearer t0ken'));
    expect(seen[0]).toBe('GET /apis/coordination.k8s.io/v1/namespaces/ns/leases/l');
    expect(seen).toHaveLength(10);
    client.close();
    const fresh = makeKubeClient(kc, { requestTimeoutMs: 1000 });
    await fresh.coordination.readNamespacedLease({ name: 'l', namespace: 'ns' });
    expect(connections()).toBe(pooled + 1);
    fresh.close();
  });

  it('refuses a non-positive timeout', () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://x' }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    expect(() => makeKubeClient(kc, { requestTimeoutMs: 0 })).toThrow(/requestTimeoutMs/);
  });
});

describe('loadKubeConfig', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lastseen-kc-'));
  const good = join(dir, 'good.yaml');
  writeFileSync(
    good,
    'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
  );
  const noHome = join(dir, 'home');

  it('names the source it tried: a missing --kubeconfig or $KUBECONFIG file is not "the default"', () => {
    expect(() => loadKubeConfig(join(dir, 'nope'), {}, noHome)).toThrow(`kubeconfig ${join(dir, 'nope')} (--kubeconfig) does not exist`);
    expect(() => loadKubeConfig(undefined, { KUBECONFIG: '/nonexistent' }, noHome)).toThrow('kubeconfig /nonexistent ($KUBECONFIG) does not exist');
  });

  it('with no kubeconfig anywhere and not in a pod, says so instead of falling back to http://localhost:8080', () => {
    expect(() => loadKubeConfig(undefined, {}, noHome)).toThrow(
      /^no kubeconfig: --kubeconfig not given, \$KUBECONFIG unset, .*home\/\.kube\/config missing, and not in a pod/,
    );
  });

  it('loads a good file from --kubeconfig and from $KUBECONFIG', () => {
    expect(loadKubeConfig(good, {}, noHome).getCurrentCluster()?.server).toBe('https://10.0.0.1:6443');
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = good;
    try {
      expect(loadKubeConfig(undefined, process.env, noHome).getCurrentCluster()?.server).toBe('https://10.0.0.1:6443');
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });
});
