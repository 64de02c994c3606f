// The Lease heartbeat channel: one coordination.k8s.io/v1 Lease per parent key, node and role.
//
// Renewal follows the kubelet's lease controller (k8s.io/component-helpers/apimachinery/lease):
// - the Lease last returned by the api-server is cached, and each beat is an optimistic `replace`
//   of that copy (one request per beat at steady state, no GET);
// - a 409 means someone else wrote it: re-read and retry at once. That is not a failure;
// - other failures back off (capped, jittered: retry.ts) within the round, and after
//   FRESH_CLIENT_AFTER_FAILURES consecutive failures the connection pool is replaced;
// - at most MAX_UPDATE_RETRIES attempts per round, and none past the round's deadline.
// One departure: the Lease is ours alone, so after a re-read we would overwrite whatever the other
// writer put there anyway. When conflicts keep coming (a second writer in a tight loop, e.g. two
// copies of the sidecar during a rollout), the last attempts of a round are a JSON merge patch
// without a resourceVersion, which the api-server applies with its own retry and cannot 409. A
// stubborn second writer therefore cannot make this writer miss its interval.
//
// MicroTime: client-node (2.0, as 1.4) types renewTime as V1MicroTime (a Date whose toISOString pads
// 3 digits with "000"), but passes strings through unchanged both ways. The beat's renewTime string is sent
// verbatim, so the Lease and the other channels carry the identical six-digit value.
import type { V1Lease, V1MicroTime } from '@kubernetes/client-node';
import { ANNOTATION_POLICY_PROBLEM, LABEL_MANAGED_BY, LABEL_NODE, LABEL_PARENT, LABEL_ROLE, leaseName, MANAGED_BY } from '../core/names.js';
import type { Beat, Role } from '../core/types.js';
import type { BeatClient } from '../kube/beat-client.js';
import { classifyKubeError, type KubeError } from '../kube/errors.js';
import type { BeatWriter, Clock } from './channel.js';
import { type BeatResult, beatAnnotations, beatOf, isRecord, parseBeatAnnotations, parseHolder, parseRenewTime, show, stringMap } from './fields.js';
import { backoffMs } from './retry.js';

/** As the kubelet (maxUpdateRetries): enough to ride out a few conflicts, few enough to end a round quickly. */
export const MAX_UPDATE_RETRIES = 5;
/** After this many conflicts in one round, stop re-reading and merge-patch instead (see header). */
export const CONFLICTS_BEFORE_PATCH = 2;
/** As the kubelet (onRepeatedHeartbeatFailure after the second failed try): drop a connection pool that may point at a dead endpoint. */
export const FRESH_CLIENT_AFTER_FAILURES = 2;
/** Label that names the application, for `kubectl get -l app.kubernetes.io/name=lastseen`. */
export const LABEL_APP_NAME = 'app.kubernetes.io/name';

export interface LeaseTarget {
  namespace: string;
  key: string;
  node: string;
  role: Role;
  /** The policy window: written as leaseDurationSeconds (rounded up) for people reading the Lease. */
  windowMs: number;
  /** Why the writer's policy file is not in use, shown as ANNOTATION_POLICY_PROBLEM; absent when it is. */
  policyProblem?: string | null;
}

/** The Lease as this writer wants it after `beat`, built on `base` (the cached copy) when given. */
export function leaseWithBeat(base: V1Lease | null, t: LeaseTarget, beat: Beat): V1Lease {
  const spec = base?.spec ?? {};
  const sameHolder = spec.holderIdentity === beat.holder;
  const renewTime = beat.renewTime as unknown as V1MicroTime;
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      ...base?.metadata,
      name: leaseName(t.key, t.node, t.role),
      namespace: t.namespace,
      labels: {
        ...base?.metadata?.labels,
        [LABEL_NODE]: t.node,
        [LABEL_PARENT]: t.key,
        [LABEL_ROLE]: t.role,
        [LABEL_MANAGED_BY]: MANAGED_BY,
        [LABEL_APP_NAME]: MANAGED_BY,
      },
      annotations: withPolicyProblem({ ...base?.metadata?.annotations, ...beatAnnotations(beat) }, t.policyProblem),
    },
    spec: {
      ...spec,
      holderIdentity: beat.holder,
      leaseDurationSeconds: Math.max(1, Math.ceil(t.windowMs / 1000)),
      renewTime,
      acquireTime: sameHolder && spec.acquireTime ? spec.acquireTime : renewTime,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (base && !sameHolder ? 1 : 0),
    },
  };
}

function withPolicyProblem(annotations: Record<string, string>, problem: string | null | undefined): Record<string, string> {
  if (problem) annotations[ANNOTATION_POLICY_PROBLEM] = problem;
  else delete annotations[ANNOTATION_POLICY_PROBLEM];
  return annotations;
}

/**
 * Read a beat from a Lease (typed, or raw JSON from a watch). Refuses, with a reason, a Lease that
 * does not parse, names another node, whose name does not match its labels, or carries impossible
 * values. Never throws.
 */
