// Hand-over by overlap: the parent starts beside its port-sharing checkpoint (SO_REUSEPORT), and
// the copy retires only once the parent reports Ready. With the ports shared the copy cannot have
// kept the parent from them, so an exit of the parent while it starts is the spec's own:
// - another spec than the copy's: counted, and OVERLAP_EXITS_FOR_VERDICT exits are a verdict
//   (known-bad.ts, probation.ts), as a failed hand-over is under `release`;
// - the copy's own spec, which was Ready, exiting as fast as a failed bind: the ports are not
//   shared after all (no `--permit-port-sharing`, or a program that does not bind with
//   SO_REUSEPORT), and until the parent is Healthy again the hand-over is a release
//   (`overlapFallback`).
// Exits count only beside a copy started from the manifest as last written and seen Ready, never
// while an exclusive copy ran or drained, and across an api-server outage only from a base listed
// while that copy was Ready (a count reported after one may otherwise be older than the copy).
//
// Owns `ParentState.exitWatch`, `overlapFallback`, `checkpointPhase` and `checkpointHolder`. Pure:
// times are the observer's monotonic milliseconds.
import { observeCopyBeat as copyBeatForFence } from './fence.js';
import { holdsPod, OVERLAP_EXITS_FOR_VERDICT, PROBATION, strike } from './probation.js';
import { event, holdNote, R } from './transitions.js';
import type { Action, Beat, ParentState } from './types.js';

/**
 * An exit of the checkpoint's own spec beside its port-sharing copy reads as "these ports are not
 * shared" only if its run lasted at most the copy's own time to its first Ready beat plus this
 * much: the kubelet reports a run in whole seconds, and starts vary.
 */
export const OWN_SPEC_BIND_SLACK_MS = 5_000;

/** Nothing watched yet: a copy from this agent's run has not been written. */
export function emptyExitWatch(): ParentState['exitWatch'] {
  return { notHolder: null, ready: false, base: null, since: null, readyAfterMs: null };
}

/**
 * A beat of the checkpoint's copy. A copy started from the manifest as last written (not the one
 * that ran before it, `notHolder`) and serving Ready: from now on the parent's exits count, and its
 * time to Ready says how fast a failed bind of the same spec would be.
 */
export function observeCopy(s: ParentState, b: Beat, now: number): void {
  s.checkpointPhase = b.phase;
  // A retired copy beats on through its shutdown (a preStop pause): under the same uid as the next
  // copy of the same spec, it must not become the holder that copy's beats are told apart from.
  if (s.checkpoint.active) s.checkpointHolder = b.holderUid;
  if (s.checkpoint.active && b.holderUid !== s.exitWatch.notHolder) copyBeatForFence(s.hang, b.phase === 'Ready', now);
  if (b.phase === 'Ready' && !s.exitWatch.ready && b.holderUid !== s.exitWatch.notHolder && s.checkpoint.active && s.checkpoint.exclusive !== true) {
    s.exitWatch.ready = true;
    s.exitWatch.readyAfterMs = s.exitWatch.since === null ? null : now - s.exitWatch.since;
    // The pod as last listed is the base (not after an outage: its count may be older than the copy).
    if (s.apiReachable && s.pod?.restarts !== undefined) s.exitWatch.base = { uid: s.pod.uid, restarts: s.pod.restarts };
  }
}

/** The manifest was (re)written (`since`: now) or removed (null): the copy must show itself Ready again. */
export function copyRewritten(s: ParentState, since: number | null): void {
  s.exitWatch = { notHolder: s.checkpointHolder, ready: false, base: null, since, readyAfterMs: null };
}

/**
 * The api-server went or came back. A base taken from a pod list while a copy that shares the
 * ports was Ready stays good: every exit counted from it happened beside that copy (a rewrite or a
 * retire starts the watch over, copyRewritten). Otherwise a count reported after the outage may be
 * older than the copy, and nothing counts until a list gives a base. (A bad spec's bound share
 * fails new connections, the agent's probe among them: on a single master each of its starts can
 * look like a short outage, and forgetting the base then would lose every exit.)
 */
export function exitsUnknown(s: ParentState): void {
  if (!s.exitWatch.ready) s.exitWatch.base = null;
}

/**
 * An overlap parent's container exited while it started beside its active checkpoint: the pod here
 * is the one seen before, its restart count rose since a copy that shares the ports was seen
 * Ready (exitWatch) and it has not reported Ready. For a spec other than the checkpoint's, 'other
 * spec'; for the checkpoint's own spec, 'own spec' (see the header).
 */
function exitedBesideSharingCheckpoint(s: ParentState, now: number): 'other spec' | 'own spec' | null {
  const pod = s.pod;
  const base = s.exitWatch.base;
  if (s.policy.handover === 'release' || s.state !== 'Active' || !s.checkpoint.active || s.checkpoint.exclusive === true) return null;
  if (pod === null || base === null || pod.uid !== base.uid || pod.restarts === undefined) return null;
  // A container lost with its node (reboot) is restarted with the count raised: not an exit here.
  if (pod.restarts <= base.restarts || s.phase === 'Ready' || pod.lastExitUnknown === true) return null;
  // The checkpoint's own spec was Ready: its exit says "ports not shared" only if it came within
  // the time that spec, as the copy, took to be Ready (a server binds before it is Ready), as a
  // failed bind does. A longer run had its ports and failed for another reason (a self-hosted
  // kube-apiserver beside its copy after a power cycle can exit after a minute while its copy is
  // Ready within seconds); the kubelet restarts it and the overlap stands.
  if (pod.specHash === s.checkpoint.specHash) {
    // Behind the redirect the copy never holds the parent's port: an exit is the spec's own trouble.
    if (s.policy.handover === 'redirect') return null;
    const limit = s.exitWatch.readyAfterMs === null ? null : s.exitWatch.readyAfterMs + OWN_SPEC_BIND_SLACK_MS;
    return pod.lastExitRanMs === undefined || limit === null || pod.lastExitRanMs <= limit ? 'own spec' : null;
  }
  // Another spec's exits are counted towards a verdict, not while its verdict holds.
  return holdsPod(s.knownBad, pod, now) ? null : 'other spec';
}

/** A new pod list (already in `s.pod`): count the exits it shows, and take its count as the next base. */
export function observeExits(s: ParentState, now: number): void {
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
}

/**
 * Under overlap, and the ports shared as far as known, or behind the redirect: the copy stays until
 * the parent is Ready.
 */
export function overlapStands(s: ParentState): boolean {
  return s.policy.handover === 'redirect' || (s.policy.handover === 'overlap' && s.overlapFallback === null);
}

/** The fallback to release is said once (Warning Event and reason). */
export function announceFallback(s: ParentState, actions: Action[]): void {
  if (!s.overlapFallback || s.overlapFallback.announced) return;
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

/** The parent is Healthy again: the next hand-over tries overlap first (not persisted either). */
export function forgetFallback(s: ParentState): void {
  s.overlapFallback = null;
}
