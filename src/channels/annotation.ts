// The annotation heartbeat channel: the beat's annotations patched onto the parent pod itself. No
// extra objects, but every pod watcher in the cluster sees every beat (DESIGN).
//
// Writes are conditional on this writer's own last sequence, not on the pod's resourceVersion
// (which the kubelet's status updates move all the time): a JSON patch whose first operation
// tests that the sequence annotation still holds the value this writer last saw stored. Why:
// writes that time out are not lost, they may be queued inside a frozen or overloaded api-server
// and applied later, in any order. Unconditional, three queued rounds applied 38, 35, 39 would move
// the stored sequence back (a writer restart, to the agent's beat rule in src/core/beats.ts) and
// then forward again, a change that revives a parent the local file saw die. Conditional, all of
// them test the same last-seen value, so at most one applies and the stored sequence never goes
// back within a run. A failed test (422) means a write of ours landed after all, or someone else
// wrote: re-read the pod once and write on top of what is there. Only a writer's first write (and
// one after the annotation vanished) is an unconditional JSON merge patch, which cannot 409; if it
// lands late, after later rounds, its sequence 1 carries the renew time of a round the local file
// already showed (the heartbeat writes the file first), and the agent takes it for that round, not
// for a writer restart (src/core/beats.ts).
// What remains is the pod being gone (404: nothing to create, the round fails) and the api-server
// not answering (backoff within the round, fresh connection pool after repeats). The Lease channel
// gets the same guarantee from its optimistic `replace` (src/channels/lease.ts).

import { ANNOTATION_HOLDER_UID, ANNOTATION_LAST_SEEN, ANNOTATION_SEQUENCE } from '../core/names.js';
import type { Beat } from '../core/types.js';
import type { BeatClient, JsonPatchOp } from '../kube/beat-client.js';
import { classifyKubeError, type KubeError } from '../kube/errors.js';
import type { BeatWriter, Clock } from './channel.js';
import { type BeatResult, beatAnnotations, beatOf, isRecord, parseBeatAnnotations, parseHolder, parseRenewTime, parseUid, show, stringMap } from './fields.js';
import { FRESH_CLIENT_AFTER_FAILURES } from './lease.js';
import { backoffMs } from './retry.js';

/** Tries per round for transport failures; a failed condition adds one re-read and one more try. */
export const MAX_PATCH_ATTEMPTS = 3;

/** The merge patch that records `beat` on its pod. */
export function annotationPatch(beat: Beat): { metadata: { annotations: Record<string, string> } } {
  return { metadata: { annotations: { [ANNOTATION_LAST_SEEN]: beat.renewTime, ...beatAnnotations(beat) } } };
}

/** RFC 6901: a key as one JSON pointer segment. */
const pointer = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * The JSON patch that records `beat` only if the pod's sequence annotation still reads `stored`
 * (`add` of an existing member replaces it).
 */
export function conditionalAnnotationPatch(beat: Beat, stored: string): JsonPatchOp[] {
  const path = (key: string) => `/metadata/annotations/${pointer(key)}`;
  return [
    { op: 'test', path: path(ANNOTATION_SEQUENCE), value: stored },
    ...Object.entries(annotationPatch(beat).metadata.annotations).map(([k, v]): JsonPatchOp => ({ op: 'add', path: path(k), value: v })),
  ];
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
  /** The sequence annotation as this writer last saw it stored (an answered write, or a re-read); null: not known. */
  private stored: string | null = null;

  constructor(private readonly opts: AnnotationChannelOptions) {
    this.client = opts.makeClient();
    this.object = `pod ${opts.namespace}/${opts.podName}`;
  }

  async write(beat: Beat, deadline: number): Promise<void> {
    let last: KubeError | null = null;
    let reread = false;
    const ref = { name: this.opts.podName, namespace: this.opts.namespace };
    for (let attempt = 1; attempt <= MAX_PATCH_ATTEMPTS; attempt++) {
      // After a timeout `stored` stays as it was: the write may still land, and then the next
      // condition fails and is re-read, rather than two writes of ours both applying.
      const conditional = this.stored !== null;
      try {
        if (this.stored !== null) await this.client.jsonPatchPod({ ...ref, body: conditionalAnnotationPatch(beat, this.stored) });
        else await this.client.mergePatchPod({ ...ref, body: annotationPatch(beat) });
        this.stored = String(beat.sequence);
        this.consecutiveFailures = 0;
        return;
      } catch (e) {
        last = classifyKubeError(e, this.object);
        if (conditional && last.status === 422 && !reread) {
          // The condition failed (the api-server says only "invalid"): read what is stored now and
          // try once more on top of it. A re-read that fails ends the round like any failure.
          reread = true;
          try {
            this.stored = storedSequence(await this.client.readPod(ref));
            attempt--;
            continue;
          } catch (re) {
            last = classifyKubeError(re, this.object);
          }
        }
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

/** The pod's sequence annotation, or null when it has none (the next write is unconditional). */
function storedSequence(pod: unknown): string | null {
  const md = isRecord(pod) && isRecord(pod.metadata) ? pod.metadata : null;
  const v = md ? stringMap(md.annotations)[ANNOTATION_SEQUENCE] : undefined;
  return v ?? null;
}
