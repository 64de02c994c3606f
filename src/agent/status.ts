// The node's NodeCheckpoint status, rebuilt from the agent's views on every write (never patched
// piecemeal), written on transitions only and coalesced: a burst of transitions costs one write.
// Times in status are wall-clock ISO strings derived from the agent's monotonic observations.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type KubeClient, makeKubeClient } from '../kube/client.js';
import { classifyKubeError } from '../kube/errors.js';
import {
  type Condition,
  NODECHECKPOINT_GROUP,
  NODECHECKPOINT_PLURAL,
  NODECHECKPOINT_VERSION,
  type NodeCheckpoint,
  type NodeCheckpointStatus,
  type NodeOwner,
  newNodeCheckpoint,
  type ParentStatus,
  summarize,
} from '../kube/nodecheckpoint-types.js';
import type { Clock, ParentView, Timers } from './agent.js';
import type { CoverageWatch } from './coverage.js';

/** Transitions within this long are written together. */
export const STATUS_COALESCE_MS = 500;
/** A NodeCheckpoint without an owner: read the Node again at most this often (on status writes). */
export const OWNER_RETRY_MS = 5 * 60_000;
/**
 * A status is also written this often without a transition, so LAST SEEN (the last beat the agent
 * saw, on any channel) stays current and a reader can tell a live report from a stale one: one
 * small write a minute per node. `lastseen status` marks a report older than STALE_AFTER_PERIODS.
 */
export const STATUS_REFRESH_MS = 60_000;
export const STALE_AFTER_PERIODS = 3;
/** After a failed write, try again after this long (the api-server may be away). */
export const STATUS_RETRY_MS = 5_000;

export function buildStatus(
  node: string,
  views: ParentView[],
  monoNow: number,
  wallNow: number,
  conditions: Condition[],
  tokensExpireAt: (id: string) => string | undefined = () => undefined,
  coverage?: CoverageWatch,
): NodeCheckpointStatus {
  const wall = (mono: number) => new Date(wallNow - (monoNow - mono)).toISOString();
  const parents: ParentStatus[] = views.map((v) => ({
    ...base(v),
    ...coverageFields(v, coverage),
  }));
  function base(v: ParentView): ParentStatus {
    return {
      namespace: v.namespace,
      key: v.key,
      state: v.state.state,
      phase: v.state.phase ?? '',
      lastSeen: v.state.lastChangeAt === null ? null : wall(v.state.lastChangeAt),
      checkpointStored: v.state.checkpoint.stored,
      checkpointActive: v.state.checkpoint.active,
      reason: v.state.reason.code,
      message: v.state.reason.message,
      lastTransitionTime: wall(v.state.since),
      handoverAttempts: v.state.handover.attempts,
      policyOverrides: v.overrides,
      ...(v.overridesSkipped?.length ? { policyOverridesSkipped: v.overridesSkipped } : {}),
      ...(v.state.checkpoint.active && tokensExpireAt(v.id) ? { tokensExpireAt: tokensExpireAt(v.id) } : {}),
    };
  }
  return summarize(node, parents, conditions, new Date(wallNow).toISOString());
}

/** States whose own reason says less than a failing capture does (the parent is fine; its copy is not). */
const CAPTURE_REASON_STATES = new Set(['Pending', 'Healthy', 'Starting']);

/** Coverage of one parent, and a failing capture as its reason (`CaptureFailing: ENOSPC …`) while nothing more urgent holds. */
function coverageFields(v: ParentView, coverage: CoverageWatch | undefined): Partial<ParentStatus> {
  if (!coverage) return {};
  const c = coverage.coverage(v);
  const failing = coverage.captureFailing(v.id);
  return {
    covered: c.covered,
    coverageReason: c.reason,
    coverageMessage: c.message.slice(0, 1024),
    ...(failing && CAPTURE_REASON_STATES.has(v.state.state)
      ? { reason: 'CaptureFailing', message: `${failing.reason}: ${failing.failures} captures failed in a row; the latest: ${failing.message}`.slice(0, 1024) }
      : {}),
  };
}

/**
 * Kubernetes' rule for conditions: lastTransitionTime moves only when the status changes. A
 * condition whose status is the one already recorded keeps the recorded time (from the object just
 * read, so it also holds across agent restarts).
 */
export function keepTransitionTimes(recorded: readonly Condition[] | undefined, next: Condition[]): Condition[] {
  return next.map((c) => {
    const was = recorded?.find((r) => r.type === c.type);
    return was && was.status === c.status && was.lastTransitionTime ? { ...c, lastTransitionTime: was.lastTransitionTime } : c;
  });
}

/** A status write's requests give up after this long (when the writer keeps a client of its own). */
export const STATUS_REQUEST_TIMEOUT_MS = 10_000;

