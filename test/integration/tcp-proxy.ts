/**
 * A plain TCP proxy for fault injection between a client and the api-server.
 *
 * Promises: bytes pass through untouched in both directions (so TLS, the server certificate's
 * 127.0.0.1 SAN and client certificates work end to end). `stall()` stops forwarding on every
 * connection, existing and new, without closing anything: the sockets stop being read, so the
 * peers see a silent, open connection, as behind a black-holing NAT or a dead link.
 * `stallEstablished()` does the same to the connections open at that moment only (a long-lived
 * watch, kept-alive sockets), while connections opened afterwards pass: a path where old flows are
 * black-holed but new ones work (a NAT or conntrack table that lost its entries). `resume()`
 * forwards again on every connection, including what queued meanwhile. `refuse()` closes every connection and
 * rejects new ones at once (a connection-level outage); `accept()` ends that.
 * Assumes: loopback only, a handful of connections; not a performance tool.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  /** The local port to point a client at. */
  port: number;
  stall(): void;
  /** Stall the connections open now; later connections pass. */
  stallEstablished(): void;
  resume(): void;
  refuse(): void;
  accept(): void;
  /** Open client connections. */
  connections(): number;
  /** Client connections accepted since the proxy started (refused ones excluded). */
  opened(): number;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  queued: Array<{ to: Socket; data: Buffer }>;
  /** Stalled by stallEstablished(). */
  stalled: boolean;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let stalled = false;
  let refusing = false;
  let opened = 0;

  const server: Server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    opened++;
    const upstream = connect(target.port, target.host);
    const pair: Pair = { client, upstream, queued: [], stalled: false };
    pairs.add(pair);
    const forward = (from: Socket, to: Socket) => {
      from.on('data', (data: Buffer) => {
        if (stalled || pair.stalled) {
          pair.queued.push({ to, data });
          from.pause();
          return;
        }
        to.write(data);
      });
    };
    forward(client, upstream);
    forward(upstream, client);
    if (stalled) {
      client.pause();
      upstream.pause();
    }
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('tcp proxy: no port');

  return {
    port: address.port,
    stall() {
      stalled = true;
      for (const p of pairs) {
        p.client.pause();
        p.upstream.pause();
      }
    },
    stallEstablished() {
      for (const p of pairs) {
        p.stalled = true;
        p.client.pause();
        p.upstream.pause();
      }
    },
    resume() {
      stalled = false;
      for (const p of pairs) {
        p.stalled = false;
        for (const q of p.queued.splice(0)) if (!q.to.destroyed) q.to.write(q.data);
        p.client.resume();
        p.upstream.resume();
      }
    },
    refuse() {
      refusing = true;
      for (const p of [...pairs]) {
        p.client.destroy();
        p.upstream.destroy();
      }
      pairs.clear();
    },
    accept() {
      refusing = false;
    },
    connections: () => pairs.size,
    opened: () => opened,
    async close() {
      for (const p of [...pairs]) {
        p.client.destroy();
        p.upstream.destroy();
      }
      pairs.clear();
      await new Promise((r) => server.close(r));
    },
  };
}
