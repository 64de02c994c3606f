// The heartbeat's api client: the few requests of a BeatClient (beat-client.ts) over node:https,
// without @kubernetes/client-node. docs/footprint.md says why: client-node is half the agent's
// bundle and most of a sidecar's memory above Node's own, for six requests.
//
// Like makeKubeClient (client.ts): every request carries a timeout (AbortSignal), the connections
// are one keep-alive pool per client (one TLS handshake, then one request per beat), and a new
// client is a new pool, which the channels ask for after repeated failures. TLS material is read
// when the client sends its first request, so a fresh client picks up rotated files.
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { BeatClient, ObjectRef } from './beat-client.js';
import { readBody } from './http.js';
import type { Endpoint, EndpointSource } from './light-config.js';

// Not `import … from 'node:http'`: an ES module import of node:http builds its module namespace,
// which reads every export, including the getters that load Node's internal undici (about 30 ms of a
// sidecar's start; 60 ms of the agent's). The builtin itself is the same object.
const http = process.getBuiltinModule('node:http');

/** Sockets per client, as makeKubeClient. */
const MAX_SOCKETS = 8;
/** A Lease or a pod is a few KiB; anything past this is not an answer we want. */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

export interface LightClientOptions {
  /** Abort each request (until its whole body is read) after this long (ms). */
  requestTimeoutMs: number;
  /** Called as each request is sent. */
  onRequest?: (method: string, url: string) => void;
}

/** A response outside 2xx, shaped as classifyKubeError reads it: the status in `code`, the Status JSON in `body`. */
export class KubeHttpError extends Error {
  constructor(
    readonly code: number,
    readonly body: string,
    what: string,
  ) {
    super(`${what}: HTTP ${code}`);
    this.name = 'KubeHttpError';
  }
}

const MERGE_PATCH = 'application/merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';
const seg = encodeURIComponent;
const leases = (namespace: string) => `/apis/coordination.k8s.io/v1/namespaces/${seg(namespace)}/leases`;
const pods = (namespace: string) => `/api/v1/namespaces/${seg(namespace)}/pods`;

export function makeLightClient(source: EndpointSource, opts: LightClientOptions): BeatClient {
  if (!(opts.requestTimeoutMs > 0)) throw new Error(`requestTimeoutMs must be positive, got ${opts.requestTimeoutMs}`);
  let connection: Promise<{ endpoint: Endpoint; agent: import('node:http').Agent; send: typeof http.request }> | null = null;
  const agents: import('node:http').Agent[] = [];
  const connect = async () => {
    const endpoint = await source();
    // node:https (TLS) only when a request needs it: a local-channel sidecar never loads it.
    const https = endpoint.server.startsWith('https:') ? process.getBuiltinModule('node:https') : null;
    const agent = https
      ? new https.Agent({ ...endpoint.tls, keepAlive: true, maxSockets: MAX_SOCKETS })
      : new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
    agents.push(agent);
    return { endpoint, agent, send: https ? https.request : http.request };
  };

  async function request<T>(method: string, path: string, body?: object, contentType = 'application/json'): Promise<T> {
    connection ??= connect().catch((e) => {
      connection = null;
      throw e;
    });
    const { endpoint, agent, send } = await connection;
    const url = endpoint.server + path;
    const headers: Record<string, string> = { accept: 'application/json', ...(await endpoint.headers()) };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) {
      headers['content-type'] = contentType;
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    const signal = AbortSignal.timeout(opts.requestTimeoutMs);
    opts.onRequest?.(method, url);
    const text = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = send(url, { method, headers, agent, signal }, (res) => {
        readBody(res, MAX_RESPONSE_BYTES).then((t) => resolve({ status: res.statusCode ?? 0, text: t }), reject);
      });
      req.on('error', reject);
      req.end(payload);
    });
    if (text.status < 200 || text.status >= 300) throw new KubeHttpError(text.status, text.text, `${method} ${path}`);
    return JSON.parse(text.text) as T;
  }

  return {
    readLease: ({ namespace, name }: ObjectRef) => request<V1Lease>('GET', `${leases(namespace)}/${seg(name)}`),
    createLease: ({ namespace, body }) => request<V1Lease>('POST', leases(namespace), body),
    replaceLease: ({ namespace, name, body }) => request<V1Lease>('PUT', `${leases(namespace)}/${seg(name)}`, body),
    mergePatchLease: ({ namespace, name, body }) => request<V1Lease>('PATCH', `${leases(namespace)}/${seg(name)}`, body, MERGE_PATCH),
    readPod: ({ namespace, name }: ObjectRef) => request<V1Pod>('GET', `${pods(namespace)}/${seg(name)}`),
    mergePatchPod: ({ namespace, name, body }) => request<unknown>('PATCH', `${pods(namespace)}/${seg(name)}`, body, MERGE_PATCH),
    jsonPatchPod: ({ namespace, name, body }) => request<unknown>('PATCH', `${pods(namespace)}/${seg(name)}`, body, JSON_PATCH),
    close() {
      for (const a of agents.splice(0)) a.destroy();
      connection = null;
    },
  };
}
