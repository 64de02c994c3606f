// What went wrong with a request to the api-server, in the few kinds callers act on differently.
// Adapters decide with `kind` (409: re-read and retry; 404: create; unreachable: back off, maybe a
// fresh connection pool); people read `message`, which names the object and says what to do.
//
// Accepts anything thrown by @kubernetes/client-node 2.0 over our undici Agent: `ApiException`
// (has `code`, `body` as the Status JSON text or object), a network error with a system or undici
// `code` (ECONNREFUSED, UND_ERR_SOCKET) on itself or on its `cause` (undici's fetch throws
// `TypeError: fetch failed` around it), an `AbortError` from our request timeout, or something
// unexpected. The node-fetch `FetchError` shape of client-node 1.x (`type: 'system'`) is still
// accepted.

export type KubeErrorKind =
  /** 409: the object changed since we read it (or already exists on create). Re-read, retry. */
  | 'conflict'
  /** 410: a watch's resourceVersion is too old. Relist. */
  | 'gone'
  /** 404: the object (or its namespace) does not exist. */
  | 'notFound'
  /** 401/403: credentials or RBAC refuse the request. Retrying will not help. */
  | 'forbidden'
  /** No answer: timeout, connection refused or reset, DNS, TLS handshake; or 429/5xx. Retry later. */
  | 'unreachable'
  /** 400/422 and other 4xx: the request itself is wrong. A bug or a bad input; do not retry. */
  | 'invalid';

export interface KubeError {
  kind: KubeErrorKind;
  /** HTTP status, or null when no response came back. */
  status: number | null;
  /** The api-server's Status.reason or the system error code, when known (e.g. `Conflict`, `ECONNREFUSED`). */
  reason: string | null;
  /** One line for people: names the object and the cause. */
  message: string;
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_HAS_EXPIRED',
  // undici's own, for a connection it could not open, lost, or closed under the request (the
  // agent drops its pool when it judges the api-server unreachable).
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

/**
 * The network error under `err`: client-node 2.x sends with undici's fetch, which rejects with a
 * bare `TypeError: fetch failed` and puts the system or undici error (ECONNREFUSED, ECONNRESET,
 * UND_ERR_SOCKET) in its `cause`. Returns that error's code and the chain's messages.
 */
function networkCause(err: unknown): { code: string; text: string } | null {
  const texts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const o = e as { message?: unknown; code?: unknown; cause?: unknown };
    if (typeof o.message === 'string' && o.message && !texts.includes(o.message)) texts.push(o.message);
    if (typeof o.code === 'string' && NETWORK_CODES.has(o.code)) return { code: o.code, text: texts.join(': ') };
    e = o.cause;
  }
  return null;
}

function statusBody(body: unknown): { reason?: string; message?: string } {
  let b = body;
  if (typeof body === 'string') {
    try {
      b = JSON.parse(body);
    } catch {
      return body.trim() ? { message: body.trim().slice(0, 300) } : {};
    }
  }
  if (b && typeof b === 'object') {
    const o = b as Record<string, unknown>;
    return {
      reason: typeof o.reason === 'string' ? o.reason : undefined,
      message: typeof o.message === 'string' ? o.message : undefined,
    };
  }
  return {};
}

function kindOfStatus(status: number): KubeErrorKind {
  if (status === 409) return 'conflict';
  if (status === 410) return 'gone';
  if (status === 404) return 'notFound';
  if (status === 401 || status === 403) return 'forbidden';
  if (status === 408 || status === 429 || status >= 500) return 'unreachable';
  return 'invalid';
}

const ADVICE: Record<KubeErrorKind, string> = {
  conflict: 'it changed since it was read; re-read and retry',
  gone: 'the resource version is too old; relist',
  notFound: 'it does not exist',
  forbidden: 'check the service account and its RBAC (see deploy/)',
  unreachable: 'the api-server did not answer; will retry',
  invalid: 'the request was refused as invalid',
};

/**
 * Classify an error from a request about `object` (e.g. `lease kube-system/kube-apiserver.node-1`).
 * Never throws.
 */
export function classifyKubeError(err: unknown, object: string): KubeError {
  const e = (err ?? {}) as Record<string, unknown>;
  const status = typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : null;
  if (status !== null && status >= 100) {
    const kind = kindOfStatus(status);
    const body = statusBody(e.body);
    const detail = body.message ? `: ${body.message}` : '';
    return { kind, status, reason: body.reason ?? null, message: `${object}: HTTP ${status}${detail} (${ADVICE[kind]})` };
  }
  const name = typeof e.name === 'string' ? e.name : '';
  const type = typeof e.type === 'string' ? e.type : '';
  const code = typeof e.code === 'string' ? e.code : typeof e.errno === 'string' ? e.errno : null;
  const text = err instanceof Error ? err.message : String(err);
  if (name === 'AbortError' || name === 'TimeoutError' || type === 'aborted' || type === 'request-timeout') {
    return { kind: 'unreachable', status: null, reason: 'Timeout', message: `${object}: request timed out (${ADVICE.unreachable})` };
  }
  if (type === 'system' || (code !== null && NETWORK_CODES.has(code)) || name === 'FetchError') {
    return { kind: 'unreachable', status: null, reason: code, message: `${object}: ${text} (${ADVICE.unreachable})` };
  }
  const cause = networkCause(err);
  if (cause) return { kind: 'unreachable', status: null, reason: cause.code, message: `${object}: ${cause.text} (${ADVICE.unreachable})` };
  return { kind: 'invalid', status: null, reason: code, message: `${object}: unexpected error: ${text}` };
}

export function isKind(err: unknown, kind: KubeErrorKind): boolean {
  return classifyKubeError(err, '').kind === kind;
}
