// Names that the agent, the heartbeat, the simulator and kubectl users must agree on.
import { createHash } from 'node:crypto';

export const ANNOTATION_CHECKPOINT = 'lastseen.dev/checkpoint';
export const ANNOTATION_CHECKPOINT_OF = 'lastseen.dev/checkpoint-of';
export const ANNOTATION_LAST_SEEN = 'lastseen.dev/last-seen';
export const ANNOTATION_PHASE = 'lastseen.dev/phase';
export const ANNOTATION_SEQUENCE = 'lastseen.dev/sequence';
export const ANNOTATION_ROLE = 'lastseen.dev/role';
export const ANNOTATION_HOLDER_UID = 'lastseen.dev/holder-uid';
/** The writer's beat interval in milliseconds (a decimal string), on its Lease and on the pod. */
export const ANNOTATION_INTERVAL_MS = 'lastseen.dev/interval-ms';
/**
 * "true" when the writer probes nothing (`--probe none`): its Ready proves only that the sidecar
 * runs. Written on every beat (Lease and pod); absent (an older writer) reads as probed.
 */
export const ANNOTATION_UNPROBED = 'lastseen.dev/unprobed';
/** "true" on a Starting beat whose probe got no answer at all (a hung process: src/core/fence.ts). */
export const ANNOTATION_UNANSWERED = 'lastseen.dev/unanswered';
/** With "unanswered": "true" when the process's last answered probe was Ready (Beat.afterReady); absent: an older writer. */
export const ANNOTATION_AFTER_READY = 'lastseen.dev/unanswered-after-ready';
/** With "unanswered": "true" when the sidecar saw the process waiting for a CPU through the probe (Beat.starved). */
export const ANNOTATION_STARVED = 'lastseen.dev/unanswered-starved';
/** On a heartbeat's Lease: why its policy file is not in use (invalid, unreadable); removed once it is. */
export const ANNOTATION_POLICY_PROBLEM = 'lastseen.dev/policy-problem';
export const LABEL_NODE = 'lastseen.dev/node';
export const LABEL_PARENT = 'lastseen.dev/parent';
export const LABEL_ROLE = 'lastseen.dev/role';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'lastseen';

/** DNS subdomain names (Lease names) may be at most 253 characters. */
const MAX_NAME = 253;
/** Label values and DNS labels may be at most 63 characters. */
export const MAX_LABEL = 63;

export interface PodLike {
  name: string;
  labels?: Record<string, string>;
  ownerReferences?: Array<{ kind: string; name: string; controller?: boolean }>;
}

/** Parent key: label `lastseen.dev/parent`, else the owning DaemonSet's name, else the pod name. */
export function parentKey(pod: PodLike): string {
  const label = pod.labels?.[LABEL_PARENT];
  if (label) return label;
  const ds = pod.ownerReferences?.find((o) => o.kind === 'DaemonSet' && o.controller !== false);
  if (ds) return ds.name;
  return pod.name;
}

function shorten(name: string, max: number): string {
  if (name.length <= max) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 10);
  return `${name.slice(0, max - 11).replace(/[.-]+$/, '')}-${hash}`;
}

/**
 * Lease of a parent key on a node: `<key>.<node>`, shortened with a hash past the name limit.
 * A checkpoint copy writes its own Lease (`<key>.<node>.checkpoint`) so its beats never overwrite
 * the parent's, and a live read of the parent's Lease shows only the parent's word.
 */
export function leaseName(key: string, node: string, role: 'parent' | 'checkpoint' = 'parent'): string {
  return shorten(role === 'parent' ? `${key}.${node}` : `${key}.${node}.checkpoint`, MAX_NAME);
}

/** File name (no folder) of a parent's local heartbeat, or of its checkpoint's. */
export function localBeatFile(namespace: string, key: string, role: 'parent' | 'checkpoint' = 'parent'): string {
  return role === 'parent' ? `${namespace}_${key}.json` : `${namespace}_${key}.checkpoint.json`;
}

/**
 * The fence request the agent writes beside a parent's local beat, and the answer its sidecar
 * writes back (src/agent/fence.ts, src/heartbeat/fence.ts). Dot-prefixed, so the agent's scan of
 * the folder for beat files (`<ns>_<key>.json`) never takes them for beats.
 */
export function fenceRequestFile(namespace: string, key: string): string {
  return `.${namespace}_${key}.fence-request.json`;
}
export function fenceAnswerFile(namespace: string, key: string): string {
  return `.${namespace}_${key}.fence-answer.json`;
}

/** Static-pod manifest file of an active checkpoint. */
export function manifestFile(namespace: string, key: string): string {
  return `lastseen-${namespace}-${key}.json`;
}

export function parentId(namespace: string, key: string): string {
  return `${namespace}/${key}`;
}
