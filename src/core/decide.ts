// The decision core: one parent key on one node.
//
// Model (the rules of docs/architecture.md, made executable):
// - Freshness is measured on the observer's own clock: `lastChangeAt` is when the agent saw a
//   parent beat *change* (holder, uid, sequence, renew time or phase). A writer's timestamps are
//   only compared for equality. The first beat seen on a channel after a (re)start is a baseline,
//   not a proof of life: a stale Lease or file left behind by a dead parent looks the same.
// - Silence is judged only after `graceUntil` (agent start, api-server return) and must be
//   confirmed by a live read before activating when the parent writes to api channels and the
//   api-server is reachable. Fresh on any channel means alive.
// - The checkpoint is activated only if a copy is stored (captured from a pod that reported Ready,
//   by a probe or, for an unprobed beat, by the api-server's Ready condition: last known good), retired when the parent's own beats return, and handed over with a deadline
//   and exponential backoff. It is collected only with the api-server's word after `gcGrace`.
// - `whenApiUnreachable: hold` never activates while the api-server is unreachable; `activate`
//   treats the api-server's absence as the failure and covers without confirmation.
// - A parent is judged by the interval it declares: never by a window shorter than twice the
//   interval of its latest beat (`judgingWindowMs`). Writer and reader may read different copies of
//   the policy; a heartbeat slower than the agent's window would otherwise be covered and handed
//   back every interval (issue 11). The widening is announced with a WindowBelowInterval Warning
//   and shown as the reason of a Healthy or Starting parent.
//
// Pure and synchronous: no I/O, no clock, no randomness. The caller feeds inputs and ticks at
// `wakeAt`, carries out the actions, and reports their results back as inputs.
import { actionWakes, ask as askFor, due, failed, inFlight, succeeded } from './actions.js';
import { copyHang, copyRestarted, emptyHang, FENCE_REPEAT_MS, fenceAllowed, hungPod, observeCopyBeat } from './fence.js';
import { holds, holdsPod, nextTry, OVERLAP_EXITS_FOR_VERDICT, PROBATION, recovered as recoveredVerdict, sharesOnAfterVerdict, strike } from './probation.js';
import { copyTrust, emptyTrust } from './beats.js';
import {
  fresh,
  freshnessWakes,
  freshSinceEntered,
  judgeLive,
  noteWindow,
  observeBeat as observeParentBeat,
  readyProven,
  regrace,
  takeHeldBeat,
  windowReason,
} from './freshness.js';
import { claimResult, observeManifest } from './manifest.js';
import { cover, enter, event, holdNote, liveState, R, sameReason, secs } from './transitions.js';
import type { Action, Beat, Reason, CheckpointInfo, Decision, Input, ParentPolicy, ParentState } from './types.js';

/** A live read unanswered for this long is asked again (the adapter's own timeout is shorter). */
export const CONFIRM_TIMEOUT_MS = 10_000;
/** After a live read could not reach the api-server, ask again after this long. */
export const CONFIRM_RETRY_MS = 5_000;
/** Bound on state-machine steps per call; each step changes state, so a few suffice. */
const MAX_STEPS = 8;

const API_CHANNELS = ['lease', 'annotation'] as const;

export interface InitialStateArgs {
  namespace: string;
  key: string;
  policy: ParentPolicy;
  now: number;
  checkpoint?: CheckpointInfo;
  /** Whether an api-server answers the agent; undefined: the agent has not heard yet (its first probe is out). */
  apiReachable?: boolean;
  /** A hand-over the agent was in when it stopped (persisted by the caller), to be finished. */
  handover?: RecoveredHandover;
  /**
   * The node rebooted since the agent last ran (its recorded boot id differs). A reboot ended every
   * process of the last boot, so when no api-server answers a parent whose absence is the failure
   * (`whenApiUnreachable: activate`) has nothing to wait for: no startupGrace. Only once the agent
   * knows no api-server answers (`apiReachable: false`, or its first verdict later): an agent that
   * starts late in the boot (restarted, or slow) may find parents the kubelet already started in
   * this boot with an api-server's word, and their beats must get their window (random seed 3779).
   */
  rebooted?: boolean;
  /**
   * The hand-over record was written under an earlier boot id: a boot voids deadlines. The hand-over
   * it describes was with processes that no longer exist, so its deadline, attempts and back-off do
   * not carry over (a hand-over in progress is not resumed: the parent is judged afresh, and the
   * reboot rule covers it); a known-bad verdict keeps its strikes but starts a full probation.
   */
  recordFromEarlierBoot?: boolean;
}

/**
 * What the caller persists about a hand-over in progress, so a restart keeps its deadline, and
 * about a known-bad spec, so a restart does not hand over to it again.
 */
export interface RecoveredHandover {
  /** Time left until the deadline (may be negative: already passed). */
  remainingMs: number;
  attempts: number;
  nextBackoffMs: number;
  /** false: no hand-over is in progress, the record only keeps `knownBad` (absent: true). */
  inProgress?: boolean;
  /**
   * The known-bad verdict (ParentState.knownBad) when the record was written: its strikes, and the
   * time its probation still had to run (absent: an older record; a full probation then).
   */
  knownBad?: { specHash: string; podUid: string; strikes?: number; remainingMs?: number };
}

