// The node agent's main loop: observers -> decide() -> actuators, for every parent on one node.
//
// Promises: decide() is called for one parent at a time with inputs in arrival order; every action
// it asks for is carried out once and its result is fed back as an input (success or failure), so
// the core's picture of the node's files stays true. Time only comes from the injected clock and
// timers. A failing actuator never stops the loop; a throwing observer callback cannot reach it.
// Assumes: one acting agent per node (see lock.ts); observers deliver only this node's objects.
import type { Logger } from 'pino';
import { changedBeat, decide, handoverToPersist, initialState, type RecoveredHandover } from '../core/decide.js';
import { type ManifestFile, manifestAgrees } from '../core/manifest.js';
import { parentId } from '../core/names.js';
import type { Clock, Timers } from '../core/time.js';
import type { Action, Beat, Channel, CheckpointInfo, Input, ParentState, PodInfo, PodRef, Reason } from '../core/types.js';
import { defaultPolicy, type Policy, policyFor } from '../policy/policy.js';
import type { ManifestCheck, ManifestSubject } from './observe/manifests.js';

export { type Clock, monotonicClock, realTimers, type Timers } from '../core/time.js';
export { type LastExit, podLastExit, podRestarts } from './parents.js';

/**
 * What the agent knows of a parent beyond the core's state: the pod to capture from, its labels.
 * `P`: the pod as the observers hand it over (a V1Pod in production, the model's pod in the simulator).
 */
export interface ParentView<P = unknown> {
  id: string;
  namespace: string;
  key: string;
  state: ParentState;
  /** Latest parent pod the api-server showed us (for capture). */
  pod: P | null;
  labels: Record<string, string>;
  /** Overrides applied to this parent's policy (for status). */
  overrides: string[];
  /** Overrides that matched but were skipped: their merge broke a cross-field rule (for status). */
  overridesSkipped?: string[];
}

export type LiveRead = { beats: Beat[] } | { unavailable: string };

/**
 * Thrown by `Actuators.collect` when the live read it makes first does not confirm that no pod
 * for the key is scheduled here (the api-server did not answer, or it has such a pod). Nothing was
 * removed; the core cancels the collection and counts the grace again.
 */
export class CollectRefusedError extends Error {
  constructor(readonly why: string) {
    super(`collection refused: ${why}`);
    this.name = 'CollectRefusedError';
  }
}

const NONE_DELETING: ReadonlyMap<string, PodRef> = new Map();

/** A parent as the pod watch lists it: its key worked out once, by the observer (src/agent/parents.ts). */
export interface ObservedParent<P> {
  namespace: string;
  key: string;
  pod: P;
  labels: Record<string, string>;
  /** Other live pods of the same key here (a surge rollout): their beats are the parent's too. */
  alsoListed?: Array<{ uid: string; name: string }>;
}

/** The ports the agent drives. Each returns when done; a rejection is reported to the core as actionFailed. */
export interface Actuators<P = unknown> {
  /** `reason`: the core's, for logs (the simulator checks its invariants with it). */
  capture(p: ParentView<P>, pod: PodInfo, reason: Reason): Promise<{ specHash: string }>;
  /** `exclusive`: write the manifest without port sharing (see ParentState.knownBad). */
  activate(p: ParentView<P>, reason: Reason, exclusive?: boolean): Promise<void>;
  retire(p: ParentView<P>, reason: Reason): Promise<void>;
  collect(p: ParentView<P>, reason: Reason): Promise<void>;
  /** Read the parent's api channels live (no cache). */
  readLive(p: ParentView<P>, channels: Channel[]): Promise<LiveRead>;
  /**
   * Take the hung main process of pod `podUid` (this parent's) off its port, only if it still does
   * not answer (src/core/fence.ts); `killed`: processes stopped (0: none was hung any more).
   */
  /** `evenIfStarved`: the core judged on the starved bound (src/core/fence.ts); the sidecar fences a process waiting for a CPU only then. */
  fence(p: ParentView<P>, podUid: string, reason: Reason, evenIfStarved?: boolean): Promise<{ killed: number; detail: string }>;
  event(p: ParentView<P>, e: Extract<Action, { type: 'event' }>): Promise<void>;
  /**
   * `handover: redirect`: make the node redirect new connections to this parent's port to its
   * copy's port (`on`), or stop (src/agent/redirect.ts; the ports are the parent's policy's).
   * None: this agent cannot redirect, and the action fails with a message saying so.
   */
  redirect?(p: ParentView<P>, on: boolean, reason: Reason): Promise<void>;
  /** Whether the node held a redirect for this parent (namespace/key) when the agent started. */
  redirectStanding?(id: string): boolean;
  /**
   * List this node's pods afresh, past the pod watch (production: the informer's resync; a watch
   * that stalled is re-opened by it); the list comes back through the pod observer as any other.
   * At most one per LIST_PODS_EVERY_MS, however many holders ask. None: the watch's lists only.
   */
  listPods?(): void;
}

