// sanitize: turn a parent pod into the static-pod manifest of its checkpoint, plus the list of data
// files the copy needs on disk. Pure: no I/O, no clock; the same pod gives the same bytes and hash.
//
// Promises (DESIGN "Files on the node"):
// - metadata keeps the parent's name (the kubelet appends the node name to a static pod's mirror,
//   so people still recognise it), namespace, labels and annotations, minus everything lastseen.dev
//   and server-set; adds label `lastseen.dev/role: checkpoint`, label `lastseen.dev/parent: <key>`
//   (so the manifest alone names its parent key) and annotation `lastseen.dev/checkpoint-of`; the
//   owner is the parent pod. (The kubelet replaces a mirror pod's owners with the Node, so the
//   annotation is the dependable link; the owner is kept for whoever reads the file.)
// - the spec loses what a static pod cannot have or what the api-server sets: node name, node
//   selector, node affinity, service account, image pull secrets, ephemeral containers, priority
//   (recomputed from the class), overhead, scheduling gates.
// - secret, configMap and projected volumes become hostPath folders (`type: Directory`) under the
//   checkpoint folder: `secrets/<volume>`, `configmaps/<volume>`, `projected/<volume>`.
// - the heartbeat sidecar runs with `LASTSEEN_ROLE=checkpoint`.
// - with the host's network, containers declare no `ports` (they would be host ports that keep the
//   parent's own pod out while the copy runs); probes that named one use its number.
// - `specHash` is sha256 over canonical JSON (sorted keys) of the whole sanitized manifest, so
//   key order never matters and any change the kubelet would see changes it.
// Things a static pod cannot resolve and that cannot be copied safely (env from secrets, PVCs,
// resource claims) are kept and reported in `warnings`.
//
// Assumes: the pod passed the api-server's validation (volume names are DNS labels, item paths are
// relative); a path that would escape its folder is treated as a broken assumption and throws.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type { V1Container, V1KeyToPath, V1Pod, V1PodSpec, V1Volume } from '@kubernetes/client-node';
import { ANNOTATION_CHECKPOINT_OF, LABEL_PARENT, LABEL_ROLE } from '../core/names.js';

export const HEARTBEAT_CONTAINER = 'lastseen-heartbeat';
export const ROLE_ENV = 'LASTSEEN_ROLE';
export const PARENT_KEY_ENV = 'LASTSEEN_PARENT_KEY';
/** Every copied file is owner-only on disk, whatever mode the pod asked for (DESIGN "Security"). */
export const DATA_FILE_MODE = 0o600;

/** Annotations that are ours or the server's: never copied (some change on every beat). */
const DROPPED_ANNOTATION = /^(lastseen\.dev\/|kubernetes\.io\/config\.|kubectl\.kubernetes\.io\/last-applied-configuration$)/;

/** Downward API fields the capture can answer from the parent pod it was given. */
export const DOWNWARD_FIELDS = /^(metadata\.(name|namespace|uid|labels|annotations)|metadata\.(labels|annotations)\['[^']+'\]|spec\.(nodeName|serviceAccountName)|status\.(hostIP|podIP))$/;

export type DataSource =
  | { kind: 'secret'; namespace: string; name: string; key?: string; optional: boolean }
  | { kind: 'configMap'; namespace: string; name: string; key?: string; optional: boolean }
  | { kind: 'serviceAccountToken'; namespace: string; name: string; audience?: string; expirationSeconds?: number }
  | { kind: 'downwardAPI'; namespace: string; fieldPath: string };

/**
 * One thing to copy. With a `key` (or for tokens and downward API) `relPath` is a file; a secret or
 * configMap source without `key` means "every key", and `relPath` is the folder they go into.
 */
export interface DataFile {
  relPath: string;
  source: DataSource;
  /** Mode on disk: always DATA_FILE_MODE (the pod's defaultMode is not honoured; see DESIGN). */
  mode: number;
}

export interface SanitizeOptions {
  /** The parent key (see parentKey in ../core/names.ts). */
  parentKey: string;
  /** The node the copy is for. Not written into the manifest: the kubelet runs static pods where it is. */
  node: string;
  /** Absolute host path of this checkpoint's folder, e.g. /var/lib/lastseen/checkpoints/ns_key. */
  checkpointDir: string;
}

export interface Sanitized {
  manifest: V1Pod;
  files: DataFile[];
  /** Folders (relative, ending in '/') that hostPath volumes point at; they must exist even if empty. */
  folders: string[];
  specHash: string;
  /** Things the checkpoint will not be able to resolve, for an Event a person can act on. */
  warnings: string[];
}

export class SanitizeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SanitizeError';
  }
}