/**
 * A persisted deadline is kept on the wall clock, which can step (NTP, a dead RTC after a
 * reboot): never wait longer than one full handoverTimeout for it.
 */
function clampRemaining(remainingMs: number, p: ParentPolicy): number {
  return Math.min(p.handoverTimeoutMs, Math.max(0, Number.isFinite(remainingMs) ? remainingMs : 0));
}

/** The persistable part of a hand-over in progress (null when not handing over). */
export function handoverToPersist(s: ParentState, now: number): RecoveredHandover | null {
  const kb = s.knownBad;
  const knownBad = kb ? { knownBad: { specHash: kb.specHash, podUid: kb.podUid, strikes: kb.strikes, remainingMs: Math.max(0, kb.until - now) } } : {};
  if (s.state === 'HandingOver' && s.handover.deadline !== null) {
    return { remainingMs: s.handover.deadline - now, attempts: s.handover.attempts, nextBackoffMs: s.handover.nextBackoffMs, ...knownBad };
  }
  if (s.knownBad) return { remainingMs: 0, attempts: s.handover.attempts, nextBackoffMs: s.handover.nextBackoffMs, inProgress: false, ...knownBad };
  return null;
}

/** A parent as the agent first knows it after starting: grace running, nothing seen yet. */
export function initialState(a: InitialStateArgs): ParentState {
  const checkpoint = a.checkpoint ?? { stored: false, active: false, specHash: null };
  const recovered = checkpoint.active;
  const resumed = !recovered && checkpoint.stored && a.handover !== undefined && a.handover.inProgress !== false && a.recordFromEarlierBoot !== true;
  const rebootRule = a.rebooted === true && a.policy.whenApiUnreachable === 'activate' && a.apiReachable !== true;
  const noGrace = rebootRule && a.apiReachable === false;
  return {
    id: `${a.namespace}/${a.key}`,
    namespace: a.namespace,
    key: a.key,
    policy: a.policy,
    state: recovered ? 'Active' : resumed ? 'HandingOver' : 'Pending',
    since: a.now,
    reason: recovered
      ? R('RecoveredActive', 'the checkpoint was active when the agent started')
      : resumed
        ? R('RecoveredHandover', 'a hand-over was in progress when the agent stopped; its deadline still holds')
        : noGrace
          ? R('AgentStarted', 'the node rebooted and no api-server answers; no grace (whenApiUnreachable: activate)')
          : R('AgentStarted', 'waiting for a first beat'),
    graceUntil: noGrace ? a.now : a.now + a.policy.startupGraceMs,
    ...(rebootRule && !noGrace && !recovered && !resumed ? { graceEndsIfUnreachable: true } : {}),
    lastChangeAt: null,
    lastLocalChangeAt: null,
    phase: null,
    holderUid: null,
    startingSince: null,
    rounds: [],
    seen: {},
    declaredIntervalMs: null,
    windowNotedMs: null,
    checkpointPhase: null,
    checkpoint: { ...checkpoint },
    apiReachable: a.apiReachable ?? false,
    pod: null,
    unscheduledSince: null,
    confirm: null,
    inflight: {},
    capturingHash: null,
    handover: resumed
      ? {
          attempts: a.handover!.attempts,
          deadline: a.now + clampRemaining(a.handover!.remainingMs, a.policy),
          notBefore: a.now,
          nextBackoffMs: a.handover!.nextBackoffMs,
        }
      : { attempts: 0, deadline: null, notBefore: a.now, nextBackoffMs: a.policy.handoverBackoff.initialMs },
    knownBad: a.handover?.knownBad ? recoveredVerdict(a.handover.knownBad, a.now, a.recordFromEarlierBoot === true, PROBATION[a.policy.handover]) : null,
    exitWatch: { notHolder: null, ready: false, base: null, since: null, readyAfterMs: null },
    overlapFallback: null,
    checkpointHolder: null,
    retry: {},
    beatTrust: emptyTrust(),
    hang: emptyHang(),
  };
}

function copy(s: ParentState): ParentState {
  return {
    ...s,
    policy: s.policy,
    seen: { ...s.seen },
    checkpoint: { ...s.checkpoint },
    inflight: { ...s.inflight },
    retry: { ...s.retry },
    handover: { ...s.handover },
    confirm: s.confirm ? { ...s.confirm } : null,
    pod: s.pod ? { ...s.pod } : null,
    rounds: [...s.rounds],
    exitWatch: { ...s.exitWatch, base: s.exitWatch.base ? { ...s.exitWatch.base } : null },
    overlapFallback: s.overlapFallback ? { ...s.overlapFallback } : null,
    beatTrust: copyTrust(s.beatTrust),
    hang: copyHang(s.hang),
  };
}

export { beatFingerprint, changedBeat, judgingWindowMs, WINDOW_INTERVALS } from './freshness.js';