/**
 * Where hand-overs in progress are kept across a restart (src/agent/handovers.ts on disk; the
 * simulator's node disk). `set` records (or clears, with null) one parent's hand-over and resolves
 * once it is durable; an unchanged record must cost nothing, since it is called on every transition.
 */
export interface HandoverRecord {
  set(id: string, h: RecoveredHandover | null): Promise<unknown>;
}

export interface AgentHooks<P = unknown> {
  /** Called after every transition (debounce in the caller). */
  onTransition?(p: ParentView<P>, a: Extract<Action, { type: 'transition' }>): void;
  /** Called when the reason changes while the state stays (status REASON). */
  onNote?(p: ParentView<P>, a: Extract<Action, { type: 'note' }>): void;
  /** Called after every decide() (metrics). */
  onDecision?(p: ParentView<P>): void;
  /** Called when a parent is forgotten (collected and no longer scheduled). */
  onForget?(id: string): void;
  /** Called for every beat the core refused as not the parent's own (metrics; the log line is written here). */
  onBeatRefused?(p: ParentView<P>, a: Extract<Action, { type: 'beatRefused' }>): void;
  /**
   * Called when an action's result is known, before the core hears it (`p.state` is still the state
   * it was asked in; `error`: null when it succeeded). Metrics that claim a result count here.
   */
  onResult?(p: ParentView<P>, a: Action, error: string | null): void;
}

export interface AgentOptions<P> {
  node: string;
  clock: Clock;
  timers: Timers;
  logger: Logger;
  actuators: Actuators<P>;
  /**
   * The one reader of a pod: what the core needs of it (uid, name, the spec hash its checkpoint
   * would have, restarts, last exit, Ready), for the parent `parent` (production: v1PodInfo).
   */
  podInfo(pod: P, parent: { namespace: string; key: string }): PodInfo;
  hooks?: AgentHooks<P>;
  policy?: Policy;
  /** Hand-overs in progress survive a restart through this record (none: they do not). */
  handovers?: HandoverRecord;
  /**
   * The node rebooted since the agent last ran (src/agent/boot.ts). Until an api-server answers,
   * parents tracked from now on start without startupGrace if their absence is the failure.
   */
  rebooted?: boolean;
}

interface Entry<P> extends ParentView<P> {
  wakeAt: number | null;
  /**
   * Bumped when a write or removal of the parent's manifest starts or ends: a reading of the folder
   * taken across one says nothing (its own report does), and is dropped (manifestSeen).
   */
  manifestTicket: number;
}

/** Beats remembered for keys the agent does not track yet (a Lease seen before its pod). */
const MAX_UNTRACKED_KEYS = 1000;
/**
 * A holder no pod list names asks for a fresh list at most this often: one list answers every
 * parent, and a writer inventing holders costs the api-server one list per this long at most.
 */
export const LIST_PODS_EVERY_MS = 10_000;

export class Agent<P = unknown> implements ManifestSubject {
  private readonly entries = new Map<string, Entry<P>>();
  private readonly untracked = new Map<string, Beat[]>();
  private policy: Policy;
  private apiReachable = false;
  /** The probe gave its first verdict (until then apiReachable is an assumption, not something heard). */
  private apiHeard = false;
  private rebooted: boolean;
  /** The last verdict on the node's kubelet in this boot (kubelet()); true closes the question. */
  private kubeletSaid: boolean | null = null;
  private timer: unknown = null;
  private timerAt: number | null = null;
  private stopped = false;
  private readonly inflight = new Set<Promise<unknown>>();
  /** The last hand-over record written; a retire waits for it (see carryOut). */
  private handoverWritten: Promise<unknown> = Promise.resolve();
  /** When a fresh pod list was last asked for (listPods), and the one waiting for its turn. */
  private podsListedAt: number | null = null;
  private listPodsTimer: unknown = null;

