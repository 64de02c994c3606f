// The hand-over. When the parent's own beats return while its checkpoint is active: on Ready the
// checkpoint retires at once; on Starting (release) it retires and the parent gets a hand-over
// window to become Ready (it may be failing only because the copy held its ports). If it does not,
// the checkpoint is activated again and the next hand-over waits an exponentially growing back-off.
// Under overlap (overlap.ts) nothing retires until the parent is Ready beside the copy. A spec on
// probation is not handed over to (known-bad.ts). A hand-over in progress survives an agent
// restart through the record the caller persists (RecoveredHandover), within one boot.
//
// Owns `ParentState.handover` and the HandingOver state. Pure: times are the observer's monotonic
// milliseconds.
import { beatsOfDeletedPod, deletedPodReason } from './deletion.js';
import { freshSinceEntered, readyProven } from './freshness.js';
import { announceKnownBad, forgetVerdict, knownBad, probationEnded, strikeFailedHandover } from './known-bad.js';
import { announceFallback, forgetFallback, overlapStands } from './overlap.js';
import { handedBack, stopHandBack } from './redirect.js';
import { enter, event, holdNote, R } from './transitions.js';
import type { Action, ParentPolicy, ParentState } from './types.js';

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

/** The persistable part of a hand-over in progress, or of a standing verdict (null: neither). */
export function handoverToPersist(s: ParentState, now: number): RecoveredHandover | null {
  const kb = s.knownBad;
  const knownBad = kb ? { knownBad: { specHash: kb.specHash, podUid: kb.podUid, strikes: kb.strikes, remainingMs: Math.max(0, kb.until - now) } } : {};
  if (s.state === 'HandingOver' && s.handover.deadline !== null) {
    return { remainingMs: s.handover.deadline - now, attempts: s.handover.attempts, nextBackoffMs: s.handover.nextBackoffMs, ...knownBad };
  }
  if (s.knownBad) return { remainingMs: 0, attempts: s.handover.attempts, nextBackoffMs: s.handover.nextBackoffMs, inProgress: false, ...knownBad };
  return null;
}

/** The hand-over state of a parent the agent starts with: resumed from the record, or none. */
export function initialHandover(policy: ParentPolicy, now: number, resumed: RecoveredHandover | null): ParentState['handover'] {
  if (resumed === null) return { attempts: 0, deadline: null, notBefore: now, nextBackoffMs: policy.handoverBackoff.initialMs };
  return { attempts: resumed.attempts, deadline: now + clampRemaining(resumed.remainingMs, policy), notBefore: now, nextBackoffMs: resumed.nextBackoffMs };
}

/**
 * The hand-over window: handoverTimeout for the first two attempts in a row, then doubling per
 * attempt, capped at handoverBackoff.max. A parent in the kubelet's crash-loop back-off restarts on
 * the kubelet's schedule (up to 5 min apart), not ours, and a fixed window can keep missing those
 * restarts, so it grows; most hand-overs succeed by the second attempt, so the first two keep the
 * configured value and typical recoveries stay short.
 */
export const HANDOVER_ATTEMPTS_BEFORE_GROWTH = 2;

export function handoverWindowMs(p: ParentPolicy, attempt: number): number {
  const grown = p.handoverTimeoutMs * 2 ** Math.max(0, attempt - HANDOVER_ATTEMPTS_BEFORE_GROWTH);
  return Math.min(Math.max(p.handoverTimeoutMs, p.handoverBackoff.maxMs), grown);
}

/**
 * A deterministic spread of 0–25% on a hand-over pause, from the parent id and the attempt: the
 * core stays pure, and the hand-over schedule does not fall into step with the kubelet's own
 * doubling crash-loop back-off (in step, a recovery can take many rounds).
 */
export function handoverJitter(id: string, attempt: number): number {
  let h = 2166136261;
  for (const c of `${id}#${attempt}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return ((h >>> 0) % 1000) / 4000;
}

/** The parent is Healthy: attempts, back-off, verdict and overlap fallback start afresh. */
export function resetHandover(s: ParentState): void {
  s.handover = { attempts: 0, deadline: null, notBefore: 0, nextBackoffMs: s.policy.handoverBackoff.initialMs };
  forgetVerdict(s);
  forgetFallback(s);
}

/** A new policy: a back-off longer than its cap is cut to it. */
export function capBackoff(s: ParentState, next: ParentPolicy): void {
  if (s.handover.nextBackoffMs > next.handoverBackoff.maxMs) s.handover.nextBackoffMs = next.handoverBackoff.maxMs;
}

/**
 * Active, the parent's own beats back since: retire on a (proven) Ready; under overlap wait beside
 * it; else start a hand-over, unless the spec is on probation or the back-off runs.
 */
export function judgeReturn(s: ParentState, now: number, actions: Action[]): boolean {
  stopHandBack(s);
  if (!freshSinceEntered(s, now)) return false;
  if (beatsOfDeletedPod(s)) {
    holdNote(s, deletedPodReason(s), actions);
    return false;
  }
  if (s.phase === 'Ready' && !readyProven(s)) {
    holdNote(
      s,
      R('UnprobedReady', "the parent's Ready is not probed (--probe none): the checkpoint stays until the api-server reports the pod Ready"),
      actions,
    );
    return false;
  }
  if (s.phase === 'Ready' && s.policy.handover === 'redirect' && !handedBack(s, now, actions)) return false;
  if (s.phase === 'Ready') {
    stopHandBack(s);
    event(actions, 'Normal', 'CheckpointRetired', `${s.id}: the parent reports Ready again; retiring the checkpoint`);
    resetHandover(s);
    return enter(s, 'Healthy', R('ParentReady', 'the parent reports Ready; checkpoint retired'), now, actions);
  }
  // Overlap: the parent binds beside the checkpoint (shared ports), so nothing is retired until
  // it proves itself Ready (above). A parent that never gets there leaves the checkpoint serving;
  // one whose spec is known-bad finds it holding the ports without sharing (known-bad.ts).
  if (overlapStands(s)) {
    if (knownBad(s, now)) announceKnownBad(s, now, actions);
    else probationEnded(s, now, actions);
    return false;
  }
  announceFallback(s, actions);
  if (s.phase === 'Starting' && knownBad(s, now)) {
    announceKnownBad(s, now, actions);
    return false;
  }
  probationEnded(s, now, actions);
  if (s.phase === 'Starting' && now >= s.handover.notBefore) {
    s.handover.attempts += 1;
    const windowMs = handoverWindowMs(s.policy, s.handover.attempts);
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

/** HandingOver: Healthy once the parent is Ready; past the deadline, Active again with a longer back-off. */
export function judgeHandingOver(s: ParentState, now: number, actions: Action[]): boolean {
  const p = s.policy;
  if (freshSinceEntered(s, now) && s.phase === 'Ready' && readyProven(s)) {
    event(actions, 'Normal', 'HandoverSucceeded', `${s.id}: the parent is Ready after ${s.handover.attempts} hand-over attempt(s)`);
    resetHandover(s);
    return enter(s, 'Healthy', R('HandedOver', 'the parent is Ready'), now, actions);
  }
  if (s.handover.deadline === null || now < s.handover.deadline) return false;
  const backoff = s.handover.nextBackoffMs;
  strikeFailedHandover(s, now, actions);
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

/** When the back-off of an Active parent ends, or the hand-over's deadline passes. */
export function handoverWakes(s: ParentState): Array<number | null> {
  return [s.state === 'Active' ? s.handover.notBefore : null, s.handover.deadline];
}