export function decide(prev: ParentState, input: Input, now: number): Decision {
  const s = copy(prev);
  const actions: Action[] = [];
  observe(s, input, now);
  if (input.type === 'manifest') observeManifest(s, input.file, now, actions);
  claimResult(prev, s, input, now, actions);
  if (input.type === 'fenced') fencedEvent(s, input, actions);
  if (s.beatRefused) actions.push(s.beatRefused);
  delete s.beatRefused;
  noteWindow(s, actions);
  for (let i = 0; i < MAX_STEPS; i++) if (!step(s, now, actions)) break;
  windowReason(s, actions);
  reconcile(s, now, actions);
  return { state: s, actions, wakeAt: wakeAt(s, now) };
}

// ---- observing: inputs change what the core knows, never what it does ----

function observe(s: ParentState, input: Input, now: number): void {
  switch (input.type) {
    case 'tick':
      return;
    case 'beat':
      observeBeat(s, input.beat, now);
      return;
    case 'confirmed':
      if (input.outcome === 'changed') {
        const changedBefore = s.lastChangeAt;
        observeBeat(s, input.beat, now);
        // A change that is not the parent's own beat (refused, or older than one counted) leaves
        // the silence as it was: the read found nothing new from the parent.
        if (s.confirm && s.lastChangeAt === changedBefore && s.confirm.result === 'pending') s.confirm = { since: s.confirm.since, result: 'unchanged' };
        else if (s.confirm) s.confirm = null;
      } else if (s.confirm?.result === 'pending') {
        // Only an answer to the question still open counts; a late answer to an old one does not.
        s.confirm = { since: input.outcome === 'unavailable' ? now : s.confirm.since, result: input.outcome };
      }
      return;
    case 'api':
      if (s.graceEndsIfUnreachable) {
        delete s.graceEndsIfUnreachable;
        // The reboot rule's evidence (initialState): the agent's first look found no api-server.
        if (!input.reachable && s.state === 'Pending' && s.lastChangeAt === null) {
          s.graceUntil = Math.min(s.graceUntil, now);
          s.reason = R('AgentStarted', 'the node rebooted and no api-server answers; no grace (whenApiUnreachable: activate)');
        }
      }
      if (input.reachable === s.apiReachable) return;
      // A fresh start after the api-server returns: watches re-list, beats need a window to show.
      if (input.reachable) s.graceUntil = Math.max(s.graceUntil, now + s.policy.startupGraceMs);
      s.apiReachable = input.reachable;
      // Exits reported after an outage may have happened before the copy shared its ports.
      s.exitWatch.base = null;
      // The api-server's word on scheduling is only trusted while it can be heard, and the clock
      // towards GC starts again after any outage.
      s.unscheduledSince = null;
      return;
    case 'schedulingUnknown':
      delete s.inflight.collect;
      s.unscheduledSince = null;
      return;
    case 'pod': {
      if (!s.apiReachable) return;
      s.pod = input.pod ? { ...input.pod } : null;
      const held = takeHeldBeat(s);
      if (held) observeBeat(s, held, now);
      const before = s.exitWatch.base;
      const exited = exitedBesideSharingCheckpoint(s, now);
      if (exited === 'other spec' && before !== null) {
        // Exits of another spec are counted; the verdict comes at OVERLAP_EXITS_FOR_VERDICT (probation.ts).
        s.exitWatch.exits = (s.exitWatch.exits ?? 0) + (s.pod!.restarts! - before.restarts);
        if (s.exitWatch.exits >= OVERLAP_EXITS_FOR_VERDICT) {
          s.knownBad = strike(s.knownBad, s.pod!, now, PROBATION.overlap);
          s.exitWatch.exits = 0;
        }
      }
      if (exited === 'own spec' && s.overlapFallback === null) s.overlapFallback = { announced: false };
      s.exitWatch.base = s.exitWatch.ready && s.pod !== null && s.pod.restarts !== undefined ? { uid: s.pod.uid, restarts: s.pod.restarts } : null;
      // A new spec is a new candidate: the verdict on the old one does not carry over.
      if (input.pod && s.knownBad !== null && input.pod.specHash !== s.knownBad.specHash) s.knownBad = null;
      if (input.pod) s.unscheduledSince = null;
      else s.unscheduledSince ??= now;
      return;
    }
    case 'policy':
      regrace(s, input.policy, now);
      if (s.handover.nextBackoffMs > input.policy.handoverBackoff.maxMs) s.handover.nextBackoffMs = input.policy.handoverBackoff.maxMs;
      s.policy = input.policy;
      return;
    case 'captured':
      succeeded(s, 'capture');
      s.capturingHash = null;
      s.checkpoint = { ...s.checkpoint, stored: true, specHash: input.specHash };
      return;
    case 'activated':
      succeeded(s, 'activate');
      s.checkpoint = { ...s.checkpoint, active: true, exclusive: input.exclusive === true };
      s.exitWatch = { notHolder: s.checkpointHolder, ready: false, base: null, since: now, readyAfterMs: null };
      copyRestarted(s.hang);
      return;
    case 'retired':
      succeeded(s, 'retire');
      s.checkpoint = { ...s.checkpoint, active: false, exclusive: false };
      s.exitWatch = { notHolder: s.checkpointHolder, ready: false, base: null, since: null, readyAfterMs: null };
      copyRestarted(s.hang);
      return;
    case 'fenced':
      succeeded(s, 'fence');
      if (s.hang.fence?.podUid === input.podUid) s.hang.fence.killed = input.killed;
      if (input.killed > 0) {
        // The hung process is gone; the kubelet restarts it. Its sidecar's next rounds say how it
        // does, and it gets a fresh start to be seen again, as after an agent restart. Without a
        // copy serving (release), it must be Ready within a hand-over window, as after a retire.
        s.hang.since = null;
        s.hang.rounds = 0;
        s.graceUntil = Math.max(s.graceUntil, now + s.policy.startupGraceMs);
        if (!s.checkpoint.active) s.hang.recoverBy = now + handoverWindowMs(s.policy, 1);
      }
      return;
    case 'collected':
      succeeded(s, 'collect');
      s.checkpoint = { stored: false, active: false, specHash: null };
      return;
    case 'actionFailed': {
      const a = failed(s, input, now);
      if (a === 'capture') s.capturingHash = null;
      if (a === 'fence') s.hang.fence = null; // asked again after the action's back-off
      return;
    }
  }
}

