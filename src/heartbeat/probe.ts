// Readiness probe of the parent's main container, which chooses a beat's phase (Ready/Starting).
// Like the kubelet's probes: HTTP(S) GET succeeds on a 2xx/3xx status, TCP on an accepted
// connection; each uses a new connection and ends by its timeout, which the caller keeps below the
// interval. On top, the pod's own process must hold the probed port (ready-proof.ts), so a
// checkpoint answering on the same port is never taken for the parent. `none` probes nothing: its
// beats say Ready with `unprobed`, which proves only that the sidecar runs; the agent then takes
// the pod's own Ready condition from the api-server before it keeps a copy as last known good.
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import type { ProbeResult } from './beat.js';
import { type AcceptedBy, acceptedBy, type OwnershipOptions } from './ownership.js';
import { type AttributedResult, proveReady } from './ready-proof.js';

export type ProbeSpec = { kind: 'none' } | { kind: 'http'; url: URL } | { kind: 'tcp'; host: string; port: number };

export interface ProbeOptions {
  timeoutMs: number;
  /** PEM file of the CA that signed the main container's serving certificate (https only). */
  caFile?: string;
  /** Skip certificate verification (https only): for self-signed serving certificates. */
  insecure?: boolean;
  /** Where to look for the port's owner (tests: a fixture folder). Default /proc. */
  ownership?: OwnershipOptions;
}

export type Probe = () => Promise<ProbeResult>;

/** Parse `none`, `http://…`, `https://…` or `tcp://host:port`. */
export function parseProbe(text: string): { ok: true; spec: ProbeSpec } | { ok: false; error: string } {
  const s = text.trim();
  if (s === '' || s === 'none') return { ok: true, spec: { kind: 'none' } };
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return { ok: false, error: `probe "${text}" is not a URL: use none, http://host:port/path, https://… or tcp://host:port` };
  }
  if (url.protocol === 'http:' || url.protocol === 'https:') return { ok: true, spec: { kind: 'http', url } };
  if (url.protocol === 'tcp:') {
    const port = Number(url.port);
    if (!url.hostname || !Number.isInteger(port) || port < 1 || port > 65535) {
      return { ok: false, error: `probe "${text}" needs a host and a port: tcp://host:port` };
    }
    return { ok: true, spec: { kind: 'tcp', host: url.hostname.replace(/^\[|\]$/g, ''), port } };
  }
  return { ok: false, error: `probe "${text}": protocol ${url.protocol} is not one of http, https, tcp` };
}

/** A probe function for `spec`. The CA file is read once, here, so a missing file fails at start. */
export function makeProbe(spec: ProbeSpec, opts: ProbeOptions): Probe {
  if (spec.kind === 'none') return async () => ({ ok: true, unprobed: true });
  const base = { timeoutMs: opts.timeoutMs, ownershipOptions: opts.ownership };
  if (spec.kind === 'tcp') return () => proveReady({ ...base, kind: 'tcp', port: spec.port, once: (t) => probeTcp(spec.host, spec.port, t) });
  const ca = spec.url.protocol === 'https:' && opts.caFile ? readFileSync(opts.caFile) : undefined;
  const port = spec.url.port ? Number(spec.url.port) : spec.url.protocol === 'https:' ? 443 : 80;
  return () =>
    proveReady({
      ...base,
      kind: 'http',
      port,
      once: (t, pids) => probeHttp(spec.url, t, ca, opts.insecure === true, pids ? (local) => acceptedBy(port, local, pids, opts.ownership) : undefined),
    });
}

/**
 * One GET. With `attribute`, the connection is kept open until its answer has been attributed to
 * the process that accepted it (`attribute(our local port)`, while the server still holds its end:
 * the request asks for keep-alive, then the client closes).
 */
async function probeHttp(
  url: URL,
  timeoutMs: number,
  ca: Buffer | undefined,
  insecure: boolean,
  attribute?: (localPort: number) => AcceptedBy,
): Promise<AttributedResult> {
  // node:https only for an https probe: loading TLS costs a sidecar about 6 MiB of RSS.
  // getBuiltinModule, not an ES import: see src/kube/light-client.ts.
  const lib = url.protocol === 'https:' ? process.getBuiltinModule('node:https') : process.getBuiltinModule('node:http');
  return new Promise((resolve) => {
    const options: import('node:https').RequestOptions = {
      method: 'GET',
      signal: AbortSignal.timeout(timeoutMs),
      headers: { 'user-agent': 'lastseen-heartbeat', accept: '*/*', ...(attribute ? { connection: 'keep-alive' } : {}) },
      agent: false,
      ...(url.protocol === 'https:' ? { ca, rejectUnauthorized: !insecure } : {}),
    };
    // https: whether the process completed the TLS handshake. One that does is running and serving
    // connections, only slow to answer this request (an api-server whose /readyz waits on an etcd it
    // cannot reach: seen on the three-node bed, cut off from the others), which is no hang. A stopped
    // or wholly stuck process never gets that far: the kernel accepts, nobody answers.
    let handshake = false;
    const req = lib.request(url, options, (res) => {
      const owner = attribute && res.socket.localPort !== undefined ? attribute(res.socket.localPort) : null;
      if (attribute) {
        // The server keeps a kept-alive connection open: the client ends it once the answer is read
        // (an abort before that is this probe's own doing, not an error of the answer).
        res.on('error', () => {});
        res.once('end', () => req.destroy());
      }
      res.resume();
      const code = res.statusCode ?? 0;
      const r: ProbeResult = code >= 200 && code < 400 ? { ok: true } : { ok: false, error: `GET ${url.href}: HTTP ${code}` };
      resolve(owner ? { ...r, owner } : r);
    });
    if (url.protocol === 'https:') req.on('socket', (sock) => sock.once('secureConnect', () => (handshake = true)));
    req.on('error', (e: NodeJS.ErrnoException) => {
      const timedOut = e.name === 'AbortError' || e.name === 'TimeoutError';
      if (timedOut && handshake) {
        resolve({
          ok: false,
          error: `GET ${url.href}: no answer within ${timeoutMs}ms after the TLS handshake (the process serves connections: slow, not hung)`,
        });
        return;
      }
      const why = timedOut ? `no answer within ${timeoutMs}ms` : (e.code ?? e.message);
      resolve({ ok: false, error: `GET ${url.href}: ${why}`, ...(timedOut ? { unanswered: true } : {}) });
    });
    req.end();
  });
}

function probeTcp(host: string, port: number, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    const done = (r: ProbeResult) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => done({ ok: false, error: `tcp://${host}:${port}: no connection within ${timeoutMs}ms` }), timeoutMs);
    sock.once('connect', () => done({ ok: true }));
    sock.once('error', (e: NodeJS.ErrnoException) => done({ ok: false, error: `tcp://${host}:${port}: ${e.code ?? e.message}` }));
  });
}
