// No hand-over to a known-bad spec. A parent spec other than the checkpoint's (the last known good)
// that failed a `release` hand-over, or exited while starting beside a port-sharing checkpoint
// (`overlap`, overlap.ts), is on probation (probation.ts): until the verdict ends, the checkpoint
// keeps the node, and an overlap checkpoint stops sharing its ports unless the spec fails so fast
// as it starts that sharing costs less than the copy's restart (sharesOnAfterVerdict). The verdict
// ends at once when the api-server's pod here changes spec (a new candidate) or the parent reports
// Ready on its own; when its probation ends the spec is tried again, and that is said once.
//
// Owns `ParentState.knownBad` (persisted with the hand-over record: handover.ts). Pure: times are
// the observer's monotonic milliseconds.
import { OWN_SPEC_BIND_SLACK_MS } from './overlap.js';
import { holds, holdsPod, nextTry, PROBATION, sharesOnAfterVerdict, strike } from './probation.js';
import { event, holdNote, R, sameReason } from './transitions.js';
import type { Action, ParentState, PodInfo } from './types.js';

/** The parent here still runs the spec that failed, and its probation has not ended (see ParentState.knownBad). */
export function knownBad(s: ParentState, now: number): boolean {
  return holdsPod(s.knownBad, s.pod, now);
}

/** A new pod list: a new spec is a new candidate, the verdict on the old one does not carry over. */
export function observeSpec(s: ParentState, pod: PodInfo | null): void {
  if (pod && s.knownBad !== null && pod.specHash !== s.knownBad.specHash) s.knownBad = null;
}

/** The parent is Healthy: no verdict stands. */
export function forgetVerdict(s: ParentState): void {
  s.knownBad = null;
}

/**
 * A hand-over's deadline passed: a spec other than the checkpoint's gets a strike (the copy's own
 * spec has been Ready: its failure is a race with the kubelet's back-off, not a verdict).
 */
export function strikeFailedHandover(s: ParentState, now: number, actions: Action[]): void {
  const bad = s.pod !== null && s.pod.specHash !== s.checkpoint.specHash ? s.pod : null;
  if (!bad) return;
  s.knownBad = strike(s.knownBad, bad, now, PROBATION[s.policy.handover]);
  event(
    actions,
    'Warning',
    'KnownBadSpec',
    `${s.id}: pod ${bad.name} (spec ${bad.specHash}) failed its hand-over (strike ${s.knownBad.strikes}); rollout held: next try ${nextTry(s.knownBad, now)}, unless the spec changes or reports Ready`,
  );
}

/**
 * A verdict reached outside a hand-over (an overlap parent's exit, or one restored after an agent
 * restart) is announced once, with the reason that also persists it (the transition).
 */
export function announceKnownBad(s: ParentState, now: number, actions: Action[]): void {
  const kb = s.knownBad!;
  const sharing = sharesOnAfterVerdict(kb, s.exitWatch.readyAfterMs, OWN_SPEC_BIND_SLACK_MS, copySharing(s));
  const ports = sharing ? ', its ports still shared (the spec fails as it starts: each try costs its share for a moment),' : ', its ports no longer shared,';
  const reason = R(
    'KnownBadSpec',
    `rollout held: the parent runs spec ${kb.specHash}, which ${s.policy.handover === 'overlap' ? 'exited while starting beside its port-sharing checkpoint' : s.policy.handover === 'redirect' ? 'exited while starting behind the redirect to its checkpoint' : 'failed a hand-over'} (strike ${kb.strikes}); the checkpoint keeps the node${s.policy.handover === 'overlap' ? ports : ''} until it is tried again ${nextTry(kb, kb.since)} after the verdict, or the spec changes, or the parent reports Ready`,
  );
  if (sameReason(s.reason, reason)) return;
  if (s.policy.handover === 'redirect' && kb.since === now) {
    event(
      actions,
      'Warning',
      'KnownBadSpec',
      `${s.id}: pod ${s.pod?.name ?? kb.podUid} (spec ${kb.specHash}) exited while starting behind the redirect to the checkpoint (strike ${kb.strikes}); rollout held: the checkpoint serves the node's clients, next try ${nextTry(kb, now)}, unless the spec changes or reports Ready`,
    );
  }
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

/** A probation that ended is said once (Event and reason): the held spec is tried again. */
export function probationEnded(s: ParentState, now: number, actions: Action[]): void {
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

/**
 * An overlap parent's known-bad spec must not bind beside the checkpoint: the manifest is written
 * without port sharing (and back with it once the spec changes or the verdict ends). Also while the
 * pod is unknown (an agent restarted with a persisted verdict, before its first pod list): sharing
 * again would let the bad spec bind, and undoing it costs a copy's restart. Not when the spec fails
 * as fast as it starts, nor on a guess while a sharing copy runs (sharesOnAfterVerdict): a rewrite
 * would cost more than its tries.
 */
export function exclusiveCopy(s: ParentState, now: number): boolean {
  const kb = s.knownBad;
  return (
    s.state === 'Active' &&
    s.policy.handover === 'overlap' &&
    kb !== null &&
    holds(kb, now) &&
    (s.pod === null || s.pod.specHash === kb.specHash) &&
    !sharesOnAfterVerdict(kb, s.exitWatch.readyAfterMs, OWN_SPEC_BIND_SLACK_MS, copySharing(s))
  );
}

/** The copy runs now, from a manifest that shares its ports. */
function copySharing(s: ParentState): boolean {
  return s.checkpoint.active && s.checkpoint.exclusive !== true;
}

/** When the probation ends. */
export function verdictWake(s: ParentState): number | null {
  return s.knownBad === null ? null : s.knownBad.until;
}
