// The few api requests a heartbeat writer sends, as a narrow interface: the Lease and annotation
// channels (src/channels/) and the sidecar's own-pod lookup need nothing else. Two clients satisfy
// it: the agent's client-node client (src/kube/client.ts, `makeKubeClient`) and the light client
// over node:https (src/kube/light-client.ts), which the heartbeat sidecar uses so that it never
// loads @kubernetes/client-node (docs/footprint.md says why).
//
// Errors are what `classifyKubeError` (src/kube/errors.ts) reads: an HTTP status in `code` with the
// Status JSON in `body`, a system error code (ECONNREFUSED…), or an AbortError from the timeout.
import type { V1Lease, V1Pod } from '@kubernetes/client-node';

export interface ObjectRef {
  namespace: string;
  name: string;
}

/** One operation of a JSON patch (RFC 6902), the two kinds the annotation channel sends. */
export type JsonPatchOp = { op: 'test' | 'add'; path: string; value: string };

export interface BeatClient {
  readLease(ref: ObjectRef): Promise<V1Lease>;
  createLease(ref: { namespace: string; body: V1Lease }): Promise<V1Lease>;
  /** PUT: an optimistic update, refused with 409 when `body`'s resourceVersion is not the stored one. */
  replaceLease(ref: ObjectRef & { body: V1Lease }): Promise<V1Lease>;
  /** A JSON merge patch (RFC 7386): no resourceVersion, cannot 409. */
  mergePatchLease(ref: ObjectRef & { body: object }): Promise<V1Lease>;
  readPod(ref: ObjectRef): Promise<V1Pod>;
  /** A JSON merge patch of the pod (the annotation channel's first write). */
  mergePatchPod(ref: ObjectRef & { body: object }): Promise<unknown>;
  /**
   * A JSON patch (RFC 6902) of the pod: refused with 422 when one of its `test` operations fails
   * (the annotation channel's conditional write).
   */
  jsonPatchPod(ref: ObjectRef & { body: JsonPatchOp[] }): Promise<unknown>;
  /** Close pooled connections. Requests in flight fail; later ones open new sockets. */
  close(): void;
}