/**
 * An exit of the checkpoint's own spec beside its port-sharing copy reads as "these ports are not
 * shared" only if its run lasted at most the copy's own time to its first Ready beat plus this
 * much: the kubelet reports a run in whole seconds, and starts vary.
 */
export const OWN_SPEC_BIND_SLACK_MS = 5_000;

/**
 * An overlap parent's container exited while it started beside its active checkpoint: the pod here
 * is the one seen before, its restart count rose since a copy that shares the ports was seen
 * Ready (exitWatch) and it has not reported Ready. With port sharing the checkpoint cannot have
 * kept it from its ports, so the exit is the spec's own: for a spec other than the checkpoint's, a
 * verdict ('other spec'), as a failed hand-over is for `release`; for the checkpoint's own spec,
 * which was Ready, a sign that the ports are not shared after all ('own spec': overlapFallback).
 * Exits while an exclusive copy ran or drained, or reported after an outage, are not counted.
 */
function exitedBesideSharingCheckpoint(s: ParentState, now: number): 'other spec' | 'own spec' | null {
  const pod = s.pod;
  const base = s.exitWatch.base;
  if (s.policy.handover !== 'overlap' || s.state !== 'Active' || !s.checkpoint.active || s.checkpoint.exclusive === true) return null;
  if (pod === null || base === null || pod.uid !== base.uid || pod.restarts === undefined) return null;
  // A container lost with its node (reboot) is restarted with the count raised: not an exit here.
  if (pod.restarts <= base.restarts || s.phase === 'Ready' || pod.lastExitUnknown === true) return null;
  // The checkpoint's own spec was Ready: its exit says "ports not shared" only if it came within
  // the time that spec, as the copy, took to be Ready (a server binds before it is Ready), as a
  // failed bind does. A longer run had its ports and failed for another reason (found on the real
  // node: a self-hosted kube-apiserver beside its copy after a power cycle, exit 255 after 61 s,
  // its copy Ready within seconds); the kubelet restarts it and the overlap stands.
  if (pod.specHash === s.checkpoint.specHash) {
    const limit = s.exitWatch.readyAfterMs === null ? null : s.exitWatch.readyAfterMs + OWN_SPEC_BIND_SLACK_MS;
    return pod.lastExitRanMs === undefined || limit === null || pod.lastExitRanMs <= limit ? 'own spec' : null;
  }
  // Another spec's exits are counted towards a verdict (observe), not while its verdict holds.
  return holdsPod(s.knownBad, pod, now) ? null : 'other spec';
}

/** A beat of the parent (freshness.ts) or of its checkpoint's copy. */
function observeBeat(s: ParentState, b: Beat, now: number): void {
  if (b.role === 'checkpoint') {
    s.checkpointPhase = b.phase;
    s.checkpointHolder = b.holderUid;
    if (s.checkpoint.active && b.holderUid !== s.exitWatch.notHolder) observeCopyBeat(s.hang, b.phase === 'Ready', now);
    // A copy started from the manifest as last written, serving: from now on exits count.
    if (b.phase === 'Ready' && !s.exitWatch.ready && b.holderUid !== s.exitWatch.notHolder && s.checkpoint.active && s.checkpoint.exclusive !== true) {
      s.exitWatch.ready = true;
      s.exitWatch.readyAfterMs = s.exitWatch.since === null ? null : now - s.exitWatch.since;
      // The pod as last listed is the base (not after an outage: its count may be older than the copy).
      if (s.apiReachable && s.pod?.restarts !== undefined) s.exitWatch.base = { uid: s.pod.uid, restarts: s.pod.restarts };
    }
    return;
  }
  observeParentBeat(s, b, now);
}

