// The heartbeat's api requests (BeatClient, src/kube/beat-client.ts) against the model api-server,
// so that the simulated sidecar runs production's Lease and annotation writers (LeaseChannel,
// AnnotationChannel: their optimistic replace, conflict re-reads, merge-patch fallback, conditional
// annotation patch, back-off and retries) instead of a writer of its own.
//
// One request: it reaches the api-server a one-way trip later (in order with the channel's earlier
// requests: one connection), is applied there if it gets through, and its answer comes back a
// one-way trip after that if answers get through. The writer's client gives up at its request
// timeout (as the light client does, AbortSignal.timeout): a request applied after that is applied
// all the same, the writer just never hears of it. With no api-server to reach at all the request
// fails at once (a refused connection). The model's objects: a Lease per name with a
// resourceVersion, and each pod's annotations; every stored change becomes the beat the agent's
// watches see (ApiServer.writeBeat), read back with production's parsers.
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { beatFromPod } from '../channels/annotation.js';
import type { BeatResult } from '../channels/fields.js';
import { beatFromLease } from '../channels/lease.js';
import { leaseName } from '../core/names.js';
import type { Role } from '../core/types.js';
import type { BeatClient, JsonPatchOp, ObjectRef } from '../kube/beat-client.js';
import type { KPod } from './kubelet.js';
import { type SimNode, T } from './model.js';
import { arrivalInOrder } from './network.js';
import type { World } from './world.js';

/** An answer with an HTTP status, shaped as classifyKubeError reads it. */
function status(code: number, reason: string, message: string): Error {
  return Object.assign(new Error(`HTTP ${code}: ${message}`), { code, body: { kind: 'Status', status: 'Failure', reason, message, code } });
}