  constructor(private readonly o: AgentOptions<P>) {
    this.policy = o.policy ?? defaultPolicy();
    this.rebooted = o.rebooted ?? false;
  }

  // ---- what observers call ----

  /** A checkpoint found on disk at start (or a manifest found active). */
  restore(namespace: string, key: string, checkpoint: CheckpointInfo, labels: Record<string, string> = {}, handover?: RecoveredHandover): void {
    this.ensure(namespace, key, labels, checkpoint, handover);
  }

  /** The api-server's pods for this node were (re)listed or changed; `parents` maps key id -> pod. */
  podsObserved(parents: Map<string, ObservedParent<P>>, deleting: ReadonlyMap<string, PodRef> = NONE_DELETING): void {
    if (!this.apiReachable) {
      // The pod watch still hears an api-server the probe calls unreachable (a slow one): its pods
      // say only who may beat for a key already tracked (the core takes them as identity only).
      for (const p of parents.values()) {
        const e = this.entries.get(parentId(p.namespace, p.key));
        if (e) this.feed(e, { type: 'pod', pod: { ...this.o.podInfo(p.pod, p), ...(p.alsoListed?.length ? { alsoListed: p.alsoListed } : {}) } });
      }
      return;
    }
    for (const p of parents.values()) {
      const e = this.ensure(p.namespace, p.key, p.labels);
      e.pod = p.pod;
      e.labels = p.labels;
      this.refreshPolicy(e);
      this.feed(e, { type: 'pod', pod: { ...this.o.podInfo(p.pod, p), ...(p.alsoListed?.length ? { alsoListed: p.alsoListed } : {}) } });
    }
    // Everything else has no pod here as far as the api-server knows: the core starts its GC clock.
    for (const e of this.entries.values()) {
      if (parents.has(e.id)) continue;
      e.pod = null;
      const d = deleting.get(e.id);
      this.feed(e, { type: 'pod', pod: null, ...(d ? { deleting: d } : {}) });
    }
  }

  beat(namespace: string, key: string, beat: Beat): void {
    const e = this.entries.get(parentId(namespace, key));
    if (e) {
      this.feed(e, { type: 'beat', beat });
      return;
    }
    const id = parentId(namespace, key);
    if (!this.untracked.has(id) && this.untracked.size >= MAX_UNTRACKED_KEYS) return;
    const list = this.untracked.get(id) ?? [];
    list.push(beat);
    this.untracked.set(id, list.slice(-3));
  }

  /** The parents whose manifest the folder observer reads (src/agent/observe/manifests.ts): those with a stored copy. */
  manifestChecks(): ManifestCheck[] {
    const out: ManifestCheck[] = [];
    for (const e of this.entries.values()) {
      const c = e.state.checkpoint;
      if (c.stored && c.specHash !== null) out.push({ id: e.id, specHash: c.specHash, ticket: e.manifestTicket });
    }
    return out;
  }

  /** What the folder holds for one parent; dropped when it was read across a write of ours, or says nothing new. */
  manifestSeen(check: ManifestCheck, file: ManifestFile): void {
    const e = this.entries.get(check.id);
    if (!e || e.manifestTicket !== check.ticket || manifestAgrees(e.state, file)) return;
    this.o.logger.info({ parent: e.id, manifest: file, active: e.state.checkpoint.active }, 'the manifest folder differs from what the agent counts on');
    this.feed(e, { type: 'manifest', file });
  }

  /** The pod watch failed: until it lists again, nothing may be collected on its word. */
  schedulingUnknown(why: string): void {
    for (const e of [...this.entries.values()]) this.feed(e, { type: 'schedulingUnknown', why });
  }

  /**
   * After a reboot: whether the node's kubelet has reached an api-server in this boot (its node
   * Lease, src/agent/observe/kubelet-lease.ts). "Yes" closes the question for good.
   */
  kubelet(reachedApi: boolean): void {
    if (this.kubeletSaid === true) return;
    if (this.kubeletSaid !== reachedApi)
      this.o.logger.info(
        { reachedApi },
        reachedApi ? "the node's kubelet reached an api-server in this boot" : "the node's kubelet has not reached an api-server in this boot",
      );
    this.kubeletSaid = reachedApi;
    for (const e of this.entries.values()) this.feed(e, { type: 'kubelet', reachedApi });
  }

