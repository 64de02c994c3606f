import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeProbe, parseProbe } from './probe.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function listen(server: Server | HttpsServer | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  closers.push(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as AddressInfo).port;
}

function probe(spec: string, timeoutMs = 1000) {
  const p = parseProbe(spec);
  if (!p.ok) throw new Error(p.error);
  return makeProbe(p.spec, { timeoutMs })();
}

describe('parseProbe', () => {
  it.each(['none', '', 'http://127.0.0.1:8080/healthz', 'https://localhost:6443/readyz', 'tcp://127.0.0.1:2379', 'tcp://[::1]:80'])('accepts %j', (s) => {
    expect(parseProbe(s).ok).toBe(true);
  });
  it.each(['127.0.0.1:80', 'ftp://x', 'tcp://host', 'tcp://:80', 'tcp://h:70000'])('refuses %j', (s) => {
    const r = parseProbe(s);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain(s);
  });
});

describe('probes', () => {
  it('none is always ready, and says nothing was probed', async () => {
    expect(await probe('none')).toEqual({ ok: true, unprobed: true });
  });

  it('http: 2xx/3xx ready, other statuses and refusals not, with the reason', async () => {
    let status = 200;
    const server = createServer((req, res) => {
      res.statusCode = req.url === '/healthz' ? status : 404;
      res.end('ok');
    });
    const port = await listen(server);
    expect(await probe(`http://127.0.0.1:${port}/healthz`)).toEqual({ ok: true });
    status = 302;
    expect(await probe(`http://127.0.0.1:${port}/healthz`)).toEqual({ ok: true });
    status = 503;
    expect(await probe(`http://127.0.0.1:${port}/healthz`)).toEqual({ ok: false, error: `GET http://127.0.0.1:${port}/healthz: HTTP 503` });
    expect(await probe(`http://127.0.0.1:${port}/other`)).toMatchObject({ ok: false, error: expect.stringContaining('HTTP 404') });
    await closers.pop()!();
    // Closed: nothing holds the port any more, which the ownership proof says before any request.
    expect(await probe(`http://127.0.0.1:${port}/healthz`)).toEqual({ ok: false, error: `nothing listens on port ${port}` });
  });

  it('http: a server that never answers fails within the timeout', async () => {
    const server = createServer(() => {});
    const port = await listen(server);
    closers.unshift(async () => void server.closeAllConnections());
    const t0 = performance.now();
    // 500 ms: the round also scans /proc for the port's owner first, slow on a loaded machine.
    const r = await probe(`http://127.0.0.1:${port}/`, 500);
    // No answer at all is `unanswered`: the sign of a hung process (src/core/fence.ts).
    expect(r).toMatchObject({ ok: false, error: expect.stringMatching(/no answer within \d+ms/), unanswered: true });
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  describe('https: a timeout is a hang only if the process did not even complete the TLS handshake', () => {
    let dir = '';
    const tls = () => {
      dir ||= mkdtempSync(join(tmpdir(), 'lastseen-probe-tls-'));
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-days',
          '1',
          '-subj',
          '/CN=127.0.0.1',
          '-keyout',
          join(dir, 'key.pem'),
          '-out',
          join(dir, 'cert.pem'),
        ],
        { stdio: 'ignore' },
      );
      return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
    };
    afterEach(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
      dir = '';
    });

    it('handshake done, no answer (an api-server whose /readyz waits on etcd): failed, not unanswered', async () => {
      const server = createHttpsServer(tls(), () => {});
      const port = await listen(server);
      closers.unshift(async () => void server.closeAllConnections());
      const p = parseProbe(`https://127.0.0.1:${port}/readyz`);
      if (!p.ok) throw new Error(p.error);
      const r = await makeProbe(p.spec, { timeoutMs: 700, insecure: true })();
      expect(r).toEqual({ ok: false, error: expect.stringMatching(/no answer within \d+ms after the TLS handshake .*slow, not hung/) });
    });

    it('no handshake at all (the kernel accepts, the process never answers): unanswered', async () => {
      const held: Socket[] = [];
      const server = createTcpServer((s) => void held.push(s)); // accepts, never speaks TLS
      const port = await listen(server);
      closers.unshift(async () => {
        for (const s of held) s.destroy();
      });
      const p = parseProbe(`https://127.0.0.1:${port}/readyz`);
      if (!p.ok) throw new Error(p.error);
      const r = await makeProbe(p.spec, { timeoutMs: 700, insecure: true })();
      expect(r).toMatchObject({ ok: false, error: expect.stringMatching(/no answer within \d+ms$/), unanswered: true });
    });
  });

  it('tcp: an accepted connection is ready, a refused one is not', async () => {
    const server = createTcpServer((s) => s.end());
    const port = await listen(server);
    expect(await probe(`tcp://127.0.0.1:${port}`)).toEqual({ ok: true });
    await closers.pop()!();
    expect(await probe(`tcp://127.0.0.1:${port}`)).toEqual({ ok: false, error: `nothing listens on port ${port}` });
  });
});
