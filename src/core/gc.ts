// Garbage collection only with the api-server's word. A checkpoint is removed only when the
// api-server is reachable and has scheduled no pod for the parent key to this node for `gcGrace`,
// heard without a break: an outage, a failed watch, or a live read right before the collection
// that failed or found a pod cancels it, keeps the copy, and counts the grace again from the next
// list. Never while the api-server is unreachable: that is when a checkpoint matters most.
//
// Owns `ParentState.unscheduledSince` and the Orphaned state. Pure: times are the observer's
// monotonic milliseconds.
import { ask, succeeded } from './actions.js';
import { enter, event, R } from './transitions.js';
import type { Action, ParentState, PodInfo } from './types.js';

export function gcDue(s: ParentState, now: number): boolean {
  return s.apiReachable && s.pod === null && s.unscheduledSince !== null && now - s.unscheduledSince >= s.policy.gcGraceMs;
}

/** The api-server's word on this key here: a pod, or none (counted from the first list without one). */
export function observeScheduling(s: ParentState, pod: PodInfo | null, now: number): void {
  if (pod) s.unscheduledSince = null;
  else s.unscheduledSince ??= now;
}

/**
 * The word can no longer be trusted (an api-server outage or return, a failed pod watch, a live
 * read that disagreed): the clock towards GC starts again from the next list.
 */
export function schedulingLost(s: ParentState): void {
  s.unscheduledSince = null;
}

/** `schedulingUnknown`: as schedulingLost, and a collection not reported yet is not waited for. */
export function observeSchedulingUnknown(s: ParentState): void {
  delete s.inflight.collect;
  s.unscheduledSince = null;
}

export function observeCollected(s: ParentState): void {
  succeeded(s, 'collect');
  s.checkpoint = { stored: false, active: false, specHash: null };
}

/** Any state but Orphaned: no pod scheduled here for gcGrace makes the parent Orphaned. */
export function judgeScheduled(s: ParentState, now: number, actions: Action[]): boolean {
  // CheckpointCollected is said once the collection is done (manifest.ts): its live read may cancel it.
  if (s.state === 'Orphaned' || !gcDue(s, now)) return false;
  return enter(s, 'Orphaned', R('NotScheduled', 'no pod for this parent key on this node'), now, actions);
}

/** Orphaned: rescheduled (a pod again), or the collection cancelled when the api-server's word was lost. */
export function judgeOrphaned(s: ParentState, now: number, actions: Action[]): boolean {
  const p = s.policy;
  if (s.pod !== null) {
    s.graceUntil = Math.max(s.graceUntil, now + p.startupGraceMs);
    return enter(s, 'Pending', R('Rescheduled', 'the api-server has a pod for this parent here again'), now, actions);
  }
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

/** Orphaned with files left and the api-server's word standing: ask for the collection. */
export function reconcileCollect(s: ParentState, now: number, actions: Action[]): void {
  if ((s.checkpoint.stored || s.checkpoint.active) && s.apiReachable && s.unscheduledSince !== null)
    ask(s, 'collect', { type: 'collect', reason: s.reason }, now, actions);
}

/** When gcGrace runs out. */
export function gcWake(s: ParentState): number | null {
  return s.unscheduledSince === null ? null : s.unscheduledSince + s.policy.gcGraceMs;
}
