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
// What one more try costs sets the schedule. Under `release` a try is a hand-over window with the
// node on the parent's pod: a spec that stumbled while starting has usually come through within its
// window already, so a verdict means a window lost; the first probation is a few such windows.
// Under `overlap` a try is the spec's share of the port until its next exit (about a second for an
// api-server that fails as it starts), but a verdict rewrites the copy without sharing and a try
// rewrites it back, each a stop and a start of the copy (about 30 s dark in the simulator). So under
// overlap exits are tolerated before any verdict (OVERLAP_EXITS_FOR_VERDICT: a spec that stumbles
// up to three times gets through with no rewrite at all), and the verdict, once given, holds long.
//
// Pure: times are the observer's monotonic milliseconds, like every other deadline of the core.

/**
 * Overlap: exits of a new spec beside the sharing copy before it is judged. Each costs its share of
 * the port for about a second; a spec that crashed up to three times while a dependency came up
 * then serves alone within its kubelet back-off (about a minute), no rewrite of the copy needed.
 */
export const OVERLAP_EXITS_FOR_VERDICT = 4;

export interface ProbationSchedule {
  initialMs: number;
  maxMs: number;
}

/**
 * Half an hour, doubling to four hours, in both modes: a try costs a whole hand-over window without
 * service (release: handoverTimeout, 2 min by default) or two rewrites of the copy (overlap, about
 * 30 s each), so a spec that never gets Ready is tried at most once in the first half hour after
 * its verdict. A good spec that only stumbled gets through before any verdict: within its
 * hand-over window (release, which grows per attempt) or its first OVERLAP_EXITS_FOR_VERDICT - 1
 * exits (overlap).
 */
export const PROBATION: Record<'release' | 'overlap' | 'redirect', ProbationSchedule> = {
  release: { initialMs: 30 * 60_000, maxMs: 4 * 60 * 60_000 },
  overlap: { initialMs: 30 * 60_000, maxMs: 4 * 60 * 60_000 },
  // Behind the redirect a bad spec's starts cost no client anything: the verdict only says why.
  redirect: { initialMs: 30 * 60_000, maxMs: 4 * 60 * 60_000 },
};
/** The first probation and the cap of the default (release) schedule. */
export const PROBATION_INITIAL_MS = PROBATION.release.initialMs;
export const PROBATION_MAX_MS = PROBATION.release.maxMs;

export interface Verdict {
  specHash: string;
  podUid: string;
  /** When the latest strike was given. */
  since: number;
  /** Failures of this spec so far (1 for the first verdict). */
  strikes: number;
  /** The probation ends: the spec may be tried again from then on. */
  until: number;
  /**
   * Overlap: how long the spec's run that drew the latest strike lasted (the pod's last exit, as
   * the kubelet reported it), when known. See sharesOnAfterVerdict.
   */
  ranMs?: number;
}

/** How long the `strikes`-th verdict on a spec holds it: doubling from the schedule's first probation, capped. */
export function probationMs(strikes: number, schedule: ProbationSchedule = PROBATION.release): number {
  return Math.min(schedule.maxMs, schedule.initialMs * 2 ** Math.max(0, strikes - 1));
}

/** A new strike against `pod`'s spec: one more than the last verdict on the same spec, if any. */
export function strike(
  prev: Verdict | null,
  pod: { specHash: string; uid: string; lastExitRanMs?: number },
  now: number,
  schedule: ProbationSchedule = PROBATION.release,
): Verdict {
  const strikes = prev !== null && prev.specHash === pod.specHash ? prev.strikes + 1 : 1;
  const v: Verdict = { specHash: pod.specHash, podUid: pod.uid, since: now, strikes, until: now + probationMs(strikes, schedule) };
  if (pod.lastExitRanMs !== undefined) v.ranMs = pod.lastExitRanMs;
  return v;
}

/**
 * Overlap: after its verdict a held spec is kept from binding beside the copy only when that costs
 * less than letting it try. Rewriting the copy without sharing stops it and starts it again (the
 * port dark for the copy's whole start, and once more when the spec changes or the verdict ends);
 * a held spec that fails as it starts costs only its share of new connections between its bind and
 * its exit, at most its run, at the kubelet's back-off (10 s doubling to 5 min). So the copy keeps
 * sharing when the failing run was no longer than the copy's own time to Ready plus `slackMs` (it
 * died while starting: bound for a moment at most), and is rewritten without sharing when the run
 * was longer (it held its share while it hung or limped). When either length is unknown (a run
 * the kubelet did not time, a verdict or a copy from before an agent restart) the copy stays as it
 * runs (`sharingNow`): a rewrite on a guess costs a copy's restart.
 */
export function sharesOnAfterVerdict(v: Verdict, copyReadyAfterMs: number | null, slackMs: number, sharingNow: boolean): boolean {
  if (v.ranMs === undefined || copyReadyAfterMs === null) return sharingNow;
  return v.ranMs <= copyReadyAfterMs + slackMs;
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
export function recovered(
  v: { specHash: string; podUid: string; strikes?: number; remainingMs?: number },
  now: number,
  rebooted: boolean,
  schedule: ProbationSchedule = PROBATION.release,
): Verdict {
  const strikes = Number.isInteger(v.strikes) && v.strikes! > 0 ? v.strikes! : 1;
  const full = probationMs(strikes, schedule);
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
