import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { BeatClient } from './beat-client.js';
import { makeKubeClient } from './client.js';
import { classifyKubeError } from './errors.js';
import { makeLightClient } from './light-client.js';
import { type EndpointSource, endpointFromKubeConfig } from './light-config.js';

let server: Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

interface Seen {
  method: string;
  path: string;
  type: string | undefined;
  auth: string | undefined;
  body: unknown;
}

function readAll(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let s = '';
    req.setEncoding('utf8').on('data', (c: string) => {
      s += c;
    });
    req.on('end', () => resolve(s));
  });
}

/** A plain-http fake api-server; answers with `answer(request)` ([status, body]) and records each request. */
async function fakeServer(answer: (s: Seen) => [number, unknown] | null) {
  const seen: Seen[] = [];
  let connections = 0;
  server = createServer(async (req, res) => {
    const text = await readAll(req);
    const s = {
      method: req.method!,
      path: req.url!,
      type: req.headers['content-type'],
      auth: req.headers.authorization,
      body: text ? JSON.parse(text) : undefined,
    };
    seen.push(s);
    const a = answer(s);
    if (!a) return; // never answer
    res.writeHead(a[0], { 'content-type': 'application/json' });
    res.end(JSON.stringify(a[1]));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const source: EndpointSource = async () => ({ server: base, tls: {}, headers: async () => ({ authorization: 'Bearer t0ken' }) });
  return { seen, source, base, connections: () => connections };
}

const lease = {
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name: 'k.n', namespace: 'ns', resourceVersion: '7' },
  spec: { holderIdentity: 'p' },
};
const conflict = { kind: 'Status', status: 'Failure', reason: 'Conflict', message: 'the object has been modified', code: 409 };

describe('makeLightClient', () => {
  it('sends each BeatClient request as the api-server expects it: verb, path, content type, auth', async () => {
    const { seen, source } = await fakeServer((s) => [s.method === 'POST' ? 201 : 200, s.path.includes('/pods/') ? { kind: 'Pod' } : lease]);
    const c = makeLightClient(source, { requestTimeoutMs: 1000 });
    expect(await c.readLease({ namespace: 'ns', name: 'k.n' })).toEqual(lease);
    await c.createLease({ namespace: 'ns', body: lease });
    await c.replaceLease({ namespace: 'ns', name: 'k.n', body: lease });
    await c.mergePatchLease({ namespace: 'ns', name: 'k.n', body: { spec: { renewTime: 'x' } } });
    expect(await c.readPod({ namespace: 'ns', name: 'p 1' })).toEqual({ kind: 'Pod' });
    await c.mergePatchPod({ namespace: 'ns', name: 'p', body: { metadata: { annotations: { a: 'b' } } } });
    await c.jsonPatchPod({ namespace: 'ns', name: 'p', body: [{ op: 'test', path: '/metadata/annotations/a', value: 'b' }] });
    c.close();
    const L = '/apis/coordination.k8s.io/v1/namespaces/ns/leases';
    expect(seen.map((s) => [s.method, s.path, s.type ?? null])).toEqual([
      ['GET', `${L}/k.n`, null],
      ['POST', L, 'application/json'],
      ['PUT', `${L}/k.n`, 'application/json'],
      ['PATCH', `${L}/k.n`, 'application/merge-patch+json'],
      ['GET', '/api/v1/namespaces/ns/pods/p%201', null],
      ['PATCH', '/api/v1/namespaces/ns/pods/p', 'application/merge-patch+json'],
      ['PATCH', '/api/v1/namespaces/ns/pods/p', 'application/json-patch+json'],
    ]);
    expect(seen.every((s) => s.auth === 'Bearer t0ken')).toBe(true);
    expect(seen[2]!.body).toEqual(lease);
    expect(seen[3]!.body).toEqual({ spec: { renewTime: 'x' } });
    expect(seen[6]!.body).toEqual([{ op: 'test', path: '/metadata/annotations/a', value: 'b' }]);
  });

  it('throws what classifyKubeError reads: status kinds with the Status reason, timeouts, refused connections', async () => {
    const { source, base } = await fakeServer((s) => (s.method === 'PUT' ? [409, conflict] : s.method === 'GET' ? [404, { reason: 'NotFound' }] : null));
    const c = makeLightClient(source, { requestTimeoutMs: 200 });
    const fail = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (e: unknown) => classifyKubeError(e, 'lease ns/k.n'),
      );
    expect(await fail(c.replaceLease({ namespace: 'ns', name: 'k.n', body: lease }))).toMatchObject({
      kind: 'conflict',
      status: 409,
      reason: 'Conflict',
      message: 'lease ns/k.n: HTTP 409: the object has been modified (it changed since it was read; re-read and retry)',
    });
    expect(await fail(c.readLease({ namespace: 'ns', name: 'k.n' }))).toMatchObject({ kind: 'notFound', status: 404 });
    const t0 = performance.now();
    expect(await fail(c.mergePatchLease({ namespace: 'ns', name: 'k.n', body: {} }))).toMatchObject({ kind: 'unreachable', reason: 'Timeout' });
    expect(performance.now() - t0).toBeLessThan(2000);
    c.close();
    server!.closeAllConnections();
    await new Promise<void>((r) => server!.close(() => r()));
    server = null;
    const gone = makeLightClient(async () => ({ server: base, tls: {}, headers: async () => ({}) }), { requestTimeoutMs: 1000 });
    expect(await fail(gone.readLease({ namespace: 'ns', name: 'k.n' }))).toMatchObject({ kind: 'unreachable', reason: 'ECONNREFUSED' });
  });

  it('keeps one connection for many beats and counts requests; close() drops it, the next request connects again', async () => {
    const { source, connections } = await fakeServer(() => [200, lease]);
    const urls: string[] = [];
    const c = makeLightClient(source, { requestTimeoutMs: 1000, onRequest: (m, url) => urls.push(`${m} ${new URL(url).pathname}`) });
    for (let i = 0; i < 10; i++) await c.replaceLease({ namespace: 'ns', name: 'k.n', body: lease });
    expect(connections()).toBe(1);
    expect(urls).toHaveLength(10);
    expect(urls[0]).toBe('PUT /apis/coordination.k8s.io/v1/namespaces/ns/leases/k.n');
    c.close();
    await c.readLease({ namespace: 'ns', name: 'k.n' });
    expect(connections()).toBe(2);
    c.close();
  });

  it('takes a client-node KubeConfig as its endpoint (its server and token), and the agent client serves the same interface', async () => {
    const { seen, base } = await fakeServer(() => [200, lease]);
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: base, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'kc-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const clients: BeatClient[] = [makeLightClient(endpointFromKubeConfig(kc), { requestTimeoutMs: 1000 }), makeKubeClient(kc, { requestTimeoutMs: 1000 })];
    for (const c of clients) {
      await c.mergePatchLease({ namespace: 'ns', name: 'k.n', body: { spec: {} } });
      await c.mergePatchPod({ namespace: 'ns', name: 'p', body: { metadata: {} } });
      c.close();
    }
    expect(seen.map((s) => `${s.method} ${s.type} ${s.auth}`)).toEqual([
      'PATCH application/merge-patch+json Bearer kc-token',
      'PATCH application/merge-patch+json Bearer kc-token',
      'PATCH application/merge-patch+json Bearer kc-token',
      'PATCH application/merge-patch+json Bearer kc-token',
    ]);
  });
});
