/**
 * A plain TCP proxy for fault injection between a client and the api-server.
 *
 * Promises: bytes pass through untouched in both directions (so TLS, the server certificate's
 * 127.0.0.1 SAN and client certificates work end to end). `stall()` stops forwarding on every
 * connection, existing and new, without closing anything: the sockets stop being read, so the
 * peers see a silent, open connection, as behind a black-holing NAT or a dead link. `resume()`
 * forwards again, including what queued meanwhile. `refuse()` closes every connection and
 * rejects new ones at once (a connection-level outage); `accept()` ends that.
 * Assumes: loopback only, a handful of connections; not a performance tool.
 */
import { createServer, type Server, type Socket, connect } from 'node:net';

export interface TcpProxy {
  /** The local port to point a client at. */
  port: number;
  stall(): void;
  resume(): void;
  refuse(): void;
  accept(): void;
  /** Open client connections. */
  connections(): number;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  queued: Array<{ to: Socket; data: Buffer }>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let stalled = false;
  let refusing = false;

  const server: Server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    const pair: Pair = { client, upstream, queued: [] };
    pairs.add(pair);
    const forward = (from: Socket, to: Socket) => {
      from.on('data', (data: Buffer) => {
        if (stalled) {
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
    resume() {
      stalled = false;
      for (const p of pairs) {
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