/**
 * The hand-over window: handoverTimeout for the first two attempts in a row, then doubling per
 * attempt, capped at handoverBackoff.max. A parent in the kubelet's crash-loop backoff restarts on
 * the kubelet's schedule (up to 5 min apart), not ours, and a fixed window can keep missing those
 * restarts: the simulator found `handoverTimeout: 1m` never recovering in 6 of 20 master-reboot
 * seeds. Growing from the first attempt fixed that but lengthened typical recoveries (most
 * succeed by the second attempt), hence the two attempts at the configured value.
 */
export const HANDOVER_ATTEMPTS_BEFORE_GROWTH = 2;

export function handoverWindowMs(p: ParentPolicy, attempt: number): number {
  const grown = p.handoverTimeoutMs * 2 ** Math.max(0, attempt - HANDOVER_ATTEMPTS_BEFORE_GROWTH);
  return Math.min(Math.max(p.handoverTimeoutMs, p.handoverBackoff.maxMs), grown);
}

/**
 * A deterministic spread of 0–25% on a hand-over pause, from the parent id and the attempt: the
 * core stays pure, and the hand-over schedule does not fall into step with the kubelet's own
 * doubling crash-loop backoff (which made some recoveries in the simulator take many rounds).
 */
export function handoverJitter(id: string, attempt: number): number {
  let h = 2166136261;
  for (const c of `${id}#${attempt}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return ((h >>> 0) % 1000) / 4000;
}

// ---- deciding: one state-machine step; returns whether the state changed ----

function usesApiChannels(p: ParentPolicy): boolean {
  return p.channels.some((c) => (API_CHANNELS as readonly string[]).includes(c));
}

function gcDue(s: ParentState, now: number): boolean {
  return s.apiReachable && s.pod === null && s.unscheduledSince !== null && now - s.unscheduledSince >= s.policy.gcGraceMs;
}

function step(s: ParentState, now: number, actions: Action[]): boolean {
  const p = s.policy;
  const isFresh = fresh(s, now);
  const graceOver = now >= s.graceUntil;

  // CheckpointCollected is said once the collection is done (manifest.ts): its live read may cancel it.
  if (s.state !== 'Orphaned' && gcDue(s, now)) {
    return enter(s, 'Orphaned', R('NotScheduled', 'no pod for this parent key on this node'), now, actions);
  }

  switch (s.state) {
    case 'Pending':
    case 'Healthy':
    case 'Starting': {
      const hung = hungPod(s);
      if (hung !== null && s.phase !== 'Stopping') {
        const covered = coverHung(s, hung, now, actions);
        if (covered !== null) return covered;
      }
      const recoverBy = s.hang.recoverBy ?? null;
      if (recoverBy !== null && now >= recoverBy && s.phase !== 'Ready') {
        s.hang.recoverBy = null;
        return cover(
          s,
          'FencedNotBack',
          `the fenced parent did not report Ready within ${Math.round((recoverBy - (s.hang.fence?.at ?? recoverBy)) / 1000)}s of its fence`,
          now,
          actions,
        );
      }
      return judgeLive(s, now, actions);
    }
    case 'Silent': {
      const hung = hungPod(s);
      if (hung !== null && s.phase !== 'Stopping') {
        const covered = coverHung(s, hung, now, actions);
        if (covered !== null) return covered;
      }
      if (isFresh && s.lastChangeAt! >= s.since) {
        if (s.phase === 'Stopping') return cover(s, 'ParentStopping', 'the parent reported a deliberate stop', now, actions);
        return enter(s, liveState(s.phase), R('BeatResumed', 'a changed beat arrived'), now, actions);
      }
      if (!graceOver) return false;
      // Nothing to cover with: say so now rather than after a live read.
      if (!s.checkpoint.stored) return cover(s, 'NoCheckpoint', 'silent', now, actions);
      if (!s.apiReachable) {
        if (p.whenApiUnreachable === 'activate')
          return cover(s, 'ApiUnreachable', 'silent and the api-server is unreachable (whenApiUnreachable: activate)', now, actions);
        holdNote(s, R('HoldApiUnreachable', 'silent, but the api-server is unreachable and the policy says hold'), actions);
        return false;
      }
      if (!usesApiChannels(p)) return cover(s, 'Silent', 'no local beat changed within the window', now, actions);
      if (s.confirm === null || (s.confirm.result === 'pending' && now - s.confirm.since >= CONFIRM_TIMEOUT_MS)) {
        s.confirm = { since: now, result: 'pending' };
        actions.push({ type: 'confirm', channels: p.channels.filter((c) => c !== 'local') });
        return false;
      }
      if (s.confirm.result === 'unchanged') return cover(s, 'SilenceConfirmed', 'no beat changed within the window, confirmed by a live read', now, actions);
      if (s.confirm.result === 'unavailable') {
        if (p.whenApiUnreachable === 'activate')
          return cover(s, 'ApiUnreachable', 'the live read could not reach the api-server (whenApiUnreachable: activate)', now, actions);
        if (now - s.confirm.since >= CONFIRM_RETRY_MS) s.confirm = null; // ask again on the next step
        return s.confirm === null ? step(s, now, actions) : false;
      }
      return false;
    }
    case 'Active': {
      const hung = hungPod(s);
      // Overlap: only beside a copy proven Ready; release: the hung process holds the whole port.
      // (A hung parent is not fresh: its run of unanswered rounds began after its last answered beat.)
      if (hung !== null && (p.handover === 'release' || s.hang.copyReadyAt !== null)) requestFence(s, hung, now, actions);
      if (!freshSinceEntered(s, now)) return false;
      if (s.phase === 'Ready' && !readyProven(s)) {
        holdNote(
          s,
          R('UnprobedReady', "the parent's Ready is not probed (--probe none): the checkpoint stays until the api-server reports the pod Ready"),
          actions,
        );
        return false;
      }
      if (s.phase === 'Ready') {
        event(actions, 'Normal', 'CheckpointRetired', `${s.id}: the parent reports Ready again; retiring the checkpoint`);
        resetHandover(s);
        return enter(s, 'Healthy', R('ParentReady', 'the parent reports Ready; checkpoint retired'), now, actions);
      }
      // Overlap: the parent binds beside the checkpoint (shared ports), so nothing is retired until
      // it proves itself Ready (above). A parent that never gets there leaves the checkpoint serving;
      // one whose spec is known-bad finds it holding the ports without sharing (reconcile).
      if (p.handover === 'overlap' && s.overlapFallback === null) {
        if (knownBad(s, now)) announceKnownBad(s, now, actions);
        else probationEnded(s, now, actions);
        return false;
      }
      if (s.overlapFallback && !s.overlapFallback.announced) {
        s.overlapFallback.announced = true;
        event(
          actions,
          'Warning',
          'OverlapUnavailable',
          `${s.id}: pod ${s.pod?.name ?? '?'} exited while starting beside its port-sharing checkpoint although it runs the checkpoint's own spec, so its ports are not shared (is --permit-port-sharing set?); handing over by release until it is Ready`,
        );
        holdNote(
          s,
          R('OverlapUnavailable', "the parent's own spec could not start beside its checkpoint: its ports are not shared; handing over by release"),
          actions,
        );
      }
      if (s.phase === 'Starting' && knownBad(s, now)) {
        announceKnownBad(s, now, actions);
        return false;
      }
      probationEnded(s, now, actions);
      if (s.phase === 'Starting' && now >= s.handover.notBefore) {
        s.handover.attempts += 1;
        const windowMs = handoverWindowMs(p, s.handover.attempts);
        s.handover.deadline = now + windowMs;
        event(
          actions,
          'Normal',
          'HandoverStarted',
          `${s.id}: the parent is starting; retiring the checkpoint so it can take its ports (attempt ${s.handover.attempts}, must be Ready within ${Math.round(windowMs / 1000)}s)`,
        );
        return enter(s, 'HandingOver', R('HandoverStarted', `attempt ${s.handover.attempts}`), now, actions);
      }
      return false;
    }
    case 'HandingOver': {
      if (freshSinceEntered(s, now) && s.phase === 'Ready' && readyProven(s)) {
        event(actions, 'Normal', 'HandoverSucceeded', `${s.id}: the parent is Ready after ${s.handover.attempts} hand-over attempt(s)`);
        resetHandover(s);
        return enter(s, 'Healthy', R('HandedOver', 'the parent is Ready'), now, actions);
      }
      if (s.handover.deadline !== null && now >= s.handover.deadline) {
        const backoff = s.handover.nextBackoffMs;
        // Only a spec other than the checkpoint's is judged: the copy's own spec has been Ready.
        const bad = s.pod !== null && s.pod.specHash !== s.checkpoint.specHash ? s.pod : null;
        if (bad) {
          s.knownBad = strike(s.knownBad, bad, now, PROBATION[p.handover]);
          event(
            actions,
            'Warning',
            'KnownBadSpec',
            `${s.id}: pod ${bad.name} (spec ${bad.specHash}) failed its hand-over (strike ${s.knownBad.strikes}); rollout held: next try ${nextTry(s.knownBad, now)}, unless the spec changes or reports Ready`,
          );
        }
        s.handover.deadline = null;
        s.handover.notBefore = now + Math.round(backoff * (1 + handoverJitter(s.id, s.handover.attempts)));
        s.handover.nextBackoffMs = Math.min(p.handoverBackoff.maxMs, backoff * 2);
        event(
          actions,
          'Warning',
          'HandoverFailed',
          `${s.id}: the parent did not become Ready in its hand-over window; re-activating the checkpoint, next hand-over in ${Math.round(backoff / 1000)}s`,
        );
        return enter(s, 'Active', R('HandoverFailed', `not Ready by the deadline; next attempt in ${Math.round(backoff / 1000)}s`), now, actions);
      }
      return false;
    }
    case 'Orphaned': {
      if (s.pod !== null) {
        s.graceUntil = Math.max(s.graceUntil, now + p.startupGraceMs);
        return enter(s, 'Pending', R('Rescheduled', 'the api-server has a pod for this parent here again'), now, actions);
      }
      // A collection rests on the api-server's word, heard without a break for gcGrace. Lost
      // before the files are gone (an outage, a failed watch, a live read that failed or found a
      // pod): cancel, keep the copy, and count the grace again from the next list.
      if ((s.checkpoint.stored || s.checkpoint.active) && (!s.apiReachable || s.unscheduledSince === null)) {
        s.graceUntil = Math.max(s.graceUntil, now + p.startupGraceMs);
        event(
          actions,
          'Warning',
          'CollectionCancelled',
          `${s.id}: the api-server's word that no pod is scheduled here was lost before the checkpoint was removed; keeping it, the grace starts again`,
        );
        // A running checkpoint keeps running (it may be what serves the api-server right now).
        return enter(
          s,
          s.checkpoint.active ? 'Active' : 'Pending',
          R('CollectionCancelled', 'scheduling unknown (api-server unreachable, watch failed or a live read disagreed)'),
          now,
          actions,
        );
      }
      return false;
    }
  }
}

