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
//   checkpoint folder: `secrets/<volume>`, `configmaps/<volume>`, `projected/<volume>`. Each file
//   and folder is planned with the owner, group and mode the kubelet would give it in the parent's
//   own volume (`volumeAccessRules`, `fileAccess`, `folderAccess`), since a hostPath volume honours neither `defaultMode` nor `fsGroup`.
// - the volume the ServiceAccount admission plugin adds (`kube-api-access-<5 random>`, a new name
//   for every pod) is named `kube-api-access` in the copy, mounts included: re-captures of
//   re-created pods give the same manifest and folder, and a running copy's folder stays its own.
// - the heartbeat sidecar runs with `LASTSEEN_ROLE=checkpoint`.
// - with the host's network, containers declare no `ports` (they would be host ports that keep the
//   parent's own pod out while the copy runs); probes that named one use its number.
// - `specHash` is sha256 over canonical JSON (sorted keys) of the sanitized manifest less the pod's
//   identity (its name, the owner reference to its uid, the checkpoint-of annotation), so key order
//   never matters, any change of the spec the kubelet would run changes it, and two pods of one
//   template (a DaemonSet's pod deleted and created again) have the same one: "the checkpoint's own
//   spec" and "a spec known to be bad" are about the spec, not one pod (found on the real node).
// Things a static pod cannot resolve and that cannot be copied safely (env from secrets, PVCs,
// resource claims) are kept and reported in `warnings`.
//
// Assumes: the pod passed the api-server's validation (volume names are DNS labels, item paths are
// relative); a path that would escape its folder is treated as a broken assumption and throws.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type { V1Container, V1KeyToPath, V1Pod, V1PodSpec, V1Volume } from '@kubernetes/client-node';
import { ANNOTATION_CHECKPOINT_OF, LABEL_PARENT, LABEL_ROLE } from '../core/names.js';
import type { Access } from './tree.js';

export const HEARTBEAT_CONTAINER = 'lastseen-heartbeat';
export const ROLE_ENV = 'LASTSEEN_ROLE';
export const PARENT_KEY_ENV = 'LASTSEEN_PARENT_KEY';
/** The kubelet's mode for secret, configMap, projected and downward API files without one (the API default). */
export const DEFAULT_VOLUME_FILE_MODE = 0o644;
/**
 * Mode of a copied volume's folders: readable and traversable by the pod's users, as the kubelet's
 * own volume folders are, but not writable (the kubelet's tmpfs root is 0777; a copy has no reason
 * to be). The host cannot reach them: the folders above stay root's 0700 (see tree.ts).
 */
export const VOLUME_DIR_MODE = 0o755;
/** With an fsGroup the kubelet makes every file group-readable (its read-only mask) and folders set-gid. */
const FS_GROUP_FILE_BITS = 0o440;
const FS_GROUP_DIR_BITS = 0o2550;
/** The name the ServiceAccount admission plugin gives the token volume it adds: a fresh suffix per pod. */
const PER_POD_API_ACCESS = /^kube-api-access-[a-z0-9]{5}$/;
export const STABLE_API_ACCESS_VOLUME = 'kube-api-access';

/** Annotations that are ours or the server's: never copied (some change on every beat). */
const DROPPED_ANNOTATION = /^(lastseen\.dev\/|kubernetes\.io\/config\.|kubectl\.kubernetes\.io\/last-applied-configuration$)/;

