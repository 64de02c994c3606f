// Probation, not a ban: the verdict on a spec that failed beside its checkpoint.
//
// A parent spec other than the checkpoint's (the last known good) that failed a `release`
// hand-over, or exited while starting beside a port-sharing checkpoint (`overlap`), is held: no
// hand-over to it (release), the checkpoint keeps its ports without sharing (overlap). A good spec
// can fail that way for a passing reason (a dependency not ready yet, etcd still electing), so the
// verdict expires on a back-off schedule and the spec is tried again; each new failure of the same
// spec is one more strike and doubles the next probation. The verdict ends at once when the spec
// changes (a new candidate) or the parent reports Ready on its own.
//
// What one more try costs bounds the schedule: under `release` a hand-over window with the node on
// the parent's failing pod, under `overlap` the spec's share of the port until its next exit, plus
// the rewrite of the copy with sharing and back. The first probation is short, so a spec that
// stumbled a few times while starting gets through within minutes; the cap keeps a spec that never
// gets Ready from costing more than one try per PROBATION_MAX_MS.
//
// Pure: times are the observer's monotonic milliseconds, like every other deadline of the core.

/** The first probation: about two of the kubelet's crash-loop restarts of a starting parent. */
export const PROBATION_INITIAL_MS = 60_000;
/** The longest probation: a spec that never gets Ready is tried at most once per half hour. */
export const PROBATION_MAX_MS = 30 * 60_000;

export interface Verdict {
  specHash: string;
  podUid: string;
  /** When the latest strike was given. */
  since: number;
  /** Failures of this spec so far (1 for the first verdict). */
  strikes: number;
  /** The probation ends: the spec may be tried again from then on. */
  until: number;
}

/** How long the `strikes`-th verdict on a spec holds it: doubling from PROBATION_INITIAL_MS, capped. */
export function probationMs(strikes: number): number {
  return Math.min(PROBATION_MAX_MS, PROBATION_INITIAL_MS * 2 ** Math.max(0, strikes - 1));
}

/** A new strike against `pod`'s spec: one more than the last verdict on the same spec, if any. */
export function strike(prev: Verdict | null, pod: { specHash: string; uid: string }, now: number): Verdict {
  const strikes = prev !== null && prev.specHash === pod.specHash ? prev.strikes + 1 : 1;
  return { specHash: pod.specHash, podUid: pod.uid, since: now, strikes, until: now + probationMs(strikes) };
}

/** The verdict holds now (its probation has not ended). */
export function holds(v: Verdict | null, now: number): boolean {
  return v !== null && now < v.until;
}

/** The verdict holds and the pod runs the held spec. */
export function holdsPod(v: Verdict | null, pod: { specHash: string } | null, now: number): boolean {
  return v !== null && holds(v, now) && pod !== null && pod.specHash === v.specHash;
}

/**
 * A verdict read back from the hand-over record. Its strikes are evidence about the spec and are
 * kept; the time left is not when the node rebooted since (a boot voids deadlines), nor beyond one
 * full probation for its strikes (the wall clock the record keeps can step).
 */
export function recovered(v: { specHash: string; podUid: string; strikes?: number; remainingMs?: number }, now: number, rebooted: boolean): Verdict {
  const strikes = Number.isInteger(v.strikes) && v.strikes! > 0 ? v.strikes! : 1;
  const full = probationMs(strikes);
  const left = rebooted || v.remainingMs === undefined || !Number.isFinite(v.remainingMs) ? full : Math.min(full, Math.max(0, v.remainingMs));
  return { specHash: v.specHash, podUid: v.podUid, since: now, strikes, until: now + left };
}

/** "in 2m30s" / "now": when the held spec is tried again, for Events and reasons. */
export function nextTry(v: Verdict, now: number): string {
  const s = Math.max(0, Math.round((v.until - now) / 1000));
  if (s === 0) return 'now';
  const m = Math.floor(s / 60);
  return `in ${m > 0 ? `${m}m` : ''}${s % 60 > 0 || m === 0 ? `${s % 60}s` : ''}`;
}