/**
 * The parent's own sidecar says its process has stopped answering (fence.ts). Overlap: activate
 * the checkpoint at once (the fence follows once the copy is Ready beside the hung process).
 * Release: the hung process holds the whole port, no copy could bind: fence it, and let the
 * kubelet restart it; the ordinary rules cover it if it does not come back.
 */
function coverHung(s: ParentState, podUid: string, now: number, actions: Action[]): boolean | null {
  const secsHung = secs(now - s.hang.since!.at + (s.declaredIntervalMs ?? s.policy.intervalMs));
  if (s.policy.handover === 'overlap') {
    return cover(
      s,
      'ParentHung',
      `the parent's process holds its port but has not answered its sidecar's probe for ${s.hang.rounds} rounds (~${secsHung})`,
      now,
      actions,
    );
  }
  requestFence(s, podUid, now, actions);
  // While the fence is out, wait for its answer; once it failed (retried on the action back-off) or
  // found nothing to stop, the ordinary rules judge the parent (null): a hang must never keep the
  // silence rules from covering it.
  return s.hang.fence !== null && s.hang.fence.podUid === podUid && s.hang.fence.killed === null ? false : null;
}

/** Ask for the fence of pod `podUid` (once per FENCE_REPEAT_MS, after the action back-off when one failed). */
function requestFence(s: ParentState, podUid: string, now: number, actions: Action[]): void {
  if (!fenceAllowed(s.hang, podUid, now) || !due(s, 'fence', now)) return;
  s.hang.fence = { podUid, at: now, killed: null };
  inFlight(s, 'fence', now);
  const why = R(
    'ParentHung',
    `pod ${podUid}'s process holds its port but has not answered its sidecar's probe for ${s.hang.rounds} rounds; fencing it${s.policy.handover === 'overlap' ? ' (the checkpoint serves)' : ' (the kubelet restarts it)'}`,
  );
  actions.push({ type: 'fence', podUid, reason: why });
  holdNote(s, why, actions);
}