/** JSON with object keys sorted at every level and undefined dropped: the input to specHash. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(JSON.parse(JSON.stringify(value ?? null))));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key]);
  return out;
}

export function hashManifest(manifest: V1Pod): string {
  return createHash('sha256').update(canonicalJson(manifest)).digest('hex');
}

/** Join folder and item path, refusing anything that would leave the folder. */
function under(folder: string, itemPath: string): string {
  const joined = posix.normalize(posix.join(folder, itemPath));
  if (posix.isAbsolute(itemPath) || !joined.startsWith(`${folder}/`)) {
    throw new SanitizeError(`item path ${JSON.stringify(itemPath)} escapes ${folder}`);
  }
  return joined;
}

function keyFiles(folder: string, items: V1KeyToPath[] | undefined, source: (key?: string) => DataSource): DataFile[] {
  if (!items || items.length === 0) return [{ relPath: folder, source: source(), mode: DATA_FILE_MODE }];
  return items.map((item) => ({ relPath: under(folder, item.path), source: source(item.key), mode: DATA_FILE_MODE }));
}

interface VolumeResult {
  volume: V1Volume;
  files: DataFile[];
  folder: string | null;
}

function rewriteVolume(volume: V1Volume, namespace: string, spec: V1PodSpec, opts: SanitizeOptions, warnings: string[]): VolumeResult {
  const hostPath = (folder: string): V1Volume => ({
    name: volume.name,
    hostPath: { path: `${opts.checkpointDir}/${folder}`, type: 'Directory' },
  });
  if (volume.secret) {
    const s = volume.secret;
    const folder = `secrets/${volume.name}`;
    const name = s.secretName ?? '';
    const files = keyFiles(folder, s.items, (key) => ({ kind: 'secret', namespace, name, key, optional: s.optional === true }));
    return { volume: hostPath(folder), files, folder };
  }
  if (volume.configMap) {
    const c = volume.configMap;
    const folder = `configmaps/${volume.name}`;
    const files = keyFiles(folder, c.items, (key) => ({ kind: 'configMap', namespace, name: c.name ?? '', key, optional: c.optional === true }));
    return { volume: hostPath(folder), files, folder };
  }
  if (volume.projected) {
    const folder = `projected/${volume.name}`;
    const files: DataFile[] = [];
    for (const source of volume.projected.sources ?? []) {
      if (source.secret) {
        const s = source.secret;
        files.push(...keyFiles(folder, s.items, (key) => ({ kind: 'secret', namespace, name: s.name ?? '', key, optional: s.optional === true })));
      } else if (source.configMap) {
        const c = source.configMap;
        files.push(...keyFiles(folder, c.items, (key) => ({ kind: 'configMap', namespace, name: c.name ?? '', key, optional: c.optional === true })));
      } else if (source.serviceAccountToken) {
        const t = source.serviceAccountToken;
        const name = spec.serviceAccountName ?? spec.serviceAccount ?? 'default';
        files.push({
          relPath: under(folder, t.path),
          source: { kind: 'serviceAccountToken', namespace, name, audience: t.audience, expirationSeconds: t.expirationSeconds },
          mode: DATA_FILE_MODE,
        });
      } else if (source.downwardAPI) {
        for (const item of source.downwardAPI.items ?? []) {
          const fieldPath = item.fieldRef?.fieldPath;
          if (!fieldPath || !DOWNWARD_FIELDS.test(fieldPath)) {
            warnings.push(`volume ${volume.name}: downward API item ${item.path} (${fieldPath ?? 'resourceFieldRef'}) is not copied`);
            continue;
          }
          files.push({ relPath: under(folder, item.path), source: { kind: 'downwardAPI', namespace, fieldPath }, mode: DATA_FILE_MODE });
        }
      } else {
        warnings.push(`volume ${volume.name}: a projected source other than secret, configMap, serviceAccountToken or downwardAPI is not copied`);
      }
    }
    return { volume: hostPath(folder), files, folder };
  }
  if (volume.persistentVolumeClaim || volume.ephemeral) {
    warnings.push(`volume ${volume.name}: a static pod cannot mount a PersistentVolumeClaim; the checkpoint will not start`);
  }
  return { volume, files: [], folder: null };
}

function isHeartbeat(c: V1Container): boolean {
  return c.name === HEARTBEAT_CONTAINER || c.args?.[0] === 'heartbeat' || c.command?.[1] === 'heartbeat';
}

/**
 * With the host's network, a container's `ports` only declare host ports, and the kubelet and the
 * scheduler refuse any other pod declaring the same ones: a copy declaring them keeps its parent's
 * pod from being admitted while the copy runs, so the copy declares none (found on a real kubelet:
 * `Predicate NodePorts failed`). Probes that named a port get its number.
 */
