// Which pods on this node are parents, and how observed objects become the core's inputs.
// Pure functions: the wiring (run.ts) calls them from informer callbacks.
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_CHECKPOINT, ANNOTATION_CHECKPOINT_OF, LABEL_NODE, LABEL_PARENT, parentId, parentKey } from '../core/names.js';
import type { PodInfo, PodRef } from '../core/types.js';

/** The kubelet marks the api-server's copy of a static pod with this annotation. */
const MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

export interface ParentPod {
  namespace: string;
  key: string;
  pod: V1Pod;
  labels: Record<string, string>;
  /** Other live pods of the same key here (a surge rollout): their beats are the parent's too. */
  alsoListed?: Array<{ uid: string; name: string }>;
}

/** Why a pod on this node is not a parent (null: it is one). */
export function notParentReason(pod: V1Pod, node: string): string | null {
  const md = pod.metadata ?? {};
  const ann = md.annotations ?? {};
  if (ann[ANNOTATION_CHECKPOINT] !== 'true') return `no ${ANNOTATION_CHECKPOINT}: "true" annotation`;
  if (ann[MIRROR_ANNOTATION] !== undefined) return 'a static (mirror) pod';
  if (ann[ANNOTATION_CHECKPOINT_OF] !== undefined) return 'a checkpoint copy';
  if (pod.spec?.nodeName !== node) return `scheduled to ${pod.spec?.nodeName ?? 'no node'}, not ${node}`;
  if (md.deletionTimestamp) return 'being deleted';
  if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return `finished (${pod.status.phase})`;
  if (!md.namespace || !md.name) return 'no name or namespace';
  return null;
}

/** A pod as the rule below reads it: who it is, and when it was created (ms, or any measure of creation order). */
export interface PodStamp {
  uid: string;
  name: string;
  created: number;
}

/**
 * Which of the live pods of one parent key on one node is the parent's pod: the newest by creation
 * (a rollout's new pod: it is the one that will stay; equal creation times: the first given). The
 * others (a surge rollout's old pod) are listed beside it, in the order given: their beats are the
 * parent's too (src/core/beats.ts). Null: no pod. The one rule for production's pod list
 * (parentsOnNode) and the simulator's (src/sim/lastseen.ts).
 */
export function parentPodOf<T extends PodStamp>(pods: readonly T[]): { pod: T; alsoListed: Array<{ uid: string; name: string }> } | null {
  let newest: T | undefined;
  for (const p of pods) if (newest === undefined || p.created > newest.created) newest = p;
  if (newest === undefined) return null;
  return { pod: newest, alsoListed: pods.filter((p) => p !== newest).map((p) => ({ uid: p.uid, name: p.name })) };
}

/**
 * The parents the api-server has scheduled to this node, by parent id: each key's pods resolved by
 * parentPodOf. A creation time that is missing or not a time counts as the oldest.
 */
export function parentsOnNode(pods: V1Pod[], node: string): Map<string, ParentPod> {
  const byId = new Map<string, { namespace: string; key: string; pods: Array<PodStamp & { pod: V1Pod }> }>();
  for (const pod of pods) {
    if (notParentReason(pod, node) !== null) continue;
    const md = pod.metadata!;
    const key = podParentKey(pod);
    const id = parentId(md.namespace!, key);
    const created = new Date(md.creationTimestamp ?? 0).getTime();
    const group = byId.get(id) ?? { namespace: md.namespace!, key, pods: [] };
    group.pods.push({ uid: md.uid ?? '', name: md.name!, created: Number.isNaN(created) ? 0 : created, pod });
    byId.set(id, group);
  }
  const out = new Map<string, ParentPod>();
  for (const [id, g] of byId) {
    const chosen = parentPodOf(g.pods)!;
    const pod = chosen.pod.pod;
    out.set(id, {
      namespace: g.namespace,
      key: g.key,
      pod,
      labels: pod.metadata?.labels ?? {},
      ...(chosen.alsoListed.length ? { alsoListed: chosen.alsoListed } : {}),
    });
  }
  return out;
}

function podParentKey(pod: V1Pod): string {
  const md = pod.metadata!;
  return parentKey({
    name: md.name!,
    labels: md.labels ?? {},
    ownerReferences: (md.ownerReferences ?? []).map((o) => ({ kind: o.kind, name: o.name, controller: o.controller ?? true })),
  });
}

/**
 * Which pod of one parent key being deleted on one node the core is told of (src/core/deletion.ts):
 * none while a live pod of the key is listed there (it is the parent), else the newest, by
 * parentPodOf's rule. The one rule for production's pod list (deletingOnNode) and the simulator's.
 */
export function deletingPodOf<T extends PodStamp>(liveListed: boolean, deleting: readonly T[]): PodRef | null {
  if (liveListed) return null;
  const newest = parentPodOf(deleting)?.pod;
  return newest ? { uid: newest.uid, name: newest.name } : null;
}

/**
 * The parents' pods on this node that are being deleted (a deletionTimestamp; otherwise parents),
 * by parent id, as deletingPodOf picks them against the live pods listed here (`parents`, from
 * parentsOnNode). A creation time that is missing or not a time counts as the oldest.
 */