/** A fence's result, claimed once it is known: a Warning Event when a process was stopped. */
function fencedEvent(s: ParentState, input: Extract<Input, { type: 'fenced' }>, actions: Action[]): void {
  if (input.killed > 0) {
    event(
      actions,
      'Warning',
      'ParentFenced',
      `${s.id}: pod ${input.podUid} held its port without answering; its main process was stopped (${input.detail}) so ${s.policy.handover === 'overlap' ? 'the checkpoint serves alone until the kubelet restarts it' : 'the kubelet restarts it on a free port'}`,
    );
    holdNote(s, R('ParentFenced', `pod ${input.podUid}: ${input.detail}`), actions);
  } else {
    holdNote(s, R('FenceNotNeeded', `pod ${input.podUid}: ${input.detail}`), actions);
  }
}

function resetHandover(s: ParentState): void {
  s.handover = { attempts: 0, deadline: null, notBefore: 0, nextBackoffMs: s.policy.handoverBackoff.initialMs };
  s.knownBad = null;
  s.overlapFallback = null;
}

/**
 * A verdict reached outside a hand-over (an overlap parent's exit, or one restored after an agent
 * restart) is announced once, with the reason that also persists it (the transition).
 */
function announceKnownBad(s: ParentState, now: number, actions: Action[]): void {
  const kb = s.knownBad!;
  const sharing = sharesOnAfterVerdict(kb, s.exitWatch.readyAfterMs, OWN_SPEC_BIND_SLACK_MS);
  const ports = sharing ? ', its ports still shared (the spec fails as it starts: each try costs its share for a moment),' : ', its ports no longer shared,';
  const reason = R(
    'KnownBadSpec',
    `rollout held: the parent runs spec ${kb.specHash}, which ${s.policy.handover === 'overlap' ? 'exited while starting beside its port-sharing checkpoint' : 'failed a hand-over'} (strike ${kb.strikes}); the checkpoint keeps the node${s.policy.handover === 'overlap' ? ports : ''} until it is tried again ${nextTry(kb, kb.since)} after the verdict, or the spec changes, or the parent reports Ready`,
  );
  if (sameReason(s.reason, reason)) return;
  if (s.policy.handover === 'overlap' && kb.since === now) {
    event(
      actions,
      'Warning',
      'KnownBadSpec',
      `${s.id}: pod ${s.pod?.name ?? kb.podUid} (spec ${kb.specHash}) exited while starting beside the checkpoint, which shares its ports (strike ${kb.strikes}); rollout held: ${sharing ? 'the checkpoint keeps sharing them (the spec fails as it starts)' : 'the checkpoint holds them without sharing'}, next try ${nextTry(kb, now)}, unless the spec changes or reports Ready`,
    );
  }
  holdNote(s, reason, actions);
}

