// The actions that change files on the node (capture, activate, retire, collect, fence), each in
// flight and retried on its own. A failed capture never delays a needed activation; a report that
// never comes (a lost report) does not stall the parent: the action is asked again.
//
// Owns `ParentState.inflight` and `ParentState.retry`. Pure: times are the observer's monotonic
// milliseconds.
import { backoffMs } from './backoff.js';
import type { Action, ActionKind, Input, ParentState } from './types.js';

/** After an actuator failure (disk full, read-only folder), retry that action after this long, doubling per failure in a row up to ACTION_RETRY_MAX_MS. */
export const ACTION_RETRY_MS = 5_000;
export const ACTION_RETRY_MAX_MS = 60_000;
/** An action whose result was never reported (a lost report) is asked again after this long. */
export const ACTION_TIMEOUT_MS = 60_000;

/** The action may be asked for now: none of its kind in flight (or its report is overdue), and no failure's back-off running. */
export function due(s: ParentState, kind: ActionKind, now: number): boolean {
  const at = s.inflight[kind];
  if (at !== undefined && now - at < ACTION_TIMEOUT_MS) return false;
  const retry = s.retry[kind];
  return retry === undefined || now >= retry.at;
}

/** Record the action as asked for now. */
export function inFlight(s: ParentState, kind: ActionKind, now: number): void {
  s.inflight[kind] = now;
}

/** Ask for the action (with `action` as its body) if it is due; returns whether it was asked. */
export function ask(s: ParentState, kind: ActionKind, action: Action, now: number, actions: Action[]): boolean {
  if (!due(s, kind, now)) return false;
  s.inflight[kind] = now;
  actions.push(action);
  return true;
}

/** The action's success was reported: nothing in flight, no back-off. */
export function succeeded(s: ParentState, kind: ActionKind): void {
  delete s.inflight[kind];
  delete s.retry[kind];
}

/**
 * An actuator failure: the action is asked again after a back-off that doubles per failure in a
 * row. Returns the kind that failed (null: not a file action), so its rule can forget its part.
 */
export function failed(s: ParentState, input: Extract<Input, { type: 'actionFailed' }>, now: number): ActionKind | null {
  const a = input.action;
  if (a !== 'capture' && a !== 'activate' && a !== 'retire' && a !== 'collect' && a !== 'fence' && a !== 'redirect') return null;
  delete s.inflight[a];
  const failures = (s.retry[a]?.failures ?? 0) + 1;
  s.retry[a] = { at: now + backoffMs(failures, { initialMs: ACTION_RETRY_MS, maxMs: ACTION_RETRY_MAX_MS }), failures };
  return a;
}

/** When a back-off ends or a report is overdue. */
export function actionWakes(s: ParentState): number[] {
  return [...Object.values(s.retry).map((r) => r.at), ...Object.values(s.inflight).map((at) => at + ACTION_TIMEOUT_MS)];
}