/** Downward API fields the capture can answer from the parent pod it was given. */
export const DOWNWARD_FIELDS =
  /^(metadata\.(name|namespace|uid|labels|annotations)|metadata\.(labels|annotations)\['[^']+'\]|spec\.(nodeName|serviceAccountName)|status\.(hostIP|podIP))$/;

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
  /** Owner, group and mode on disk: what the kubelet gives this file in the parent's own volume. */
  access: Access;
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
  /** Access of each volume folder (relative, no trailing slash) and of any folder an item path makes in it. */
  folderAccess: Record<string, Access>;
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

/**
 * The specHash agents before 2026-12-04 wrote: over the whole manifest, the pod's identity included.
 * A copy stored by one of them still verifies (the store accepts either), so an upgrade followed by
 * an outage does not lose it; its next capture from a Ready parent writes the new hash.
 */
export function legacyManifestHash(manifest: V1Pod): string {
  return createHash('sha256').update(canonicalJson(manifest)).digest('hex');
}

/** Kubernetes' default terminationGracePeriodSeconds, for a pod that does not set it. */
const DEFAULT_GRACE_SECONDS = 30;

/**
 * A copy is stopped only to give its parent the node back (or to be rewritten), and the parent
 * cannot bind while the stopping copy still holds the ports: a kube-apiserver keeps them until it
 * exits. So a copy gets at most this long after SIGTERM before the kubelet kills it, whatever its
 * parent allows itself: a parent that started beside the stopping copy and failed its bind is
 * restarted only after a back-off (and not at all by a kubelet that cannot reach an api-server,
 * the v1.5 model), and a release hand-over loses that time. In-flight requests on the copy are
 * cut after it; clients reconnect to the parent.
 */
export const COPY_GRACE_SECONDS = 5;

/** The copy's terminationGracePeriodSeconds for a parent that allows itself `parent` (unset: 30). */
export function copyGraceSeconds(parent: number | undefined): number {
  return Math.min(parent ?? DEFAULT_GRACE_SECONDS, COPY_GRACE_SECONDS);
}

/** The specHash of a sanitized manifest: everything but the pod's identity (see the header). */
export function hashManifest(manifest: V1Pod): string {
  const { name: _name, ownerReferences: _owner, annotations, ...meta } = manifest.metadata ?? {};
  const { [ANNOTATION_CHECKPOINT_OF]: _of, ...rest } = annotations ?? {};
  return createHash('sha256')
    .update(canonicalJson({ ...manifest, metadata: { ...meta, annotations: rest } }))
    .digest('hex');
}

/** Join folder and item path, refusing anything that would leave the folder. */
function under(folder: string, itemPath: string): string {
  const joined = posix.normalize(posix.join(folder, itemPath));
  if (posix.isAbsolute(itemPath) || !joined.startsWith(`${folder}/`)) {
    throw new SanitizeError(`item path ${JSON.stringify(itemPath)} escapes ${folder}`);
  }
  return joined;
}

/**
 * How the kubelet sets up the files of a secret, configMap, projected or downward API volume, as a
 * pure function of the pod (kubelet volume plugins and `SetVolumeOwnership`, v1.36):
 * - a file's mode is its item's `mode`, else the volume's `defaultMode`, else 0644, owned by root;
 * - a projected service-account token gets the volume's `defaultMode`, but 0600 when the pod has an
 *   fsGroup or an fsUser, and is owned by the fsUser: the `runAsUser` every container (init
 *   containers included) runs as, when they all set the same one (`FsUserFrom`);
 * - with `fsGroup`, every file and folder gets that group, files gain 0440 (group-readable), folders
 *   set-gid and group-traversable.
 */
export interface VolumeAccessRules {
  fsGroup?: number;
  fsUser?: number;
}

export function volumeAccessRules(spec: V1PodSpec): VolumeAccessRules {
  const fsGroup = spec.securityContext?.fsGroup;
  const podUser = spec.securityContext?.runAsUser;
  const users = [...(spec.initContainers ?? []), ...spec.containers].map((c) => c.securityContext?.runAsUser ?? podUser);
  const first = users[0];
  const fsUser = first !== undefined && users.every((u) => u === first) ? first : undefined;
  return { ...(fsGroup !== undefined ? { fsGroup } : {}), ...(fsUser !== undefined ? { fsUser } : {}) };
}

export function fileAccess(rules: VolumeAccessRules, mode: number, owner?: number): Access {
  return {
    mode: rules.fsGroup !== undefined ? mode | FS_GROUP_FILE_BITS : mode,
    ...(owner !== undefined ? { uid: owner } : {}),
    ...(rules.fsGroup !== undefined ? { gid: rules.fsGroup } : {}),
  };
}

export function folderAccess(rules: VolumeAccessRules): Access {
  return rules.fsGroup !== undefined ? { mode: VOLUME_DIR_MODE | FS_GROUP_DIR_BITS, gid: rules.fsGroup } : { mode: VOLUME_DIR_MODE };
}

function keyFiles(
  folder: string,
  items: V1KeyToPath[] | undefined,
  defaultMode: number,
  rules: VolumeAccessRules,
  source: (key?: string) => DataSource,
): DataFile[] {
  if (!items || items.length === 0) return [{ relPath: folder, source: source(), access: fileAccess(rules, defaultMode) }];
  return items.map((item) => ({ relPath: under(folder, item.path), source: source(item.key), access: fileAccess(rules, item.mode ?? defaultMode) }));
}

interface VolumeResult {
  volume: V1Volume;
  files: DataFile[];
  folder: string | null;
}

function rewriteVolume(volume: V1Volume, namespace: string, spec: V1PodSpec, opts: SanitizeOptions, warnings: string[]): VolumeResult {
  const rules = volumeAccessRules(spec);
  const hostPath = (folder: string): V1Volume => ({
    name: volume.name,
    hostPath: { path: `${opts.checkpointDir}/${folder}`, type: 'Directory' },
  });
  if (volume.secret) {
    const s = volume.secret;
    const folder = `secrets/${volume.name}`;
    const name = s.secretName ?? '';
    const files = keyFiles(folder, s.items, s.defaultMode ?? DEFAULT_VOLUME_FILE_MODE, rules, (key) => ({
      kind: 'secret',
      namespace,
      name,
      key,
      optional: s.optional === true,
    }));
    return { volume: hostPath(folder), files, folder };
  }
  if (volume.configMap) {
    const c = volume.configMap;
    const folder = `configmaps/${volume.name}`;
    const files = keyFiles(folder, c.items, c.defaultMode ?? DEFAULT_VOLUME_FILE_MODE, rules, (key) => ({
      kind: 'configMap',
      namespace,
      name: c.name ?? '',
      key,
      optional: c.optional === true,
    }));
    return { volume: hostPath(folder), files, folder };
  }
  if (volume.projected) {
    const folder = `projected/${volume.name}`;
    const files: DataFile[] = [];
    const defaultMode = volume.projected.defaultMode ?? DEFAULT_VOLUME_FILE_MODE;
    for (const source of volume.projected.sources ?? []) {
      if (source.secret) {
        const s = source.secret;
        files.push(
          ...keyFiles(folder, s.items, defaultMode, rules, (key) => ({ kind: 'secret', namespace, name: s.name ?? '', key, optional: s.optional === true })),
        );
      } else if (source.configMap) {
        const c = source.configMap;
        files.push(
          ...keyFiles(folder, c.items, defaultMode, rules, (key) => ({ kind: 'configMap', namespace, name: c.name ?? '', key, optional: c.optional === true })),
        );
      } else if (source.serviceAccountToken) {
        const t = source.serviceAccountToken;
        const name = spec.serviceAccountName ?? spec.serviceAccount ?? 'default';
        files.push({
          relPath: under(folder, t.path),
          source: { kind: 'serviceAccountToken', namespace, name, audience: t.audience, expirationSeconds: t.expirationSeconds },
          access: fileAccess(rules, rules.fsGroup !== undefined || rules.fsUser !== undefined ? 0o600 : defaultMode, rules.fsUser),
        });
      } else if (source.downwardAPI) {
        for (const item of source.downwardAPI.items ?? []) {
          const fieldPath = item.fieldRef?.fieldPath;
          if (!fieldPath || !DOWNWARD_FIELDS.test(fieldPath)) {
            warnings.push(`volume ${volume.name}: downward API item ${item.path} (${fieldPath ?? 'resourceFieldRef'}) is not copied`);
            continue;
          }
          files.push({
            relPath: under(folder, item.path),
            source: { kind: 'downwardAPI', namespace, fieldPath },
            access: fileAccess(rules, item.mode ?? defaultMode),
          });
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

/**
 * Rename the per-pod `kube-api-access-xxxxx` volume to `kube-api-access` (mounts included), unless
 * the pod already has a volume of that name or several per-pod ones.
 */
function stableVolumeNames(spec: V1PodSpec): V1PodSpec {
  const perPod = (spec.volumes ?? []).filter((v) => v.projected && PER_POD_API_ACCESS.test(v.name));
  if (perPod.length !== 1 || spec.volumes?.some((v) => v.name === STABLE_API_ACCESS_VOLUME)) return spec;
  const from = perPod[0]!.name;
  const rename = (c: V1Container): V1Container =>
    c.volumeMounts?.some((m) => m.name === from)
      ? { ...c, volumeMounts: c.volumeMounts.map((m) => (m.name === from ? { ...m, name: STABLE_API_ACCESS_VOLUME } : m)) }
      : c;
  return {
    ...spec,
    volumes: spec.volumes!.map((v) => (v.name === from ? { ...v, name: STABLE_API_ACCESS_VOLUME } : v)),
    containers: spec.containers.map(rename),
    ...(spec.initContainers ? { initContainers: spec.initContainers.map(rename) } : {}),
  };
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

/**
 * A preStop hook is dropped: a parent's (the api-server recipe's 20 s pause) keeps a deleted pod
 * serving while its copy starts beside it (src/core/deletion.ts), but a copy is stopped only to give
 * the node back, and a pause would hold its ports (a release hand-over's parent waits for them) and
 * use up its short grace (COPY_GRACE_SECONDS).
 */
function withoutPreStop(c: V1Container): V1Container {
  if (!c.lifecycle?.preStop) return c;
  const { preStop: _dropped, ...lifecycle } = c.lifecycle;
  const { lifecycle: _old, ...rest } = c;
  return Object.keys(lifecycle).length ? { ...rest, lifecycle } : rest;
}

function sanitizeContainer(c: V1Container, warnings: string[], parentKey: string, hostNetwork: boolean): V1Container {
  if (hostNetwork) c = withoutHostPorts(c);
  c = withoutPreStop(c);
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
  const spec: V1PodSpec = stableVolumeNames({ ...source.spec });
  const files: DataFile[] = [];
  const folders: string[] = [];
  const folderAccessByPath: Record<string, Access> = {};
  const rules = volumeAccessRules(spec);
  spec.volumes = spec.volumes?.map((volume) => {
    const result = rewriteVolume(volume, namespace, spec, opts, warnings);
    files.push(...result.files);
    if (result.folder) {
      folders.push(`${result.folder}/`);
      folderAccessByPath[result.folder] = folderAccess(rules);
      // Folders an item path makes inside the volume (`path: a/b`) are the volume's too.
      for (const f of result.files) {
        const inner = f.relPath
          .slice(result.folder.length + 1)
          .split('/')
          .slice(0, -1);
        for (let i = 1; i <= inner.length; i++) folderAccessByPath[`${result.folder}/${inner.slice(0, i).join('/')}`] = folderAccess(rules);
      }
    }
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
  spec.terminationGracePeriodSeconds = copyGraceSeconds(spec.terminationGracePeriodSeconds);

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
  return { manifest: clean, files, folders, folderAccess: folderAccessByPath, specHash: hashManifest(clean), warnings };
}
