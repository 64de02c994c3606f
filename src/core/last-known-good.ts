// Last known good. The checkpoint is captured (or refreshed) only from the pod whose own beat says
// Ready, and, when that Ready was not probed (`--probe none`: the sidecar runs, nothing more),
// whose Ready condition the api-server reports True: a pod that never ran must not be kept as good.
// A bad rollout that never becomes Ready does not overwrite the copy that worked. A new spec
// replaces a stored copy only once it has been Ready through one window (`settled`): the copy
// is the node's last way back, and one Ready beat can be wrong (on a real kubelet a bad
// kube-apiserver exited in the middle of its sidecar's proof, whose other answers came from the
// checkpoint beside it; captured, the bad spec left the node with no api-server at all).
//
// Owns `ParentState.capturingHash` (the capture in flight) and the stored copy's spec hash.
// Pure: times are the observer's monotonic milliseconds.
import { due, inFlight, succeeded } from './actions.js';
import { judgingWindowMs, readyProven } from './freshness.js';
import { R } from './transitions.js';
import type { Action, ParentState } from './types.js';

/** A Healthy parent whose Ready pod runs a spec the copy does not hold yet: capture it. */
export function reconcileCapture(s: ParentState, now: number, actions: Action[]): void {
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
    settled(s, now) &&
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

/** A first capture at once; a new spec over a stored copy once Ready has held one window. */
function settled(s: ParentState, now: number): boolean {
  if (!s.checkpoint.stored) return true;
  const at = settlesAt(s);
  return at !== null && now >= at;
}

/** When the current Ready run will have held one window (null: not in one). */
function settlesAt(s: ParentState): number | null {
  return s.readySince === null ? null : s.readySince + judgingWindowMs(s);
}

/** When a new spec's Ready run has lasted long enough to be captured (a wake for the loop). */
export function captureWakes(s: ParentState): Array<number | null> {
  if (!s.checkpoint.stored || s.pod === null || s.checkpoint.specHash === s.pod.specHash) return [null];
  return [settlesAt(s)];
}

export function observeCaptured(s: ParentState, specHash: string): void {
  succeeded(s, 'capture');
  s.capturingHash = null;
  s.checkpoint = { ...s.checkpoint, stored: true, specHash };
}

/** A failed capture is asked again (after the action's back-off) for whatever spec is then Ready. */
export function captureFailed(s: ParentState): void {
  s.capturingHash = null;
}