export function beatFromLease(lease: unknown, expectedNode: string): BeatResult {
  if (!isRecord(lease) || !isRecord(lease.metadata)) return { ok: false, reason: 'not a Lease object (no metadata)' };
  const md = lease.metadata;
  const name = typeof md.name === 'string' ? md.name : null;
  if (!name) return { ok: false, reason: `Lease name is ${show(md.name)}` };
  const where = `Lease ${typeof md.namespace === 'string' ? `${md.namespace}/` : ''}${name}`;
  const refuse = (reason: string): BeatResult => ({ ok: false, reason: `${where}: ${reason}` });
  const labels = stringMap(md.labels);
  const ann = stringMap(md.annotations);
  const node = labels[LABEL_NODE];
  if (node !== expectedNode) return refuse(`label ${LABEL_NODE} is ${show(node)}, not this node ${JSON.stringify(expectedNode)}`);
  const key = labels[LABEL_PARENT];
  if (!key) return refuse(`label ${LABEL_PARENT} is ${show(key)}`);
  const f = parseBeatAnnotations(ann);
  if (!f.ok) return refuse(f.reason);
  const expected = leaseName(key, expectedNode, f.value.role);
  if (name !== expected) return refuse(`name does not match its labels (expected ${expected})`);
  const spec = isRecord(lease.spec) ? lease.spec : {};
  const holder = parseHolder(spec.holderIdentity, 'spec.holderIdentity');
  if (!holder.ok) return refuse(holder.reason);
  const renew = parseRenewTime(spec.renewTime, 'spec.renewTime');
  if (!renew.ok) return refuse(renew.reason);
  return beatOf('lease', { holder: holder.value, renewTime: renew.value, ...f.value });
}

export interface LeaseChannelOptions {
  target: LeaseTarget;
  /** Makes an api client; called again for a fresh connection pool after repeated failures. */
  makeClient: () => BeatClient;
  clock: Clock;
  /** Jitter source in [0, 1). */
  random?: () => number;
  /** Told of each failed request (the round may still succeed on a retry). */
  onFailure?: (err: KubeError, attempt: number) => void;
}

export class LeaseChannelError extends Error {
  constructor(
    message: string,
    readonly kubeError: KubeError | null,
  ) {
    super(message);
    this.name = 'LeaseChannelError';
  }
}

/** The Lease writer. One instance per heartbeat process; not safe for overlapping writes. */
export class LeaseChannel implements BeatWriter {
  readonly channel = 'lease' as const;
  private client: BeatClient;
  private cached: V1Lease | null = null;
  private consecutiveFailures = 0;
  private readonly name: string;
  private readonly object: string;

  constructor(private readonly opts: LeaseChannelOptions) {
    this.client = opts.makeClient();
    this.name = leaseName(opts.target.key, opts.target.node, opts.target.role);
    this.object = `lease ${opts.target.namespace}/${this.name}`;
  }

  async write(beat: Beat, deadline: number): Promise<void> {
    const { clock } = this.opts;
    const ns = this.opts.target.namespace;
    let conflicts = 0;
    let failures = 0;
    let last: KubeError | null = null;
    for (let attempt = 1; attempt <= MAX_UPDATE_RETRIES; attempt++) {
      if (attempt > 1 && clock.now() >= deadline) break;
      try {
        const api = this.client;
        if (conflicts >= CONFLICTS_BEFORE_PATCH) {
          this.cached = await api.mergePatchLease({ name: this.name, namespace: ns, body: this.patchBody(beat) });
        } else if (this.cached) {
          this.cached = await api.replaceLease({ name: this.name, namespace: ns, body: leaseWithBeat(this.cached, this.opts.target, beat) });
        } else {
          // No copy yet (first beat, or after a conflict / deletion): read it, or create it.
          const current = await this.read();
          const body = leaseWithBeat(current, this.opts.target, beat);
          this.cached = current ? await api.replaceLease({ name: this.name, namespace: ns, body }) : await api.createLease({ namespace: ns, body });
        }
        this.consecutiveFailures = 0;
        return;
      } catch (e) {
        const err = e instanceof LeaseChannelError && e.kubeError ? e.kubeError : classifyKubeError(e, this.object);
        last = err;
        if (err.kind === 'conflict' || err.kind === 'notFound') {
          // Changed or deleted under us: re-read (or re-create) on the next attempt.
          this.cached = null;
          // A deleted Lease must be re-created, which a patch cannot do.
          conflicts = err.kind === 'conflict' ? conflicts + 1 : 0;
          continue;
        }
        failures++;
        this.opts.onFailure?.(err, attempt);
        if (++this.consecutiveFailures >= FRESH_CLIENT_AFTER_FAILURES) this.freshClient();
        if (err.kind === 'forbidden' || err.kind === 'invalid') break;
        const backoff = backoffMs(failures, this.opts.random);
        if (clock.now() + backoff >= deadline) break;
        await clock.sleep(backoff);
      }
    }
    throw new LeaseChannelError(last ? last.message : `${this.object}: gave up after ${MAX_UPDATE_RETRIES} attempts`, last);
  }

  close(): void {
    this.client.close();
  }

  private async read(): Promise<V1Lease | null> {
    try {
      return await this.client.readLease({ name: this.name, namespace: this.opts.target.namespace });
    } catch (e) {
      const err = classifyKubeError(e, this.object);
      if (err.kind === 'notFound') return null;
      throw new LeaseChannelError(err.message, err);
    }
  }

  /** The fields this writer owns, as a merge patch (no resourceVersion: applied whatever else changed). */
  private patchBody(beat: Beat): object {
    const full = leaseWithBeat(null, this.opts.target, beat);
    // null removes the problem annotation in a merge patch once the policy file is fine again.
    const annotations = { [ANNOTATION_POLICY_PROBLEM]: null, ...full.metadata?.annotations };
    return {
      metadata: { labels: full.metadata?.labels, annotations },
      spec: { holderIdentity: beat.holder, leaseDurationSeconds: full.spec?.leaseDurationSeconds, renewTime: beat.renewTime },
    };
  }

  private freshClient(): void {
    this.client.close();
    this.client = this.opts.makeClient();
    this.consecutiveFailures = 0;
  }
}
