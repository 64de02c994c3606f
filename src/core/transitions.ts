// How a rule says what it decided: a transition (the state changes), a note (the reason changes
// while the state stays), an Event, or a cover (the checkpoint takes over). Every rule module
// speaks through these, so each transition carries its reason and each reason is said once.
//
// Pure: they change the ParentState they are given (decide() hands every rule its own copy) and
// append to the actions of the current decision.
import type { Action, ParentState, ParentStateName, Phase, Reason } from './types.js';

/** A reason as data: Kubernetes keeps the CamelCase reason and the human message apart. */
export function R(code: string, message: string): Reason {
  return { code, message };
}

export function sameReason(a: Reason, b: Reason): boolean {
  return a.code === b.code && a.message === b.message;
}

/** The reason changes while the state stays: a note (status REASON and the log), not a transition. */
export function holdNote(s: ParentState, reason: Reason, actions: Action[]): void {
  if (sameReason(s.reason, reason)) return;
  actions.push({ type: 'note', state: s.state, reason });
  s.reason = reason;
}

export function event(actions: Action[], eventType: 'Normal' | 'Warning', reason: string, message: string): void {
  actions.push({ type: 'event', eventType, reason, message });
}

/** Enter state `to`; always true, so a rule's step can `return enter(...)` ("the state changed"). */
export function enter(s: ParentState, to: ParentStateName, reason: Reason, now: number, actions: Action[]): true {
  actions.push({ type: 'transition', from: s.state, to, reason });
  // Every silence is confirmed afresh, and the live read means nothing outside Silent (SilentData).
  if (to === 'Silent' || s.state === 'Silent') s.confirm = null;
  // A run of Ready counts for a new spec's capture only within one Healthy stretch (last-known-good.ts).
  if (to !== 'Healthy') s.readySince = null;
  s.state = to;
  s.since = now;
  s.reason = reason;
  return true;
}

/**
 * The parent is down: cover it with its checkpoint (Active), or, with no copy stored, say once that
 * nothing can cover it (Silent, NoCheckpoint). Returns whether the state changed.
 */
export function cover(s: ParentState, why: string, message: string, now: number, actions: Action[]): boolean {
  if (!s.checkpoint.stored) {
    if (s.state === 'Silent' && s.reason.code === 'NoCheckpoint') return false;
    event(actions, 'Warning', 'NoCheckpoint', `${s.id} is down (${message}) but no checkpoint has been captured from a Ready pod; nothing can cover it`);
    if (s.state === 'Silent') {
      holdNote(s, R('NoCheckpoint', message), actions);
      return false;
    }
    return enter(s, 'Silent', R('NoCheckpoint', `${message}`), now, actions);
  }
  // CheckpointActivated is said once the manifest is written (manifest.ts), not here.
  return enter(s, 'Active', R(why, message), now, actions);
}

/**
 * The parent's own start failed (Starting past startTimeout, or not back after a fence): cover it,
 * and let the copy serve one hand-over back-off before the first hand-over. The Starting it goes on
 * reporting is the run that just failed, and a parent that cannot start while no api-server answers
 * (a kubelet that restarts nothing then) is started by the copy's service: retiring the copy at
 * once would retire the only api-server there is. (Outside Active, notBefore is never ahead of now.)
 */
export function coverFailedStart(s: ParentState, why: string, message: string, now: number, actions: Action[]): boolean {
  s.handover.notBefore = now + s.handover.nextBackoffMs;
  return cover(s, why, message, now, actions);
}

/** The state a fresh parent is in, by the phase of its beats. */
export function liveState(phase: Phase | null): ParentStateName {
  return phase === 'Ready' ? 'Healthy' : 'Starting';
}

/** Milliseconds as seconds with one decimal, for messages: `12.5s`. */
export const secs = (ms: number) => `${Math.round(ms / 100) / 10}s`;