  api(reachable: boolean): void {
    if (this.apiHeard && reachable === this.apiReachable) return;
    this.apiHeard = true;
    this.apiReachable = reachable;
    if (reachable) this.rebooted = false;
    this.o.logger.info({ reachable }, 'api-server reachability changed');
    for (const e of this.entries.values()) this.feed(e, { type: 'api', reachable });
  }

  setPolicy(policy: Policy): void {
    this.policy = policy;
    for (const e of this.entries.values()) this.refreshPolicy(e);
  }

  views(): ParentView<P>[] {
    return [...this.entries.values()].map((e) => ({ ...e }));
  }

  isApiReachable(): boolean {
    return this.apiReachable;
  }

  /**
   * Actions started and not yet fed back. It only grows synchronously, inside the calls above and
   * timer callbacks; it shrinks as results come back. (The simulator lets the promise callbacks of
   * new actions run before its virtual time moves on.)
   */
  actionsInFlight(): number {
    return this.inflight.size;
  }

  /**
   * A fresh pod list now, or once LIST_PODS_EVERY_MS has passed since the last one was asked for:
   * one waits its turn, never dropped (a holder whose first beat came just after a list may not
   * have been in it), and never more than one.
   */
  private listPodsSoon(): void {
    if (this.listPodsTimer !== null || this.stopped) return;
    const ask = () => {
      this.listPodsTimer = null;
      if (this.stopped) return;
      this.podsListedAt = this.o.clock.now();
      this.o.actuators.listPods?.();
    };
    const wait = this.podsListedAt === null ? 0 : this.podsListedAt + LIST_PODS_EVERY_MS - this.o.clock.now();
    if (wait <= 0) ask();
    else this.listPodsTimer = this.o.timers.set(ask, wait);
  }

  /** Stop scheduling; wait for actions in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.o.timers.clear(this.timer);
    if (this.listPodsTimer !== null) this.o.timers.clear(this.listPodsTimer);
    this.timer = null;
    await Promise.allSettled([...this.inflight]);
  }

  // ---- the loop ----

  private ensure(namespace: string, key: string, labels: Record<string, string>, checkpoint?: CheckpointInfo, handover?: RecoveredHandover): Entry<P> {
    const id = parentId(namespace, key);
    let e = this.entries.get(id);
    if (e) {
      if (checkpoint && !e.state.checkpoint.stored)
        this.feed(e, checkpoint.active ? { type: 'activated' } : { type: 'captured', specHash: checkpoint.specHash ?? '' });
      return e;
    }
    const eff = policyFor(this.policy, { namespace, key, labels });
    const state = initialState({
      namespace,
      key,
      policy: eff.policy,
      now: this.o.clock.now(),
      ...(this.apiHeard ? { apiReachable: this.apiReachable } : {}),
      rebooted: this.rebooted,
      kubeletUnheard: this.o.rebooted === true && this.kubeletSaid !== true,
      ...(checkpoint ? { checkpoint } : {}),
      ...(handover ? { handover } : {}),
      // A boot voids deadlines: a record read after a reboot was written under the last boot.
      ...(handover && this.o.rebooted === true ? { recordFromEarlierBoot: true } : {}),
    });
    e = { id, namespace, key, state, pod: null, labels, overrides: eff.applied, overridesSkipped: eff.skipped, wakeAt: null, manifestTicket: 0 };
    this.entries.set(id, e);
    this.o.logger.info({ parent: id, state: state.state, checkpoint: state.checkpoint }, 'tracking parent');
    // A redirect an earlier run left on the node is the core's to keep or remove.
    this.feed(e, this.o.actuators.redirectStanding?.(id) === true ? { type: 'redirected', on: true } : { type: 'tick' });
    for (const b of this.untracked.get(id) ?? []) this.feed(e, { type: 'beat', beat: b });
    this.untracked.delete(id);
    return e;
  }

  private refreshPolicy(e: Entry<P>): void {
    const eff = policyFor(this.policy, { namespace: e.namespace, key: e.key, labels: e.labels });
    e.overrides = eff.applied;
    e.overridesSkipped = eff.skipped;
    if (JSON.stringify(eff.policy) !== JSON.stringify(e.state.policy)) this.feed(e, { type: 'policy', policy: eff.policy });
  }

  /** Keep the hand-over record (deadline, attempts, known-bad verdict) of `e` on disk; unchanged records cost nothing. */
  private persistHandover(e: Entry<P>): void {
    if (!this.o.handovers) return;
    // Kept as it settles: a retire waits for it and fails with it (the record guards the retire).
    const written = this.o.handovers.set(e.id, handoverToPersist(e.state, this.o.clock.now()));
    written.catch((err: unknown) => this.o.logger.warn({ parent: e.id, err: (err as Error)?.message ?? String(err) }, 'hand-over record not written'));
    this.handoverWritten = written;
  }