function withoutHostPorts(c: V1Container): V1Container {
  if (!c.ports?.length) return c;
  const byName = new Map(c.ports.filter((p) => p.name).map((p) => [p.name as string, p.containerPort]));
  const probe = <T extends V1Container['readinessProbe']>(pr: T): T => {
    if (!pr) return pr;
    const out = { ...pr };
    const num = (port: unknown) => (typeof port === 'string' && byName.has(port) ? byName.get(port) : port);
    if (out.httpGet) out.httpGet = { ...out.httpGet, port: num(out.httpGet.port) as number };
    if (out.tcpSocket) out.tcpSocket = { ...out.tcpSocket, port: num(out.tcpSocket.port) as number };
    return out;
  };
  const { ports: _dropped, ...rest } = c;
  return { ...rest, livenessProbe: probe(c.livenessProbe), readinessProbe: probe(c.readinessProbe), startupProbe: probe(c.startupProbe) };
}

function sanitizeContainer(c: V1Container, warnings: string[], parentKey: string, hostNetwork: boolean): V1Container {
  if (hostNetwork) c = withoutHostPorts(c);
  for (const env of c.env ?? []) {
    if (env.valueFrom?.secretKeyRef || env.valueFrom?.configMapKeyRef) {
      warnings.push(`container ${c.name}: env ${env.name} reads a Secret or ConfigMap, which a static pod cannot resolve`);
    }
  }
  for (const from of c.envFrom ?? []) {
    if (from.secretRef || from.configMapRef) warnings.push(`container ${c.name}: envFrom a Secret or ConfigMap, which a static pod cannot resolve`);
  }
  if (!isHeartbeat(c)) return c;
  // The copy's heartbeat reports as the checkpoint, under the parent's key: a static pod's own
  // name and owners would derive a different key.
  const env = (c.env ?? []).filter((e) => e.name !== ROLE_ENV && e.name !== PARENT_KEY_ENV);
  return { ...c, env: [...env, { name: ROLE_ENV, value: 'checkpoint' }, { name: PARENT_KEY_ENV, value: parentKey }] };
}

export function sanitize(pod: V1Pod, opts: SanitizeOptions): Sanitized {
  // A plain-JSON deep copy: never mutate the caller's pod, and turn Dates into strings.
  const source = JSON.parse(JSON.stringify(pod)) as V1Pod;
  const meta = source.metadata ?? {};
  const name = meta.name;
  const namespace = meta.namespace;
  if (!name || !namespace || !meta.uid || !source.spec) {
    throw new SanitizeError('the pod must have a name, a namespace, a uid and a spec');
  }
  const warnings: string[] = [];
  const spec: V1PodSpec = { ...source.spec };
  const files: DataFile[] = [];
  const folders: string[] = [];
  spec.volumes = spec.volumes?.map((volume) => {
    const result = rewriteVolume(volume, namespace, source.spec!, opts, warnings);
    files.push(...result.files);
    if (result.folder) folders.push(`${result.folder}/`);
    return result.volume;
  });
  const hostNetwork = spec.hostNetwork === true;
  spec.containers = spec.containers.map((c) => sanitizeContainer(c, warnings, opts.parentKey, hostNetwork));
  spec.initContainers = spec.initContainers?.map((c) => sanitizeContainer(c, warnings, opts.parentKey, hostNetwork));
  if (spec.imagePullSecrets?.length) warnings.push('imagePullSecrets dropped: the images must already be on the node');
  if (spec.resourceClaims?.length) warnings.push('resourceClaims need the api-server; the checkpoint may not start');
  for (const field of [
    'nodeName',
    'nodeSelector',
    'serviceAccountName',
    'serviceAccount',
    'automountServiceAccountToken',
    'imagePullSecrets',
    'ephemeralContainers',
    'priority',
    'preemptionPolicy',
    'overhead',
    'schedulingGates',
  ] as const) {
    delete spec[field];
  }
  if (spec.affinity) {
    const { nodeAffinity: _dropped, ...rest } = spec.affinity;
    spec.affinity = Object.keys(rest).length > 0 ? rest : undefined;
  }

  const annotations: Record<string, string> = {};
  for (const [key, value] of Object.entries(meta.annotations ?? {})) {
    if (!DROPPED_ANNOTATION.test(key)) annotations[key] = value;
  }
  annotations[ANNOTATION_CHECKPOINT_OF] = name;
  const manifest: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      labels: { ...meta.labels, [LABEL_ROLE]: 'checkpoint', [LABEL_PARENT]: opts.parentKey },
      annotations,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name, uid: meta.uid }],
    },
    spec,
  };
  // Round-trip once more so the manifest holds no undefined and equals what a reader parses back.
  const clean = JSON.parse(canonicalJson(manifest)) as V1Pod;
  return { manifest: clean, files, folders, specHash: hashManifest(clean), warnings };
}
