// Silence must be confirmed. A parent whose beats stopped changing is Silent; before its checkpoint
// covers it, a stalled watch must not pass for a dead parent: when the parent writes to api
// channels and the api-server is reachable, the agent reads those channels live (`confirm`), and
// only a read that finds nothing new confirms the silence. `whenApiUnreachable` says what the
// api-server's absence means: `hold` never covers while it is unreachable, `activate` treats its
// absence as the failure and covers without a read.
//
// Owns `ParentState.confirm`, typed in the Silent variant only (types.ts SilentData): cleared on
// entering and leaving Silent and by any change in the parent's beats. Pure: times are the observer's monotonic milliseconds.
import { blindCover, KUBELET_BLIND_MESSAGE } from './boot.js';
import { fresh, replacedReason, successorOfStopping } from './freshness.js';
import { cover, enter, holdNote, liveState, R } from './transitions.js';
import type { Action, Input, ParentPolicy, ParentState, SilentState } from './types.js';

/** A live read unanswered for this long is asked again (the adapter's own timeout is shorter). */
export const CONFIRM_TIMEOUT_MS = 10_000;
/** After a live read could not reach the api-server, ask again after this long. */
export const CONFIRM_RETRY_MS = 5_000;

const API_CHANNELS = ['lease', 'annotation'] as const;

export function usesApiChannels(p: ParentPolicy): boolean {
  return p.channels.some((c) => (API_CHANNELS as readonly string[]).includes(c));
}

/**
 * The answer to a live read. `changedBefore` is `lastChangeAt` before a changed beat the read
 * brought was observed: a change that is not the parent's own beat (refused, or older than one
 * counted) leaves the silence as it was, the read found nothing new from the parent.
 */
export function answerLiveRead(s: ParentState, input: Extract<Input, { type: 'confirmed' }>, changedBefore: number | null, now: number): void {
  if (s.state !== 'Silent') return; // no question is open outside Silent (its confirm is null)
  if (input.outcome === 'changed') {
    if (s.confirm && s.lastChangeAt === changedBefore && s.confirm.result === 'pending') s.confirm = { since: s.confirm.since, result: 'unchanged' };
    else if (s.confirm) s.confirm = null;
  } else if (s.confirm?.result === 'pending') {
    // Only an answer to the question still open counts; a late answer to an old one does not.
    s.confirm = { since: input.outcome === 'unavailable' ? now : s.confirm.since, result: input.outcome };
  }
}

/**
 * Silent: back to Healthy or Starting when a beat changed since, covered on a deliberate stop; once
 * the grace is over, covered when the silence is confirmed (or cannot be, and the policy says
 * activate). Returns whether the state changed, or 'again' when a failed read's pause is over and
 * the step should run again (to ask anew).
 */
export function judgeSilence(s: SilentState, now: number, actions: Action[]): boolean | 'again' {
  const p = s.policy;
  if (fresh(s, now) && s.lastChangeAt! >= s.since) {
    if (s.phase === 'Stopping') {
      // As for a live parent (freshness.ts judgeLive): the Stopping of a pod being replaced is not
      // the parent's stop; the silence ended, and a successor that never beats is judged as usual.
      const next = successorOfStopping(s);
      if (next === null) return cover(s, 'ParentStopping', 'the parent reported a deliberate stop', now, actions);
      return enter(s, liveState(s.phase), replacedReason(next), now, actions);
    }
    return enter(s, liveState(s.phase), R('BeatResumed', 'a changed beat arrived'), now, actions);
  }
  if (now < s.graceUntil) return false;
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
  if (s.confirm.result === 'unchanged') {
    if (blindCover(s)) return cover(s, 'KubeletBlind', `${KUBELET_BLIND_MESSAGE}; confirmed by a live read`, now, actions);
    return cover(s, 'SilenceConfirmed', 'no beat changed within the window, confirmed by a live read', now, actions);
  }
  if (s.confirm.result === 'unavailable') {
    if (p.whenApiUnreachable === 'activate')
      return cover(s, 'ApiUnreachable', 'the live read could not reach the api-server (whenApiUnreachable: activate)', now, actions);
    if (now - s.confirm.since >= CONFIRM_RETRY_MS) s.confirm = null; // ask again on the next step
    return s.confirm === null ? 'again' : false;
  }
  return false;
}

/** When an unanswered read is asked again, or a failed one retried. */
export function silenceWake(s: ParentState): number | null {
  if (!s.confirm || s.state !== 'Silent') return null;
  return s.confirm.since + (s.confirm.result === 'pending' ? CONFIRM_TIMEOUT_MS : CONFIRM_RETRY_MS);
}
