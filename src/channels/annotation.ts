// The annotation heartbeat channel: a JSON merge patch of the beat's annotations on the parent pod
// itself. No extra objects, but every pod watcher in the cluster sees every beat (DESIGN).
//
// A merge patch carries no resourceVersion, so the api-server applies it with its own retry and it
// cannot 409; what remains is the pod being gone (404: nothing to create, the round fails) and the
// api-server not answering (backoff within the round, fresh connection pool after repeats).

import { ANNOTATION_HOLDER_UID, ANNOTATION_LAST_SEEN } from '../core/names.js';
import type { Beat } from '../core/types.js';
import type { BeatClient } from '../kube/beat-client.js';
import { classifyKubeError, type KubeError } from '../kube/errors.js';
import type { BeatWriter, Clock } from './channel.js';
import { type BeatResult, beatAnnotations, beatOf, isRecord, parseBeatAnnotations, parseHolder, parseRenewTime, parseUid, show, stringMap } from './fields.js';
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
  const f = parseBeatAnnotations(ann);
  if (!f.ok) return refuse(f.reason);
  // Every pod the api-server serves has a uid: the annotations are this pod's beat only if they
  // name it (or name none, from an older writer). A pod object without one is not the api-server's,
  // and its annotations cannot outrank the parent's own beats on other channels (src/core/beats.ts
  // compares one holder's sequences across channels).
  if (typeof md.uid !== 'string' || md.uid === '') return refuse('metadata.uid is missing: not a pod as the api-server serves it');
  const uid = parseUid(md.uid, 'metadata.uid');
  if (!uid.ok) return refuse(uid.reason);
  if (f.value.holderUid && f.value.holderUid !== md.uid) {
    return refuse(`annotation ${ANNOTATION_HOLDER_UID} ${f.value.holderUid} names another pod (this one is ${md.uid}): copied annotations, not a beat`);
  }
  return beatOf('annotation', { holder: holder.value, renewTime: renew.value, ...f.value, holderUid: md.uid });
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