/** The parent here still runs the spec that failed, and its probation has not ended (see ParentState.knownBad). */
function knownBad(s: ParentState, now: number): boolean {
  return holdsPod(s.knownBad, s.pod, now);
}

/**
 * A probation that ended is said once (Event and reason): the held spec is tried again. Returns
 * whether it was said now.
 */
function probationEnded(s: ParentState, now: number, actions: Action[]): void {
  const kb = s.knownBad;
  if (kb === null || holds(kb, now) || s.reason.code !== 'KnownBadSpec') return;
  event(
    actions,
    'Normal',
    'ProbationEnded',
    `${s.id}: the probation of spec ${kb.specHash} ended after strike ${kb.strikes}; trying it again (a new failure holds it ${Math.round((2 * (kb.until - kb.since)) / 60_000)}m at most)`,
  );
  holdNote(s, R('ProbationEnded', `spec ${kb.specHash} is tried again after strike ${kb.strikes}`), actions);
}

// ---- reconciling: bring the node's files in line with the state (desired vs. reported) ----

function reconcile(s: ParentState, now: number, actions: Action[]): void {
  const ask = (kind: 'activate' | 'retire' | 'collect', reason: Reason) => askFor(s, kind, { type: kind, reason }, now, actions);
  if (s.state === 'Orphaned') {
    if ((s.checkpoint.stored || s.checkpoint.active) && s.apiReachable && s.unscheduledSince !== null) ask('collect', s.reason);
    return;
  }
  const wantActive = s.state === 'Active';
  // An overlap parent's known-bad spec must not bind beside the checkpoint: the manifest is
  // rewritten without port sharing (and back with it once the spec changes or the verdict ends).
  // Also while the pod is unknown (an agent restarted with a persisted verdict, before its first
  // pod list): sharing again would let the bad spec bind, and undoing it costs a copy's restart.
  const kb = s.knownBad;
  const exclusive =
    wantActive &&
    s.policy.handover === 'overlap' &&
    kb !== null &&
    holds(kb, now) &&
    (s.pod === null || s.pod.specHash === kb.specHash) &&
    !sharesOnAfterVerdict(kb, s.exitWatch.readyAfterMs, OWN_SPEC_BIND_SLACK_MS);
  const activate = (reason: Reason) =>
    askFor(s, 'activate', exclusive ? { type: 'activate', reason, exclusive: true } : { type: 'activate', reason }, now, actions);
  if (wantActive && !s.checkpoint.active && s.checkpoint.stored) activate(s.reason);
  else if (wantActive && s.checkpoint.active && s.checkpoint.stored && (s.checkpoint.exclusive === true) !== exclusive) activate(s.reason);
  if (!wantActive && s.checkpoint.active) ask('retire', s.reason);

  // Last known good: refresh the copy only from the pod whose own beat says Ready, and, when that
  // Ready was not probed (`--probe none`: the sidecar runs, nothing more), whose own Ready
  // condition the api-server reports True (issue 11: pods that never ran were kept as good).
  const pod = s.pod;
  if (
    s.state === 'Healthy' &&
    s.apiReachable &&
    pod !== null &&
    s.phase === 'Ready' &&
    readyProven(s) &&
    (s.holderUid === pod.uid || s.holderUid === '') &&
    s.checkpoint.specHash !== pod.specHash &&
    s.capturingHash !== pod.specHash &&
    due(s, 'capture', now)
  ) {
    inFlight(s, 'capture', now);
    s.capturingHash = pod.specHash;
    actions.push({
      type: 'capture',
      pod: { ...pod },
      reason: s.checkpoint.stored ? R('NewSpec', 'the Ready parent runs a new spec') : R('FirstCapture', 'first capture from a Ready parent'),
    });
  }
}

// ---- waking: the earliest time at which the answer could change without new input ----

function wakeAt(s: ParentState, now: number): number | null {
  const p = s.policy;
  const times: number[] = [];
  const add = (t: number | null | undefined) => {
    if (t !== null && t !== undefined && t > now) times.push(t);
  };
  for (const t of freshnessWakes(s)) add(t);
  if (s.unscheduledSince !== null) add(s.unscheduledSince + p.gcGraceMs);
  if (s.confirm && s.state === 'Silent') add(s.confirm.since + (s.confirm.result === 'pending' ? CONFIRM_TIMEOUT_MS : CONFIRM_RETRY_MS));
  if (s.state === 'Active') add(s.handover.notBefore);
  if (s.knownBad !== null) add(s.knownBad.until);
  if (s.hang.fence !== null && s.hang.since !== null) add(s.hang.fence.at + FENCE_REPEAT_MS);
  add(s.hang.recoverBy);
  add(s.handover.deadline);
  for (const t of actionWakes(s)) add(t);
  return times.length === 0 ? null : Math.min(...times);
}
