// Copied service-account tokens: what is remembered about each (so it can be minted again without
// the parent pod, whose service account the sanitized manifest no longer names), when it expires,
// and when it is due for a new one.
//
// Promises: `tokenTimes` reads `iat`/`exp` from a JWT's payload without verifying it (the token
// came from our own TokenRequest; only its lifetime is wanted); bytes that are not a JWT give a
// lifetime of the requested `expirationSeconds` (TokenRequest's default: one hour) from `nowMs`.
// `isDue` follows the kubelet's rule for projected tokens: renew once 80% of the lifetime is gone.
//
// Assumes: node and api-server clocks roughly agree (the kubelet assumes the same); `nowMs` is the
// wall clock, passed in.

/** One copied token, as kept in meta.json. */
export interface TokenCopy {
  /** The file in the checkpoint folder, e.g. `projected/kube-api-access/token`. */
  relPath: string;
  namespace: string;
  serviceAccount: string;
  audience?: string;
  expirationSeconds?: number;
  /** Wall-clock ISO 8601 time the token was issued (its `iat`, else when we received it). */
  issuedAt: string;
  /** Wall-clock ISO 8601 time the token stops being accepted. */
  expiresAt: string;
}

/** TokenRequest's default lifetime when the pod asks for none. */
export const DEFAULT_TOKEN_LIFETIME_S = 3600;
/** The kubelet renews a projected token once this share of its lifetime is gone. */
export const RENEW_AT_SHARE = 0.8;

function jwtClaims(bytes: Buffer): { iat?: unknown; exp?: unknown } | null {
  const parts = bytes.toString('utf8').trim().split('.');
  if (parts.length !== 3) return null;
  try {
    const payload = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as unknown;
    return typeof payload === 'object' && payload !== null ? (payload as { iat?: unknown; exp?: unknown }) : null;
  } catch {
    return null;
  }
}

/** Issue and expiry (ms since the epoch) of a freshly minted token. */
export function tokenTimes(bytes: Buffer, expirationSeconds: number | undefined, nowMs: number): { issuedAtMs: number; expiresAtMs: number } {
  const claims = jwtClaims(bytes);
  const exp = typeof claims?.exp === 'number' ? claims.exp * 1000 : null;
  const iat = typeof claims?.iat === 'number' ? claims.iat * 1000 : null;
  const lifetimeMs = (expirationSeconds ?? DEFAULT_TOKEN_LIFETIME_S) * 1000;
  if (exp !== null) return { issuedAtMs: iat !== null && iat < exp ? iat : Math.min(nowMs, exp), expiresAtMs: exp };
  return { issuedAtMs: nowMs, expiresAtMs: nowMs + lifetimeMs };
}

/** The record of a token just minted for `source`. */
export function tokenCopy(
  relPath: string,
  source: { namespace: string; name: string; audience?: string; expirationSeconds?: number },
  bytes: Buffer,
  nowMs: number,
): TokenCopy {
  const { issuedAtMs, expiresAtMs } = tokenTimes(bytes, source.expirationSeconds, nowMs);
  return {
    relPath,
    namespace: source.namespace,
    serviceAccount: source.name,
    ...(source.audience !== undefined ? { audience: source.audience } : {}),
    ...(source.expirationSeconds !== undefined ? { expirationSeconds: source.expirationSeconds } : {}),
    issuedAt: new Date(issuedAtMs).toISOString(),
    expiresAt: new Date(expiresAtMs).toISOString(),
  };
}

/** Whether `t` should be minted again at `nowMs`. */
export function isDue(t: TokenCopy, nowMs: number): boolean {
  const issued = Date.parse(t.issuedAt);
  const expires = Date.parse(t.expiresAt);
  return nowMs >= issued + RENEW_AT_SHARE * (expires - issued);
}

/** Why this meta.json `tokens` value is not valid, or null. */
export function tokensProblem(value: unknown): string | null {
  if (!Array.isArray(value)) return 'meta.json: tokens must be a list';
  for (const [i, t] of value.entries()) {
    if (typeof t !== 'object' || t === null) return `meta.json: tokens[${i}] must be an object`;
    const r = t as Record<string, unknown>;
    for (const field of ['relPath', 'namespace', 'serviceAccount'] as const) {
      if (typeof r[field] !== 'string') return `meta.json: tokens[${i}].${field} must be a string`;
    }
    for (const field of ['issuedAt', 'expiresAt'] as const) {
      if (typeof r[field] !== 'string' || Number.isNaN(Date.parse(r[field]))) return `meta.json: tokens[${i}].${field} must be an ISO 8601 time`;
    }
    if (r.audience !== undefined && typeof r.audience !== 'string') return `meta.json: tokens[${i}].audience must be a string`;
    if (r.expirationSeconds !== undefined && typeof r.expirationSeconds !== 'number') return `meta.json: tokens[${i}].expirationSeconds must be a number`;
  }
  return null;
}
