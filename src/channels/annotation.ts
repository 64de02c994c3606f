// The annotation heartbeat channel: a JSON merge patch of the beat's annotations on the parent pod
// itself. No extra objects, but every pod watcher in the cluster sees every beat (DESIGN).
//
// A merge patch carries no resourceVersion, so the api-server applies it with its own retry and it
// cannot 409; what remains is the pod being gone (404: nothing to create, the round fails) and the
// api-server not answering (backoff within the round, fresh connection pool after repeats).
import type { Beat } from '../core/types.js';
import {
  ANNOTATION_HOLDER_UID,
  ANNOTATION_INTERVAL_MS,
  ANNOTATION_UNPROBED,
  ANNOTATION_LAST_SEEN,
  ANNOTATION_PHASE,
  ANNOTATION_ROLE,
  ANNOTATION_SEQUENCE,
} from '../core/names.js';
import type { BeatWriter, Clock } from './channel.js';
import {
  type BeatResult,
  beatAnnotations,
  beatOf,
  isRecord,
  parseHolder,
  parseIntervalMs,
  parsePhase,
  parseRenewTime,
  parseRole,
  parseSequence,
  parseUid,
  show,
  stringMap,
} from './fields.js';
import type { BeatClient } from '../kube/beat-client.js';
import { classifyKubeError, type KubeError } from '../kube/errors.js';
import { FRESH_CLIENT_AFTER_FAILURES } from './lease.js';
import { backoffMs } from './retry.js';

/** Tries per round. Patches cannot conflict, so only transport failures are retried. */
export const MAX_PATCH_ATTEMPTS = 3;

/** The merge patch that records `beat` on its pod. */
export function annotationPatch(beat: Beat): { metadata: { annotations: Record<string, string> } } {
  return { metadata: { annotations: { [ANNOTATION_LAST_SEEN]: beat.renewTime, ...beatAnnotations(beat) } } };
}

/**
 * Read a beat from a pod's annotations (typed V1Pod or raw JSON). Refuses, with a reason, a pod
 * without heartbeat annotations, scheduled to another node, whose annotations name another pod's
 * uid (copied from an older pod), or carrying impossible values. Never throws.
 */
export function beatFromPod(pod: unknown, expectedNode: string): BeatResult {
  if (!isRecord(pod) || !isRecord(pod.metadata)) return { ok: false, reason: 'not a Pod object (no metadata)' };
  const md = pod.metadata;
  const holder = parseHolder(md.name, 'pod name');
  if (!holder.ok) return { ok: false, reason: holder.reason };
  const where = `pod ${typeof md.namespace === 'string' ? `${md.namespace}/` : ''}${holder.value}`;
  const refuse = (reason: string): BeatResult => ({ ok: false, reason: `${where}: ${reason}` });
  const nodeName = isRecord(pod.spec) ? pod.spec.nodeName : undefined;
  if (nodeName !== expectedNode) return refuse(`spec.nodeName is ${show(nodeName)}, not this node ${JSON.stringify(expectedNode)}`);
  const ann = stringMap(md.annotations);
  if (ann[ANNOTATION_LAST_SEEN] === undefined) return refuse(`no ${ANNOTATION_LAST_SEEN} annotation (no beat written yet)`);
  const renew = parseRenewTime(ann[ANNOTATION_LAST_SEEN], `annotation ${ANNOTATION_LAST_SEEN}`);
  if (!renew.ok) return refuse(renew.reason);
  const phase = parsePhase(ann[ANNOTATION_PHASE], `annotation ${ANNOTATION_PHASE}`);
  if (!phase.ok) return refuse(phase.reason);
  const sequence = parseSequence(ann[ANNOTATION_SEQUENCE], `annotation ${ANNOTATION_SEQUENCE}`);
  if (!sequence.ok) return refuse(sequence.reason);
  const role = parseRole(ann[ANNOTATION_ROLE], `annotation ${ANNOTATION_ROLE}`);
  if (!role.ok) return refuse(role.reason);
  const uid = parseUid(ann[ANNOTATION_HOLDER_UID], `annotation ${ANNOTATION_HOLDER_UID}`);
  if (!uid.ok) return refuse(uid.reason);
  if (uid.value && typeof md.uid === 'string' && md.uid !== '' && uid.value !== md.uid) {
    return refuse(`annotation ${ANNOTATION_HOLDER_UID} ${uid.value} names another pod (this one is ${md.uid}): copied annotations, not a beat`);
  }
  const interval = parseIntervalMs(ann[ANNOTATION_INTERVAL_MS], `annotation ${ANNOTATION_INTERVAL_MS}`);
  if (!interval.ok) return refuse(interval.reason);
  return beatOf('annotation', {
    holder: holder.value,
    holderUid: uid.value,
    role: role.value,
    phase: phase.value,
    sequence: sequence.value,
    renewTime: renew.value,
    intervalMs: interval.value,
    unprobed: ann[ANNOTATION_UNPROBED] === 'true',
  });
}

export interface AnnotationChannelOptions {
  namespace: string;
  /** The pod to annotate (the writer's own pod). */
  podName: string;
  makeClient: () => BeatClient;
  clock: Clock;
  random?: () => number;
  onFailure?: (err: KubeError, attempt: number) => void;
}

export class AnnotationChannel implements BeatWriter {
  readonly channel = 'annotation' as const;
  private client: BeatClient;
  private consecutiveFailures = 0;
  private readonly object: string;

  constructor(private readonly opts: AnnotationChannelOptions) {
    this.client = opts.makeClient();
    this.object = `pod ${opts.namespace}/${opts.podName}`;
  }

  async write(beat: Beat, deadline: number): Promise<void> {
    let last: KubeError | null = null;
    for (let attempt = 1; attempt <= MAX_PATCH_ATTEMPTS; attempt++) {
      try {
        await this.client.mergePatchPod({ name: this.opts.podName, namespace: this.opts.namespace, body: annotationPatch(beat) });
        this.consecutiveFailures = 0;
        return;
      } catch (e) {
        last = classifyKubeError(e, this.object);
        this.opts.onFailure?.(last, attempt);
        if (last.kind !== 'unreachable') {
          break;
        }
        if (++this.consecutiveFailures >= FRESH_CLIENT_AFTER_FAILURES) {
          this.client.close();
          this.client = this.opts.makeClient();
          this.consecutiveFailures = 0;
        }
        const backoff = backoffMs(attempt, this.opts.random);
        if (this.opts.clock.now() + backoff >= deadline) break;
        await this.opts.clock.sleep(backoff);
      }
    }
    throw new Error(last?.message ?? `${this.object}: gave up`);
  }

  close(): void {
    this.client.close();
  }
}