  private feed(e: Entry<P>, input: Input): void {
    if (this.stopped) return;
    const now = this.o.clock.now();
    const d = decide(e.state, input, now);
    e.state = d.state;
    e.wakeAt = d.wakeAt;
    for (const a of d.actions) this.carryOut(e, a);
    this.o.hooks?.onDecision?.(e);
    if (e.state.state === 'Orphaned' && !e.state.checkpoint.stored && !e.state.checkpoint.active && e.state.pod === null) {
      this.entries.delete(e.id);
      this.o.logger.info({ parent: e.id }, 'forgot parent: collected and no longer scheduled here');
      this.o.hooks?.onForget?.(e.id);
    }
    this.schedule();
  }

  private carryOut(e: Entry<P>, a: Action): void {
    const log = this.o.logger;
    const touchesManifest = a.type === 'activate' || a.type === 'retire' || a.type === 'collect';
    const told = (error: string | null) => {
      try {
        this.o.hooks?.onResult?.(e, a, error);
      } catch (err) {
        log.error({ parent: e.id, err: (err as Error)?.message ?? String(err) }, 'onResult hook threw; carrying on');
      }
    };
    const run = (what: Action['type'], p: Promise<Input | null>) => {
      if (touchesManifest) e.manifestTicket++;
      const done = p
        .then(
          (next) => {
            told(null);
            return next;
          },
          (err: unknown): Input => {
            const error = err instanceof Error ? err.message : String(err);
            told(error);
            if (err instanceof CollectRefusedError) {
              log.warn({ parent: e.id, why: err.why }, 'collection refused by its live read; keeping the checkpoint');
              return { type: 'schedulingUnknown', why: err.why };
            }
            log.warn({ parent: e.id, action: what, err: error }, 'action failed');
            return { type: 'actionFailed', action: what, error };
          },
        )
        .then((next) => {
          if (touchesManifest) e.manifestTicket++;
          const cur = this.entries.get(e.id);
          if (next && cur) this.feed(cur, next);
        })
        .finally(() => this.inflight.delete(done));
      this.inflight.add(done);
    };
    const A = this.o.actuators;
    switch (a.type) {
      case 'transition':
        log.info({ parent: e.id, from: a.from, to: a.to, reason: a.reason.code, message: a.reason.message }, 'transition');
        // On every transition, not only into and out of HandingOver: a record left behind by a
        // restart that found the checkpoint still active (recovered as Active) would otherwise
        // outlive the hand-over and, at a later restart, resume a hand-over long finished, whose
        // passed deadline re-activates the checkpoint of a healthy parent. The record dedupes
        // unchanged writes, so this costs nothing outside hand-overs.
        this.persistHandover(e);
        this.o.hooks?.onTransition?.(e, a);
        return;
      case 'note':
        log.info({ parent: e.id, state: a.state, reason: a.reason.code, message: a.reason.message }, 'reason noted');
        // A verdict reached without a state change (KnownBadSpec) must be persisted as well.
        this.persistHandover(e);
        this.o.hooks?.onNote?.(e, a);
        return;
      case 'beatRefused':
        // Once per holder (the core remembers whom it reported); every refusal is counted.
        if (a.report) {
          log.warn(
            { parent: e.id, channel: a.channel, holder: a.holder, holderUid: a.holderUid, why: a.why, message: a.message },
            "refused a beat that is not the parent's own",
          );
          run(
            'event',
            A.event(e, {
              type: 'event',
              eventType: 'Warning',
              reason: a.why === 'frozen' ? 'FrozenBeat' : 'ForeignBeat',
              message: `${e.id}: ${a.message}`,
            }).then(() => null),
          );
        }
        this.o.hooks?.onBeatRefused?.(e, a);
        return;
      case 'listPods':
        if (!A.listPods) return;
        log.info({ parent: e.id, holder: a.holder, holderUid: a.holderUid }, 'a beat from a holder no pod list names; listing the pods afresh');
        this.listPodsSoon();
        return;
      case 'event':
        run(
          'event',
          A.event(e, a).then(() => null),
        );
        return;
      case 'capture':
        run(
          'capture',
          A.capture(e, a.pod, a.reason).then((r) => ({ type: 'captured', specHash: r.specHash }) as Input),
        );
        return;
      case 'activate':
        log.info({ parent: e.id, reason: a.reason.code, message: a.reason.message, exclusive: a.exclusive === true }, 'activating checkpoint');
        run(
          'activate',
          A.activate(e, a.reason, a.exclusive === true).then(
            () => (a.exclusive === true ? { type: 'activated', exclusive: true } : { type: 'activated' }) as Input,
          ),
        );
        return;
      case 'retire':
        log.info({ parent: e.id, reason: a.reason.code, message: a.reason.message }, 'retiring checkpoint');
        // A hand-over's deadline is durable before its checkpoint is retired: a crash in between
        // must not leave the parent uncovered until startTimeout. A record whose last write failed
        // is written again here (an unchanged one costs nothing), and a failed write is a failed retire.
        this.persistHandover(e);
        run(
          'retire',
          this.handoverWritten.then(() => A.retire(e, a.reason)).then(() => ({ type: 'retired' }) as Input),
        );
        return;
      case 'fence':
        log.warn({ parent: e.id, pod: a.podUid, reason: a.reason.code, message: a.reason.message }, 'fencing a hung parent');
        run(
          'fence',
          A.fence(e, a.podUid, a.reason, a.evenIfStarved === true).then(
            (r): Input => ({ type: 'fenced', podUid: a.podUid, killed: r.killed, detail: r.detail }),
          ),
        );
        return;
      case 'redirect': {
        log.info(
          { parent: e.id, on: a.on, reason: a.reason.code, message: a.reason.message },
          a.on ? 'redirecting the node to the copy' : 'removing the redirect to the copy',
        );
        const done = A.redirect
          ? A.redirect(e, a.on, a.reason)
          : Promise.reject(new Error('this agent cannot redirect (no redirect actuator): use handover release or overlap'));
        run(
          'redirect',
          done.then(() => ({ type: 'redirected', on: a.on }) as Input),
        );
        return;
      }
      case 'collect':
        log.info({ parent: e.id, reason: a.reason.code, message: a.reason.message }, 'collecting checkpoint');
        run(
          'collect',
          A.collect(e, a.reason).then(() => ({ type: 'collected' }) as Input),
        );
        return;
      case 'confirm':
        run(
          'confirm',
          A.readLive(e, a.channels).then((r): Input => {
            if ('unavailable' in r) return { type: 'confirmed', outcome: 'unavailable' };
            const cur = this.entries.get(e.id)?.state ?? e.state;
            // Whether the beat changed is the core's judgement (freshness.ts), not the agent's.
            const changed = changedBeat(cur, r.beats);
            return changed ? { type: 'confirmed', outcome: 'changed', beat: changed } : { type: 'confirmed', outcome: 'unchanged' };
          }),
        );
        return;
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    let next: number | null = null;
    for (const e of this.entries.values()) if (e.wakeAt !== null && (next === null || e.wakeAt < next)) next = e.wakeAt;
    if (next === this.timerAt) return;
    if (this.timer !== null) this.o.timers.clear(this.timer);
    this.timer = null;
    this.timerAt = next;
    if (next === null) return;
    this.timer = this.o.timers.set(() => this.wake(), Math.max(0, next - this.o.clock.now()));
  }

  private wake(): void {
    this.timer = null;
    this.timerAt = null;
    const now = this.o.clock.now();
    for (const e of [...this.entries.values()]) if (e.wakeAt !== null && e.wakeAt <= now) this.feed(e, { type: 'tick' });
    this.schedule();
  }
}
