// capture: sanitize a Ready parent pod and fetch the data its copy needs, ready for Store.save.
//
// Promises: every DataFile from sanitize becomes bytes in the returned map (a whole-object source
// expands to one file per key); every hostPath folder is listed as a '<folder>/' entry with empty
// bytes so it exists even when empty. A missing Secret/ConfigMap/key that the pod does not mark
// optional fails the capture (CaptureError): a copy that cannot start is worse than the last good
// one, which the caller keeps. Downward API values come from the pod passed in.
//
// Assumes: the resolver is the agent's (api-server reads it is allowed to make); the caller says
// when the pod was last Ready and what time it is (wall clock, ISO 8601) — no clock is read here.
import type { V1Pod } from '@kubernetes/client-node';
import { type DataFile, type DataSource, type Sanitized, type SanitizeOptions, sanitize } from './sanitize.js';
import { type TokenCopy, tokenCopy } from './tokens.js';
import type { Access } from './tree.js';

/** Reads the cluster data a copy needs. Returns null when the object does not exist. */
export interface DataResolver {
  /** All keys of a Secret (data, decoded). */
  secret(namespace: string, name: string): Promise<Record<string, Buffer> | null>;
  /** All keys of a ConfigMap (data and binaryData). */
  configMap(namespace: string, name: string): Promise<Record<string, Buffer> | null>;
  /** A token for the service account (TokenRequest). */
  serviceAccountToken(namespace: string, serviceAccount: string, audience: string | undefined, expirationSeconds: number | undefined): Promise<Buffer>;
}

/** What is kept about one capture; `meta.json` is this minus the manifest. */
export interface Capture {
  manifest: V1Pod;
  specHash: string;
  sourcePodUid: string;
  sourcePodName: string;
  /** Wall-clock ISO 8601 time of the capture. */
  capturedAt: string;
  /** Wall-clock ISO 8601 time the parent was last seen Ready (null: unknown). */
  lastReadyAt: string | null;
  /** The copied service-account tokens, so an active checkpoint's can be minted again in place. */
  tokens?: TokenCopy[];
  /**
   * Owner, group and mode of the copied entries (relative paths, no trailing slash) whose access
   * is not the store's default 0600/0700 root: what the parent's own volumes give its pod.
   */
  access?: Record<string, Access>;
}

export interface CaptureResult {
  capture: Capture;
  /** relPath -> bytes; a relPath ending in '/' is a folder to create (empty bytes). */
  data: Map<string, Buffer>;
  warnings: string[];
}

export class CaptureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CaptureError';
  }
}

/** The value of a downward API field of this pod, formatted as the kubelet does. */
export function downwardValue(pod: V1Pod, fieldPath: string): string {
  const meta = pod.metadata ?? {};
  const map = (m: Record<string, string> | undefined): string =>
    Object.keys(m ?? {})
      .sort()
      .map((k) => `${k}=${JSON.stringify(m?.[k])}`)
      .join('\n');
  const subscript = /^metadata\.(labels|annotations)\['([^']+)'\]$/.exec(fieldPath);
  if (subscript) return (subscript[1] === 'labels' ? meta.labels : meta.annotations)?.[subscript[2]!] ?? '';
  switch (fieldPath) {
    case 'metadata.name':
      return meta.name ?? '';
    case 'metadata.namespace':
      return meta.namespace ?? '';
    case 'metadata.uid':
      return meta.uid ?? '';
    case 'metadata.labels':
      return map(meta.labels);
    case 'metadata.annotations':
      return map(meta.annotations);
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? '';
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? '';
    case 'status.hostIP':
      return pod.status?.hostIP ?? '';
    case 'status.podIP':
      return pod.status?.podIP ?? '';
    default:
      throw new CaptureError(`downward API field ${fieldPath} is not supported`);
  }
}

function describe(source: DataSource): string {
  if (source.kind === 'downwardAPI') return `downward API ${source.fieldPath}`;
  return `${source.kind} ${source.namespace}/${source.name}`;
}

async function fetchFile(
  pod: V1Pod,
  file: DataFile,
  resolver: DataResolver,
  cache: Map<string, Promise<Record<string, Buffer> | null>>,
  tokens: { nowMs: number; copies: TokenCopy[] },
): Promise<Array<[string, Buffer]>> {
  const source = file.source;
  if (source.kind === 'downwardAPI') return [[file.relPath, Buffer.from(downwardValue(pod, source.fieldPath))]];
  if (source.kind === 'serviceAccountToken') {
    const bytes = await resolver.serviceAccountToken(source.namespace, source.name, source.audience, source.expirationSeconds);
    tokens.copies.push(tokenCopy(file.relPath, source, bytes, tokens.nowMs));
    return [[file.relPath, bytes]];
  }
  const cacheKey = `${source.kind}/${source.namespace}/${source.name}`;
  let pending = cache.get(cacheKey);
  if (!pending) {
    pending = source.kind === 'secret' ? resolver.secret(source.namespace, source.name) : resolver.configMap(source.namespace, source.name);
    cache.set(cacheKey, pending);
  }
  const object = await pending;
  if (!object) {
    if (source.optional) return [];
    throw new CaptureError(`${describe(source)} does not exist and is not optional`);
  }
  if (source.key === undefined) return Object.entries(object).map(([key, bytes]) => [`${file.relPath}/${key}`, bytes]);
  const bytes = object[source.key];
  if (bytes === undefined) {
    if (source.optional) return [];
    throw new CaptureError(`${describe(source)} has no key ${source.key} and is not optional`);
  }
  return [[file.relPath, bytes]];
}

export interface CaptureOptions extends SanitizeOptions {
  capturedAt: string;
  lastReadyAt: string | null;
}

export async function capture(pod: V1Pod, opts: CaptureOptions, resolver: DataResolver): Promise<CaptureResult> {
  const sanitized: Sanitized = sanitize(pod, opts);
  const data = new Map<string, Buffer>();
  for (const folder of sanitized.folders) data.set(folder, Buffer.alloc(0));
  const cache = new Map<string, Promise<Record<string, Buffer> | null>>();
  const tokens = { nowMs: Date.parse(opts.capturedAt), copies: [] as TokenCopy[] };
  const access: Record<string, Access> = { ...sanitized.folderAccess };
  for (const file of sanitized.files) {
    for (const [relPath, bytes] of await fetchFile(pod, file, resolver, cache, tokens)) {
      data.set(relPath, bytes);
      access[relPath] = file.access;
    }
  }
  // A folder an item path would have made holds nothing when its optional files are missing.
  for (const path of Object.keys(sanitized.folderAccess)) {
    if (!data.has(`${path}/`) && ![...data.keys()].some((k) => k.startsWith(`${path}/`))) delete access[path];
  }
  return {
    capture: {
      manifest: sanitized.manifest,
      specHash: sanitized.specHash,
      sourcePodUid: pod.metadata?.uid ?? '',
      sourcePodName: pod.metadata?.name ?? '',
      capturedAt: opts.capturedAt,
      lastReadyAt: opts.lastReadyAt,
      ...(tokens.copies.length > 0 ? { tokens: tokens.copies } : {}),
      access,
    },
    data,
    warnings: sanitized.warnings,
  };
}