export function deletingOnNode(pods: V1Pod[], node: string, parents: ReadonlyMap<string, unknown>): Map<string, PodRef> {
  const byId = new Map<string, PodStamp[]>();
  for (const pod of pods) {
    const md = pod.metadata ?? {};
    if (!md.deletionTimestamp || !md.namespace || !md.name || !md.uid) continue;
    if (notParentReason({ ...pod, metadata: { ...md, deletionTimestamp: undefined } }, node) !== null) continue;
    const id = parentId(md.namespace, podParentKey(pod));
    const created = new Date(md.creationTimestamp ?? 0).getTime();
    byId.set(id, [...(byId.get(id) ?? []), { uid: md.uid, name: md.name, created: Number.isNaN(created) ? 0 : created }]);
  }
  const out = new Map<string, PodRef>();
  for (const [id, stamps] of byId) {
    const chosen = deletingPodOf(parents.has(id), stamps);
    if (chosen) out.set(id, chosen);
  }
  return out;
}

/** Namespace and key of a Lease written by a heartbeat, from its labels (null: not ours). */
export function leaseParent(
  lease: { metadata?: { namespace?: string; labels?: Record<string, string> } },
  node: string,
): { namespace: string; key: string } | null {
  const md = lease.metadata ?? {};
  const key = md.labels?.[LABEL_PARENT];
  if (!md.namespace || !key || md.labels?.[LABEL_NODE] !== node) return null;
  return { namespace: md.namespace, key };
}

/** Namespace, key and role of a local heartbeat file name (`<ns>_<key>.json`, `<ns>_<key>.checkpoint.json`). */
export function localFileParent(name: string): { namespace: string; key: string; role: 'parent' | 'checkpoint' } | null {
  const m = /^([a-z0-9-]+)_(.+?)(\.checkpoint)?\.json$/.exec(name);
  if (!m) return null;
  return { namespace: m[1]!, key: m[2]!, role: m[3] ? 'checkpoint' : 'parent' };
}

/** The pod's own Ready condition, as its kubelet last reported it to the api-server. */
export function podReady(pod: { status?: { conditions?: Array<{ type?: string; status?: string }> } }): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** A container's last termination as the API reports it (times as its JSON strings, or Dates as client-node parses them). */
type Terminated = { reason?: string; startedAt?: string | Date; finishedAt?: string | Date };

/** The parts of a pod the reader below uses: a V1Pod has them. */
export interface PodStatusLike {
  metadata?: { uid?: string; name?: string };
  status?: {
    conditions?: Array<{ type?: string; status?: string }>;
    containerStatuses?: Array<{ restartCount?: number; lastState?: { terminated?: Terminated } }>;
  };
}

/**
 * The one reader of an api-server pod: what the core needs of it (PodInfo). `specHash`: the spec
 * hash its checkpoint would have (sanitize, which needs the parent key the observer worked out).
 */
export function v1PodInfo(pod: PodStatusLike, specHash: string): PodInfo {
  const m = pod.metadata ?? {};
  const restarts = podRestarts(pod);
  const exit = podLastExit(pod);
  return {
    uid: m.uid ?? '',
    name: m.name ?? '',
    specHash,
    ...(restarts !== undefined ? { restarts } : {}),
    ...(exit?.unknown ? { lastExitUnknown: true } : {}),
    ...(exit?.ranMs !== undefined ? { lastExitRanMs: exit.ranMs } : {}),
    // The pod's own Ready condition: evidence for a parent whose heartbeat probes nothing. A pod
    // without a status says nothing either way.
    ...(pod.status ? { ready: podReady(pod) } : {}),
  };
}

/**
 * Restarts of a V1Pod's main containers (`status.containerStatuses[].restartCount`, summed; init
 * and sidecar containers are not counted: a native sidecar outlives its main container's exits).
 */
export function podRestarts(pod: PodStatusLike): number | undefined {
  const statuses = pod.status?.containerStatuses;
  if (!Array.isArray(statuses)) return undefined;
  return statuses.reduce((n, c) => n + (typeof c.restartCount === 'number' ? c.restartCount : 0), 0);
}

/** A pod's latest exit as PodInfo carries it (lastExitUnknown, lastExitRanMs). */
export interface LastExit {
  unknown: boolean;
  ranMs?: number;
}

/**
 * The latest exit among the main containers (by `finishedAt`), as the kubelet reports it: whether
 * it calls it `Unknown` (what it reports for a container it found exited after its node restarted:
 * a reboot, a power cycle; not an exit of the process itself), and how long that run lasted
 * (`finishedAt - startedAt`, when both are given). Null: no exit reported.
 */
export function podLastExit(pod: PodStatusLike): LastExit | null {
  const statuses = pod.status?.containerStatuses;
  if (!Array.isArray(statuses)) return null;
  let latest: Terminated | null = null;
  let latestAt = Number.NEGATIVE_INFINITY;
  for (const c of statuses) {
    const t = c.lastState?.terminated;
    if (!t) continue;
    const at = t.finishedAt === undefined ? Number.NEGATIVE_INFINITY : new Date(t.finishedAt).getTime();
    if (latest === null || at > latestAt) {
      latest = t;
      latestAt = at;
    }
  }
  if (latest === null) return null;
  const started = latest.startedAt === undefined ? Number.NaN : new Date(latest.startedAt).getTime();
  const ranMs = latestAt - started;
  return { unknown: latest.reason === 'Unknown', ...(Number.isFinite(ranMs) && ranMs >= 0 ? { ranMs } : {}) };
}
