// The live read's connection: a read that confirms silence must not ride a pooled socket that may be
// stalled like the watch (test/integration/faults.test.ts shows the false activation it caused).
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { leaseWithBeat } from '../channels/lease.js';
import { ManifestDir } from '../checkpoint/manifests.js';
import { Store } from '../checkpoint/store.js';
import { initialState } from '../core/decide.js';
import { type KubeClient, makeKubeClient } from '../kube/client.js';
import { defaultPolicy } from '../policy/policy.js';
import { EVENT_RETRY_MS, MAX_EVENT_BACKLOG, makeActuators, withoutPortSharing } from './actuators.js';
import type { ParentView } from './agent.js';

const NODE = 'n1';
const beat = {
  channel: 'lease' as const,
  holder: 'demo-n1',
  holderUid: 'u1',
  role: 'parent' as const,
  phase: 'Ready' as const,
  sequence: 9,
  renewTime: '2025-01-01T00:00:00.000001Z',
};
const lease = leaseWithBeat(null, { namespace: 'ns', key: 'demo', node: NODE, role: 'parent', windowMs: 1000 }, beat);

function client(read: () => Promise<unknown>): KubeClient & { closed: number; reads: number } {
  const c = {
    closed: 0,
    reads: 0,
    coordination: {
      readNamespacedLease: async () => {
        c.reads++;
        return read();
      },
    },
    core: {},
    kubeConfig: {},
    requestTimeoutMs: 1000,
    close() {
      c.closed++;
    },
  };
  return c as unknown as KubeClient & { closed: number; reads: number };
}

