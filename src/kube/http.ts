// Plain GETs to the api-server outside client-node: each on its own connection (no pool), with the
// kubeconfig's TLS material and credentials (client-node's applyToHTTPSOptions), for the
// informer's lists and watches and the agent's /readyz probe. docs/kube-client.md says why these
// do not go through client-node's fetch.
import type * as http from 'node:http';
import type * as https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** `?a=b&c=d` for a non-empty query, else ''. */
export function queryString(q: Record<string, string>): string {
  const p = new URLSearchParams(q).toString();
  return p ? `?${p}` : '';
}

/**
 * Sends GET `pathAndQuery` to the KubeConfig's current cluster with its TLS material and auth.
 * Resolves with the response as soon as its headers arrive (any status). `signal` aborts it.
 */
export async function kubeGet(kc: KubeConfig, pathAndQuery: string, signal: AbortSignal): Promise<http.IncomingMessage> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const url = new URL(cluster.server.replace(/\/+$/, '') + pathAndQuery);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  signal.throwIfAborted();
  // getBuiltinModule, not an ES import: see src/kube/light-client.ts.
  const send = url.protocol === 'http:' ? process.getBuiltinModule('node:http').request : process.getBuiltinModule('node:https').request;
  return new Promise((resolve, reject) => {
    const req = send(url, { ...opts, method: 'GET', headers: { ...opts.headers, accept: 'application/json' }, signal }, resolve);
    req.on('error', reject);
    req.end();
  });
}

/** Reads a whole response body as text (bounded). */
export function readBody(res: http.IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) {
        res.destroy(new Error(`response larger than ${maxBytes} bytes`));
        return;
      }
      chunks.push(c);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('close', () => reject(new Error('connection closed before the response ended')));
  });
}