/** RFC 7386 on plain JSON: null removes a key, objects merge, anything else replaces. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** JSON pointer segment back to the annotation key (RFC 6901). */
const annotationKey = (path: string) =>
  path
    .replace(/^\/metadata\/annotations\//, '')
    .replaceAll('~1', '/')
    .replaceAll('~0', '~');

/**
 * A JSON patch (RFC 6902) of a pod's annotations as the api-server applies the two operations the
 * annotation writer sends: all or nothing, a failed `test` refusing the whole patch with a 422.
 * Returns the new annotations; `current` is not changed.
 */
export function applyAnnotationOps(current: Record<string, string>, ops: JsonPatchOp[]): Record<string, string> {
  for (const op of ops) {
    if (op.op === 'test' && current[annotationKey(op.path)] !== op.value)
      throw status(422, 'Invalid', 'the server rejected our request due to an error in our request');
  }
  const next = { ...current };
  for (const op of ops) if (op.op === 'add') next[annotationKey(op.path)] = op.value;
  return next;
}

export interface SimBeatClientOptions {
  world: World;
  node: SimNode;
  /** The writer's own pod (the annotation channel patches it; the sidecar names it). */
  pod: KPod;
  role: Role;
  /** The light client's request timeout (the sidecar's: half its interval, at most 10 s). */
  requestTimeoutMs: number;
  /** Runs a continuation inside the sidecar's process (dropped once it is dead, held while it is frozen). */
  enter: (fn: () => void) => void;
}

export function simBeatClient(o: SimBeatClientOptions): BeatClient {
  const { world: w, node, pod } = o;
  /** When this client's last request reaches the api-server (true time): one connection, in order. */
  let arrivesAt = 0;

  /** Send one request: `apply` runs at the api-server (it may throw a status), its result is the answer. */
  function send<R>(apply: () => R): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      if (!w.api.writesFrom(node)) {
        // Nothing to connect to (the api-server down, the node cut off): refused at once.
        reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
        return;
      }
      const sentAt = w.q.now;
      let settled = false;
      const settle = (fn: () => void) =>
        o.enter(() => {
          if (settled) return;
          settled = true;
          timeout.cancel();
          fn();
        });
      const timeout = w.q.at(sentAt + o.requestTimeoutMs, () =>
        settle(() => reject(Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' }))),
      );
      arrivesAt = arrivalInOrder(sentAt, T.apiRttMs / 2 + w.net.toApiMs(node), arrivesAt);
      w.q.at(arrivesAt, () => {
        // Applied if it gets through, whether or not its client still waits.
        if (!w.api.writesFrom(node)) return;
        let answer: () => void;
        try {
          const r = apply();
          answer = () => resolve(r);
        } catch (e) {
          answer = () => reject(e);
        }
        if (!w.api.deliversTo(node)) return;
        w.q.after(T.apiRttMs / 2 + w.net.fromApiMs(node), () => {
          if (w.api.deliversTo(node)) settle(answer);
        });
      });
    });
  }

  const leases = w.api.leaseObjects;
  const leaseKey = (ref: ObjectRef) => `${ref.namespace}/${ref.name}`;
  const stored = (ref: ObjectRef) => {
    const l = leases.get(leaseKey(ref));
    if (!l) throw status(404, 'NotFound', `leases.coordination.k8s.io "${ref.name}" not found`);
    return l;
  };
  /** Store a Lease as the api-server would (a new resourceVersion) and show its beat to the watches. */
  const storeLease = (ref: ObjectRef, lease: V1Lease): V1Lease => {
    // Objects are never changed in place, by the writers or here: a new version is a new object.
    const saved: V1Lease = { ...lease, metadata: { ...lease.metadata, namespace: ref.namespace, resourceVersion: String(w.api.nextResourceVersion()) } };
    leases.set(leaseKey(ref), saved);
    show('lease', ref.name, ref.namespace, beatFromLease(saved, node.name));
    return saved;
  };
  const show = (channel: 'lease' | 'annotation', name: string, namespace: string, r: BeatResult) => {
    // A write the model cannot read back as a beat is nothing the agent would count either.
    if (!r.ok) return;
    if (r.beat.role === 'parent' && (w.net.whole || w.api.reachableFrom(node))) w.invariants.parentBeat(node, pod.spec!.key, r.beat.phase, true);
    w.api.writeBeat(channel, name, { node: node.name, namespace, key: pod.spec!.key, beat: r.beat });
  };

  const podObject = (): V1Pod => ({
    metadata: { name: pod.name, namespace: pod.spec!.namespace, uid: pod.uid, annotations: { ...(w.api.podAnnotations.get(pod.uid) ?? {}) } },
    spec: { nodeName: node.name, containers: [] },
  });
  const ownPod = (ref: ObjectRef) => {
    if (ref.name !== pod.name || ref.namespace !== pod.spec!.namespace) throw status(404, 'NotFound', `pods "${ref.name}" not found`);
  };
  const storeAnnotations = (annotations: Record<string, string>) => {
    w.api.podAnnotations.set(pod.uid, annotations);
    const now = podObject();
    // Annotation beats are keyed like Leases in the model (ApiServer.beats), by the writer's role.
    show('annotation', leaseName(pod.spec!.key, node.name, o.role), pod.spec!.namespace, beatFromPod(now, node.name));
    return now;
  };

  return {
    readLease: (ref) => send(() => stored(ref)),
    createLease: ({ namespace, body }) =>
      send(() => {
        const name = body.metadata?.name ?? '';
        if (leases.has(`${namespace}/${name}`)) throw status(409, 'AlreadyExists', `leases.coordination.k8s.io "${name}" already exists`);
        return storeLease({ namespace, name }, body);
      }),
    replaceLease: (ref) =>
      send(() => {
        const l = stored(ref);
        if (ref.body.metadata?.resourceVersion !== l.metadata?.resourceVersion)
          throw status(409, 'Conflict', `Operation cannot be fulfilled on leases.coordination.k8s.io "${ref.name}": the object has been modified`);
        return storeLease(ref, ref.body);
      }),
    mergePatchLease: (ref) => send(() => storeLease(ref, mergePatch(stored(ref), ref.body) as V1Lease)),
    readPod: (ref) =>
      send(() => {
        ownPod(ref);
        return podObject();
      }),
    mergePatchPod: (ref) =>
      send(() => {
        ownPod(ref);
        const patch = (ref.body as { metadata?: { annotations?: Record<string, string | null> } }).metadata?.annotations ?? {};
        return storeAnnotations(mergePatch(w.api.podAnnotations.get(pod.uid) ?? {}, patch) as Record<string, string>);
      }),
    jsonPatchPod: (ref) =>
      send(() => {
        ownPod(ref);
        return storeAnnotations(applyAnnotationOps(w.api.podAnnotations.get(pod.uid) ?? {}, ref.body));
      }),
    close: () => {},
  };
}