export interface StatusWriterOptions {
  node: string;
  kubeConfig: KubeConfig;
  /**
   * The agent's pooled client (it is replaced after an unreachable verdict, hence a getter). Without
   * it the writer keeps a pooled client of its own on `kubeConfig`, closed by `stop()`. Never
   * client-node's `makeApiClient`: that opens a new connection, with its TLS handshake, for every
   * request (two a write, a write a minute and on transitions), and sets no deadline.
   */
  kube?: () => KubeClient;
  views: () => ParentView[];
  conditions: () => Condition[];
  clock: Clock;
  timers: Timers;
  logger: Logger;
  wallNow?: () => number;
  /** Earliest expiry of an active checkpoint's copied tokens (TokenRefresher.expiries). */
  tokensExpireAt?: (id: string) => string | undefined;
  /** Each parent's coverage and failing captures. */
  coverage?: CoverageWatch;
}

export class StatusWriter {
  private own: KubeClient | null = null;
  private timer: unknown = null;
  private writing: Promise<void> | null = null;
  private again = false;
  /** When the Node was last read to own the NodeCheckpoint (monotonic; null: never). */
  private ownerTriedAt: number | null = null;
  writes = 0;

  constructor(private readonly o: StatusWriterOptions) {}

  private kube(): KubeClient {
    if (this.o.kube) return this.o.kube();
    this.own ??= makeKubeClient(this.o.kubeConfig, { requestTimeoutMs: STATUS_REQUEST_TIMEOUT_MS });
    return this.own;
  }

  /** Ask for a write soon (coalesced). */
  poke(delayMs = STATUS_COALESCE_MS): void {
    if (this.timer !== null) return;
    this.timer = this.o.timers.set(() => {
      this.timer = null;
      void this.flush();
    }, delayMs);
  }

  async flush(): Promise<void> {
    if (this.writing) {
      this.again = true;
      return this.writing;
    }
    this.writing = this.write()
      .catch((e: unknown) => {
        this.o.logger.warn({ err: classifyKubeError(e, `nodecheckpoint ${this.o.node}`).message }, 'status not written; will retry');
        this.poke(STATUS_RETRY_MS);
      })
      .finally(() => {
        this.writing = null;
        if (this.again) {
          this.again = false;
          this.poke(0);
        }
      });
    return this.writing;
  }

  stop(): void {
    if (this.timer !== null) this.o.timers.clear(this.timer);
    this.timer = null;
    this.own?.close();
    this.own = null;
  }

  /**
   * The node's Node object as the NodeCheckpoint's owner, so the cluster's garbage collector removes
   * the NodeCheckpoint once the Node is deleted: the api-server's word, not the agent's guess. No
   * Node to be read (a test cluster, a missing permission): no owner, said once.
   */
  private async nodeOwner(): Promise<NodeOwner | undefined> {
    try {
      const n = await this.kube().core.readNode({ name: this.o.node });
      if (n.metadata?.uid) return { apiVersion: 'v1', kind: 'Node', name: this.o.node, uid: n.metadata.uid };
    } catch (e) {
      this.o.logger.info(
        { err: classifyKubeError(e, `node ${this.o.node}`).message },
        'NodeCheckpoint created without an owner: it stays if the Node is deleted',
      );
    }
    return undefined;
  }

  private async write(): Promise<void> {
    const base = { group: NODECHECKPOINT_GROUP, version: NODECHECKPOINT_VERSION, plural: NODECHECKPOINT_PLURAL, name: this.o.node };
    const api = this.kube().custom;
    let obj: NodeCheckpoint;
    try {
      obj = (await api.getClusterCustomObject(base)) as NodeCheckpoint;
    } catch (e) {
      if (classifyKubeError(e, `nodecheckpoint ${this.o.node}`).kind !== 'notFound') throw e;
      this.ownerTriedAt = this.o.clock.now();
      obj = (await api.createClusterCustomObject({ ...base, body: newNodeCheckpoint(this.o.node, await this.nodeOwner()) })) as NodeCheckpoint;
    }
    // Created without an owner (the Node could not be read then: RBAC not yet in force, or no Node
    // yet): try again, at most every OWNER_RETRY_MS, on a status write that happens anyway.
    const now = this.o.clock.now();
    if (!obj.metadata.ownerReferences?.length && (this.ownerTriedAt === null || now - this.ownerTriedAt >= OWNER_RETRY_MS)) {
      this.ownerTriedAt = now;
      const owner = await this.nodeOwner();
      if (owner)
        obj = (await api.replaceClusterCustomObject({
          ...base,
          body: { ...obj, metadata: { ...obj.metadata, ownerReferences: [owner] } },
        })) as NodeCheckpoint;
    }
    const conditions = keepTransitionTimes(obj.status?.conditions, this.o.conditions());
    const status = buildStatus(
      this.o.node,
      this.o.views(),
      this.o.clock.now(),
      (this.o.wallNow ?? Date.now)(),
      conditions,
      this.o.tokensExpireAt,
      this.o.coverage,
    );
    await api.replaceClusterCustomObjectStatus({ ...base, body: { ...obj, status } });
    this.writes += 1;
  }
}