const parent: ParentView<V1Pod> = {
  id: 'ns/demo',
  namespace: 'ns',
  key: 'demo',
  pod: null,
  labels: {},
  overrides: [],
  state: initialState({ namespace: 'ns', key: 'demo', policy: defaultPolicy().defaults, now: 0 }),
};
/** Folders no test here reaches (the live read and the retire touch neither the store nor, below, the real folder). */
const unused = {
  store: new Store({ stateDir: join(tmpdir(), 'lastseen-unused-state') }),
  manifests: new ManifestDir({ dir: join(tmpdir(), 'lastseen-unused-manifests') }),
};
const timeout = () => Promise.reject(Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' }));

describe('withoutPortSharing', () => {
  it('removes --permit-port-sharing (and =true) from every container, and nothing else', () => {
    const manifest = {
      apiVersion: 'v1',
      kind: 'Pod',
      spec: {
        containers: [
          { name: 'kube-apiserver', command: ['kube-apiserver', '--secure-port=6443', '--permit-port-sharing'], args: ['--permit-port-sharing=true', '--v=2'] },
          { name: 'heartbeat', args: ['heartbeat', '--permit-port-sharing-note'] },
        ],
      },
    };
    const out = withoutPortSharing(manifest);
    expect(out.spec!.containers[0]!.command).toEqual(['kube-apiserver', '--secure-port=6443']);
    expect(out.spec!.containers[0]!.args).toEqual(['--v=2']);
    expect(out.spec!.containers[1]!.args).toEqual(['heartbeat', '--permit-port-sharing-note']);
    // The stored manifest itself is untouched (the shared copy is written again when the verdict ends).
    expect(manifest.spec.containers[0]!.command).toContain('--permit-port-sharing');
  });
});

describe('readLive', () => {
  it('reads on a fresh client, not the pooled one, and closes it', async () => {
    const pooled = client(timeout); // a kept-alive socket stalled like the watch
    const fresh: Array<ReturnType<typeof client>> = [];
    const a = makeActuators({
      node: NODE,
      instance: 'agent',
      ...unused,
      kube: () => pooled,
      freshKube: () => {
        const c = client(async () => lease);
        fresh.push(c);
        return c;
      },
      logger: pino({ level: 'silent' }),
    });
    expect(await a.readLive(parent, ['lease'])).toEqual({ beats: [beat] });
    expect(await a.readLive(parent, ['lease'])).toEqual({ beats: [beat] });
    expect(pooled.reads).toBe(0);
    expect(fresh.map((c) => [c.reads, c.closed])).toEqual([
      [1, 1],
      [1, 1],
    ]);
  });

  it('a fresh client that gets no answer reports unavailable, and is closed', async () => {
    const fresh = client(timeout);
    const a = makeActuators({
      node: NODE,
      instance: 'agent',
      ...unused,
      kube: () => null,
      freshKube: () => fresh,
      logger: pino({ level: 'silent' }),
    });
    const r = await a.readLive(parent, ['lease']);
    expect(r).toMatchObject({ unavailable: expect.stringContaining('timed out') });
    expect(fresh.closed).toBe(1);
  });

  it('without freshKube, reads on the pooled client (file-only setups, older wiring)', async () => {
    const pooled = client(async () => lease);
    const a = makeActuators({
      node: NODE,
      instance: 'agent',
      ...unused,
      kube: () => pooled,
      logger: pino({ level: 'silent' }),
    });
    expect(await a.readLive(parent, ['lease'])).toEqual({ beats: [beat] });
    expect([pooled.reads, pooled.closed]).toEqual([1, 0]);
  });
});

describe('retire', () => {
  it("removes the retired checkpoint's own heartbeat file, and only that one", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-beats-'));
    try {
      await writeFile(join(dir, 'ns_demo.checkpoint.json'), '{}');
      await writeFile(join(dir, 'ns_demo.json'), '{}'); // the parent's own beat stays
      const retired: string[] = [];
      const manifests = new (class extends ManifestDir {
        override async retire(id: string): Promise<'removed'> {
          retired.push(id);
          return 'removed';
        }
      })({ dir: join(dir, 'manifests') });
      const a = makeActuators({
        node: NODE,
        instance: 'agent',
        store: unused.store,
        manifests,
        kube: () => null,
        logger: pino({ level: 'silent' }),
        heartbeatDir: dir,
      });
      await a.retire(parent, { code: 'ParentReady', message: 'the parent reports Ready' });
      expect(retired).toEqual(['ns/demo']);
      expect((await readdir(dir)).sort()).toEqual(['ns_demo.json']);
      // A second retire (a retry after a crash) finds the file gone and still succeeds.
      await a.retire(parent, { code: 'ParentReady', message: 'the parent reports Ready' });
      expect(retired).toEqual(['ns/demo', 'ns/demo']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('events during an outage', () => {
  it('are kept while the api-server does not answer and sent in order, with the time they were decided, once it does; a refused one is dropped', async () => {
    const sent: Array<{ reason: string; at: string }> = [];
    let answer: 'timeout' | 'ok' = 'timeout';
    const pooled = client(async () => lease);
    (pooled as unknown as { core: object }).core = {
      createNamespacedEvent: async ({ body }: { body: { reason: string; firstTimestamp: Date } }) => {
        if (answer === 'timeout') return timeout();
        if (body.reason === 'Refused') throw Object.assign(new Error('unprocessable'), { code: 422 });
        sent.push({ reason: body.reason, at: body.firstTimestamp.toISOString() });
        return {};
      },
    };
    let wall = Date.parse('2026-01-01T00:00:00Z');
    const a = makeActuators({ node: NODE, instance: 'agent', ...unused, kube: () => pooled, logger: pino({ level: 'silent' }), wallNow: () => wall });
    const ev = (reason: string) => ({ type: 'event' as const, eventType: 'Normal' as const, reason, message: reason });
    await a.event(parent, ev('CheckpointActivated'));
    wall += 1000;
    await a.event(parent, ev('Refused'));
    wall += 1000;
    await a.nodeEvent(ev('PolicyMissing'));
    expect(sent).toEqual([]);
    answer = 'ok';
    await a.flushEvents();
    expect(sent).toEqual([
      { reason: 'CheckpointActivated', at: '2026-01-01T00:00:00.000Z' },
      { reason: 'PolicyMissing', at: '2026-01-01T00:00:02.000Z' },
    ]);
    // Nothing is sent twice.
    await a.flushEvents();
    await a.event(parent, ev('CheckpointRetired'));
    expect(sent.map((s) => s.reason)).toEqual(['CheckpointActivated', 'PolicyMissing', 'CheckpointRetired']);
  });

  it(`are tried again every ${EVENT_RETRY_MS / 1000} s while kept, with no flush asked for (an outage too short for a reachable verdict), and not after stopEvents`, async () => {
    const sent: string[] = [];
    let down = true;
    let tries = 0;
    const pooled = client(async () => lease);
    (pooled as unknown as { core: object }).core = {
      createNamespacedEvent: async ({ body }: { body: { reason: string } }) => {
        tries++;
        if (down) throw Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
        sent.push(body.reason);
        return {};
      },
    };
    const pending: Array<{ fn: () => void; ms: number }> = [];
    const timers = { set: (fn: () => void, ms: number) => pending.push({ fn, ms }), clear: () => undefined };
    const fire = async () => {
      const t = pending.splice(0);
      for (const x of t) x.fn();
      await new Promise((r) => setTimeout(r, 0));
    };
    const a = makeActuators({ node: NODE, instance: 'agent', ...unused, kube: () => pooled, logger: pino({ level: 'silent' }), timers });
    await a.event(parent, { type: 'event', eventType: 'Normal', reason: 'CheckpointCollected', message: 'm' });
    expect(sent).toEqual([]);
    expect(pending.map((p) => p.ms)).toEqual([EVENT_RETRY_MS]); // one retry, not one per failure
    await fire();
    expect(tries).toBe(2);
    expect(pending).toHaveLength(1); // still down: tried again later
    down = false;
    await fire();
    expect(sent).toEqual(['CheckpointCollected']);
    expect(pending).toHaveLength(0); // nothing kept: no more retries
    // After the turn ends no retry is scheduled.
    down = true;
    a.stopEvents();
    await a.event(parent, { type: 'event', eventType: 'Normal', reason: 'Later', message: 'm' });
    expect(pending).toHaveLength(0);
  });

  it(`keep at most ${MAX_EVENT_BACKLOG}, the newest`, async () => {
    const sent: string[] = [];
    let down = true;
    const pooled = client(async () => lease);
    (pooled as unknown as { core: object }).core = {
      createNamespacedEvent: async ({ body }: { body: { message: string } }) => {
        if (down) return timeout();
        sent.push(body.message);
        return {};
      },
    };
    const a = makeActuators({ node: NODE, instance: 'agent', ...unused, kube: () => pooled, logger: pino({ level: 'silent' }) });
    for (let i = 0; i < MAX_EVENT_BACKLOG + 5; i++) await a.event(parent, { type: 'event', eventType: 'Normal', reason: 'R', message: `m${i}` });
    down = false;
    await a.flushEvents();
    expect(sent.length).toBe(MAX_EVENT_BACKLOG);
    expect(sent[0]).toBe('m5');
    expect(sent.at(-1)).toBe(`m${MAX_EVENT_BACKLOG + 4}`);
  });
});

// The api-server's failures as the agent's real client sees them (client-node 2.x over undici's
// fetch: `TypeError: fetch failed`, the cause inside): a refused connection (the api-server down),
// a reset one (killed while it held the request), a pool dropped under a request (what the agent
// does when it judges the api-server unreachable). Each keeps the Event; none drops it.
describe('events through the real client', () => {
  let server: Server | null = null;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = null;
  });

  /** A plain-http stand-in that answers an Event POST as the api-server does, resets it, or never answers. */
  async function eventServer(): Promise<{ kc: KubeConfig; mode: { now: 'ok' | 'reset' | 'hang' }; received: string[]; requests: () => number }> {
    const mode: { now: 'ok' | 'reset' | 'hang' } = { now: 'ok' };
    const received: string[] = [];
    let requests = 0;
    server = createServer((req, res) => {
      requests++;
      if (mode.now === 'reset') return req.socket.destroy();
      if (mode.now === 'hang') return;
      let text = '';
      req.on('data', (c: Buffer) => {
        text += c.toString();
      });
      req.on('end', () => {
        received.push((JSON.parse(text) as { reason: string }).reason);
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(text);
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    return { kc: kubeConfigAt((server.address() as AddressInfo).port), mode, received, requests: () => requests };
  }
  function kubeConfigAt(port: number): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't0ken' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  }
  /** A port nothing listens on (a server opened and closed on it). */
  async function refusedPort(): Promise<number> {
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
    const port = (s.address() as AddressInfo).port;
    await new Promise<void>((r) => s.close(() => r()));
    return port;
  }
  const ev = (reason: string) => ({ type: 'event' as const, eventType: 'Normal' as const, reason, message: reason });

  it('a refused, a reset and a dropped connection keep the Event; it is sent once the api-server answers', async () => {
    const api = await eventServer();
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(String(JSON.parse(line).msg)) });
    let kube = makeKubeClient(kubeConfigAt(await refusedPort()), { requestTimeoutMs: 5_000 });
    const a = makeActuators({ node: NODE, instance: 'agent', ...unused, kube: () => kube, logger });

    await a.event(parent, ev('CheckpointCollected')); // refused
    kube.close();
    kube = makeKubeClient(api.kc, { requestTimeoutMs: 5_000 });
    api.mode.now = 'reset';
    await a.event(parent, ev('Reset'));
    expect(api.requests()).toBe(1); // the reset one; the kept ones go in order, the oldest first
    api.mode.now = 'hang';
    const hanging = a.event(parent, ev('Dropped'));
    await vi.waitFor(() => expect(api.requests()).toBe(2));
    kube.close(); // as the agent does on an unreachable verdict
    await hanging;
    expect(api.received).toEqual([]);
    expect(warnings).not.toContain('event not recorded');

    kube = makeKubeClient(api.kc, { requestTimeoutMs: 5_000 });
    api.mode.now = 'ok';
    await a.flushEvents();
    expect(api.received).toEqual(['CheckpointCollected', 'Reset', 'Dropped']);
    kube.close();
  });

  it('a flush asked for while a send is still failing sends the backlog once that send has failed', async () => {
    const api = await eventServer();
    let kube = makeKubeClient(api.kc, { requestTimeoutMs: 5_000 });
    const a = makeActuators({ node: NODE, instance: 'agent', ...unused, kube: () => kube, logger: pino({ level: 'silent' }) });
    api.mode.now = 'hang';
    const first = a.event(parent, ev('CheckpointCollected'));
    await vi.waitFor(() => expect(api.requests()).toBe(1));
    // The api-server answers again (the reachable verdict's flush) while the first send still waits.
    api.mode.now = 'ok';
    const old = kube;
    kube = makeKubeClient(api.kc, { requestTimeoutMs: 5_000 });
    const flushed = a.flushEvents();
    old.close(); // the pending send fails now, after the flush was asked for
    await Promise.all([first, flushed]);
    expect(api.received).toEqual(['CheckpointCollected']);
    kube.close();
  });
});

describe('capture under handover: redirect', () => {
  const pod = (probe: string): V1Pod => ({
    metadata: { name: 'demo-n1', namespace: 'ns', uid: 'pod-1' },
    spec: {
      nodeName: NODE,
      initContainers: [{ name: 'lastseen-heartbeat', image: 'x', args: ['heartbeat', `--probe=${probe}`] }],
      containers: [{ name: 'demo', image: 'example.invalid/demo:1' }],
    },
  });

  async function captureWith(handover: 'redirect' | 'overlap', probe: string): Promise<string[]> {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-capture-'));
    const events: string[] = [];
    const kube = {
      core: { createNamespacedEvent: async (x: { body: { reason?: string; type?: string } }) => void events.push(`${x.body.type} ${x.body.reason}`) },
    };
    try {
      const a = makeActuators({
        node: NODE,
        instance: 'agent',
        store: new Store({ stateDir: dir }),
        manifests: unused.manifests,
        kube: () => kube as unknown as KubeClient,
        logger: pino({ level: 'silent' }),
      });
      const policy = {
        ...defaultPolicy().defaults,
        handover,
        ...(handover === 'redirect' ? { redirect: { port: 6443, copyPort: 16443, exceptAddress: '127.0.0.2' } } : {}),
      };
      const view = { ...parent, pod: pod(probe), state: { ...parent.state, policy } };
      await a.capture(view, { uid: 'pod-1', name: 'demo-n1' } as never, { code: 'ParentReady', message: 'x' });
      return events;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it("says, with a Warning Event at the capture, when the parent's probe would be redirected to its checkpoint", async () => {
    expect(await captureWith('redirect', 'https://127.0.0.1:6443/readyz')).toEqual(['Warning ProbeRedirected']);
  });

  it('says nothing when the probe goes to the excepted address, or the parent is not behind a redirect', async () => {
    expect(await captureWith('redirect', 'https://127.0.0.2:6443/readyz')).toEqual([]);
    expect(await captureWith('overlap', 'https://127.0.0.1:6443/readyz')).toEqual([]);
  });
});
