// The NodeCheckpoint status writer's connections, counted at a TCP proxy in front of the real
// api-server: its writes (a read and a status update each, a minute apart and on transitions) ride
// one kept-alive connection, the agent's shared pool or a pool of its own, not a new connection and
// TLS handshake per request as client-node's makeApiClient gives.
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { realTimers } from '../../src/agent/agent.js';
import { StatusWriter } from '../../src/agent/status.js';
import { type KubeClient, makeKubeClient } from '../../src/kube/client.js';
import { apiserverPort, kubeconfigVia } from './fault-helpers.js';
import { kubectl } from './harness.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const RUN = Math.random().toString(36).slice(2, 8);
const WRITES = 5;
const nodes: string[] = [];
const proxies: TcpProxy[] = [];

afterAll(async () => {
  for (const p of proxies.splice(0)) await p.close();
  if (nodes.length > 0) await kubectl(['delete', 'nodecheckpoint', ...nodes, '--ignore-not-found']);
});

async function viaProxy(): Promise<{ proxy: TcpProxy; kc: KubeConfig }> {
  const proxy = await startTcpProxy({ host: '127.0.0.1', port: apiserverPort() });
  proxies.push(proxy);
  const kc = new KubeConfig();
  kc.loadFromFile(await kubeconfigVia(proxy.port));
  return { proxy, kc };
}

function writer(node: string, kc: KubeConfig, kube?: () => KubeClient): StatusWriter {
  nodes.push(node);
  return new StatusWriter({
    node,
    kubeConfig: kc,
    ...(kube ? { kube } : {}),
    views: () => [],
    conditions: () => [],
    clock: { now: () => performance.now() },
    timers: realTimers,
    logger: pino({ level: 'silent' }),
  });
}

/** `WRITES` status writes, one after the other; the connections the proxy accepted meanwhile. */
async function connectionsFor(w: StatusWriter, proxy: TcpProxy): Promise<number> {
  const before = proxy.opened();
  for (let i = 0; i < WRITES; i++) await w.flush();
  expect(w.writes).toBe(WRITES);
  return proxy.opened() - before;
}

describe('the status writer', () => {
  it(`writes ${WRITES} times over the agent's shared pool: at most two connections (undici may open a second while it reads the first answer)`, async () => {
    const { proxy, kc } = await viaProxy();
    let requests = 0;
    const kube = makeKubeClient(kc, { requestTimeoutMs: 10_000, onRequest: () => requests++ });
    try {
      const opened = await connectionsFor(
        writer(`status-shared-${RUN}`, kc, () => kube),
        proxy,
      );
      process.stdout.write(`status writer, shared pool: ${WRITES} writes, ${requests} requests, ${opened} connections\n`);
      expect(requests).toBeGreaterThanOrEqual(2 * WRITES);
      expect(opened).toBeLessThanOrEqual(2);
    } finally {
      kube.close();
    }
  });

  it(`without the shared pool keeps one of its own (at most two connections for ${WRITES} writes), closed by stop()`, async () => {
    const { proxy, kc } = await viaProxy();
    const w = writer(`status-own-${RUN}`, kc);
    const opened = await connectionsFor(w, proxy);
    process.stdout.write(`status writer, own pool: ${WRITES} writes, ${opened} connections\n`);
    expect(opened).toBeLessThanOrEqual(2);
    expect(proxy.connections()).toBeGreaterThan(0);
    w.stop();
    await expect.poll(() => proxy.connections(), { timeout: 10_000 }).toBe(0);
  });
});
