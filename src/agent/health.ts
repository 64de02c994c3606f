// /healthz, /readyz and /metrics on one port. healthz: the process loop is alive. readyz: this
// instance holds the node lock and its observers have synced at least once (a standby agent is
// live but not ready). metrics: the agent's own registry.
import type { Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface HealthSource {
  live(): { ok: boolean; reason: string };
  ready(): { ok: boolean; reason: string };
  registry: Registry;
}

export async function serveHealth(port: number, host: string, src: HealthSource): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  // getBuiltinModule, not an ES import: see src/kube/light-client.ts.
  const server = process.getBuiltinModule('node:http').createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = (r: { ok: boolean; reason: string }) => {
      res.writeHead(r.ok ? 200 : 503, { 'content-type': 'text/plain' });
      // A ready agent may still say what is degraded (a state folder that takes no writes).
      res.end(r.ok ? (r.reason ? `ok, degraded: ${r.reason}\n` : 'ok\n') : `${r.reason}\n`);
    };
    if (path === '/healthz' || path === '/livez') return answer(src.live());
    if (path === '/readyz') return answer(src.ready());
    if (path === '/metrics') {
      src.registry
        .metrics()
        .then((body) => {
          res.writeHead(200, { 'content-type': src.registry.contentType });
          res.end(body);
        })
        .catch((e: Error) => {
          res.writeHead(500);
          res.end(e.message);
        });
      return;
    }
    res.writeHead(404);
    res.end('not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const bound = typeof addr === 'object' && addr ? addr.port : port;
  return {
    server,
    port: bound,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
