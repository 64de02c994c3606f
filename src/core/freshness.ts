// Freshness: is the parent alive, measured on the agent's own clock.
//
// - `lastChangeAt` is when the agent saw a parent beat *change* (holder, uid, sequence, renew time
//   or phase differ from the last one seen on that channel). A writer's timestamps are compared for
//   equality only, never for age: clocks across nodes disagree.
// - Only the parent's own beats count, each round once, whatever channel brings it first
//   (src/core/beats.ts judges whose beat it is and whether it is newer than what was counted).
// - The first beat seen on a channel after a (re)start is a baseline, not a proof of life: a stale
//   Lease or file left behind by a dead parent looks the same.
// - No silence is judged before `graceUntil` (agent start, api-server return), and a grace still
//   running always leaves the parent one window from its first sighting.
// - A parent is judged by the interval it declares: never by a window shorter than twice the
//   interval of its latest beat (`judgingWindowMs`). Writer and reader may read different copies of
//   the policy; a heartbeat slower than the agent's window would otherwise be covered and handed
//   back every interval. The widening is announced with a WindowBelowInterval Warning and shown as
//   the reason of a Healthy or Starting parent.
//
// Owns `lastChangeAt`, `lastLocalChangeAt`, `phase`, `phaseUnprobed`, `holderUid`,
// `startingSince`, `rounds`, `seen`, `declaredIntervalMs`, `windowNotedMs`, `beatTrust` and
// `graceUntil` (which the boot and api rules also move). Pure.

import { judgeBeat, leadingBeat, listedSuccessor, MAX_HOLDERS, takePending } from './beats.js';
import { coverDeletion, deletionCovers } from './deletion.js';
import { observeParentBeat as observeHang } from './fence.js';
import { cover, coverFailedStart, enter, event, holdNote, liveState, R, sameReason, secs } from './transitions.js';
import type { Action, Beat, ParentPolicy, ParentState, PodInfo } from './types.js';

/** Beat rounds remembered to recognise one round arriving on several channels: a few intervals' worth. */
const MAX_ROUNDS = 8;

/**
 * Every window a declared interval needs: two intervals, so that one late beat does not read as a
 * dead parent (the policy validator's own rule, `window >= 2 x interval`, applied to what the
 * writer actually does).
 */
export const WINDOW_INTERVALS = 2;

/** The window this parent is judged by: the policy's, or twice the interval it declares if that is longer. */
export function judgingWindowMs(s: ParentState): number {
  return s.declaredIntervalMs === null ? s.policy.windowMs : Math.max(s.policy.windowMs, WINDOW_INTERVALS * s.declaredIntervalMs);
}

/** What makes one beat differ from another on a channel: a change of any of these is a change. */
export function beatFingerprint(b: Beat): string {
  return `${b.holder}|${b.holderUid}|${b.role}|${b.phase}|${b.sequence}|${b.renewTime}`;
}

/**
 * Did the beat change? The first of these parent beats (a live read of the api channels) that
 * differs from the last one seen on its channel; null: nothing new, the silence stands.
 */
export function changedBeat(s: ParentState, beats: readonly Beat[]): Beat | null {
  return beats.find((b) => b.role === 'parent' && s.seen[b.channel] !== beatFingerprint(b)) ?? null;
}

/** A parent beat (role `parent`) as one channel showed it. */
export function observeBeat(s: ParentState, b: Beat, now: number): void {
  const fp = beatFingerprint(b);
  const before = s.seen[b.channel];
  if (before === fp) return;
  s.seen[b.channel] = fp;
  // Only the parent's own beats, newer than any round already counted (src/core/beats.ts).
  const judged = judgeBeat(s.beatTrust, b, listedHolders(s), now);
  s.beatTrust = judged.trust;
  const v = judged.verdict;
  if (v.kind === 'refused') {
    s.beatRefused = { type: 'beatRefused', channel: b.channel, holder: b.holder, holderUid: b.holderUid, why: v.why, message: v.message, report: v.report };
    return;
  }
  // 'unlisted': judged again when the next pod list arrives (takeHeldBeat), asked for at once: a
  // pod watch that stalled while a surge's new pod started would otherwise leave the new pod's
  // beats refused until its watchdog, and the old pod's Stopping read as the parent's own stop.
  if (v.kind === 'unlisted') {
    s.listPods = { type: 'listPods', holder: b.holder, holderUid: b.holderUid };
    return;
  }
  if (v.kind === 'old') return;
  // An unanswered beat of a process that was Ready (the sidecar runs, its process no longer
  // answers) is no sign of life; one of a process not yet Ready is a slow start (fence.ts).
  const unanswered = observeHang(s.hang, b, now);
  // Even a baseline declares how the parent beats: the first judgement already needs it.
  const judgingBefore = judgingWindowMs(s);
  s.declaredIntervalMs = b.intervalMs ?? null;
  // A grace still running lasts at least one (widened) window from now: a parent must get a
  // window to be seen after a restart, as the policy rule startupGrace >= window says.
  const judging = judgingWindowMs(s);
  if (judging > judgingBefore && s.graceUntil > now) s.graceUntil = Math.max(s.graceUntil, now + judging);
  // Baseline: a first sighting on this channel proves nothing about now. Its round is not kept
  // either, so that the same round arriving as a change on another channel still counts (the
  // sidecar's first beat after a reboot is a first sighting in the empty local folder and a change
  // of the Lease left from before the reboot: both say the parent runs again). A first sighting
  // while the grace runs (a parent whose pod started after the agent) gets one (widened) window
  // from now for its next beat, as a restart does, so a slow-beating parent first seen late in the
  // grace is not judged silent before its second beat can arrive. A first sighting at the agent's
  // start changes nothing: startupGrace >= window.
  if (before === undefined || v.kind === 'baseline' || v.kind === 'restart') {
    if (s.graceUntil > now) s.graceUntil = Math.max(s.graceUntil, now + judging);
    return;
  }
  const round = `${b.holderUid}|${b.sequence}|${b.renewTime}`;
  if (s.rounds.includes(round)) return; // this round was already counted on another channel
  s.rounds = [...s.rounds, round].slice(-MAX_ROUNDS);
  if (unanswered) return;
  s.lastChangeAt = now;
  if (b.channel === 'local') s.lastLocalChangeAt = now;
  // Two live pods of the key: the parent's phase is the best of their fresh beats (beats.ts).
  const lead = leadingBeat(s.beatTrust, now, judging);
  if (lead) b = { ...b, phase: lead.phase, holderUid: lead.holderUid, ...(lead.unprobed ? { unprobed: true } : { unprobed: false }) };
  if (b.phase === 'Starting') {
    if (s.phase !== 'Starting' || s.holderUid !== b.holderUid) s.startingSince = now;
  } else {
    s.startingSince = null;
  }
  if (b.phase === 'Ready') {
    if (s.phase !== 'Ready' || s.holderUid !== b.holderUid || s.readySince === null) s.readySince = now;
  } else {
    s.readySince = null;
  }
  s.phase = b.phase;
  s.phaseUnprobed = b.unprobed === true;
  s.holderUid = b.holderUid;
  s.confirm = null;
}

function listedHolders(s: ParentState): Array<{ uid: string; name: string }> | null {
  if (s.pod) return [{ uid: s.pod.uid, name: s.pod.name }, ...(s.pod.alsoListed ?? [])];
  return s.beatTrust.listedOnly ?? null;
}

/**
 * A new pod list: a new pod's beat that came before the list naming it is returned, to be observed
 * now (its channel has seen it already, so it is not taken for the same beat again).
 */
export function takeHeldBeat(s: ParentState): Beat | null {
  const held = takePending(s.beatTrust, listedHolders(s));
  if (held && s.seen[held.channel] === beatFingerprint(held)) s.seen[held.channel] = 'held';
  return held;
}

/**
 * A pod list while the api-server is judged unreachable (its probe fails, yet the pod watch still
 * hears it: an api-server too slow for the probe). It says nothing about scheduling, spec or exits,
 * but the pods it names are pods the api-server has for this key here, so their beats are the
 * parent's: a surge rollout's new pod beside the one last listed. Identity only, and only added
 * (the pod tracked stays the last full list's, and a pod that list named goes only after several
 * newer ones): a stale list can only leave a beat unrecognised, and a pod of the key that beats
 * is a live parent. Without a pod known from a full list (an agent started while the probe
 * failed), the pods it names are kept apart (BeatTrust.listedOnly) as the pods that may beat:
 * taking the first holder that beats for the parent's is no answer then, as a slow api-server
 * still lets a surge start a new pod (seed 37619). Returns a held beat of a pod it names, as
 * takeHeldBeat.
 */
export function observeListedWhileUnreachable(s: ParentState, pod: PodInfo | null): Beat | null {
  if (pod === null) return null;
  const named = [{ uid: pod.uid, name: pod.name }, ...(pod.alsoListed ?? [])];
  const known = listedHolders(s) ?? [];
  const added = named.filter((h) => !known.some((k) => k.uid === h.uid && k.name === h.name));
  if (added.length === 0) return null;
  // The latest few, as beats.ts remembers holders: one dropped here and accepted before stays the parent's.
  if (s.pod) s.pod = { ...s.pod, alsoListed: [...(s.pod.alsoListed ?? []), ...added].slice(-MAX_HOLDERS) };
  else s.beatTrust.listedOnly = [...known, ...added].slice(-MAX_HOLDERS);
  return takeHeldBeat(s);
}

/** A new policy: a grace still running is re-measured from its start. */
export function regrace(s: ParentState, next: ParentPolicy, now: number): void {
  if (s.graceUntil > now) s.graceUntil += next.startupGraceMs - s.policy.startupGraceMs;
}

export function fresh(s: ParentState, now: number): boolean {
  return s.lastChangeAt !== null && now - s.lastChangeAt <= judgingWindowMs(s);
}

/** Beats changed after the current state was entered (e.g. the parent came back while Active). */
export function freshSinceEntered(s: ParentState, now: number): boolean {
  return fresh(s, now) && s.lastChangeAt! >= s.since && s.lastChangeAt !== null;
}

/**
 * A Ready beat is evidence enough when the sidecar probed the parent. An unprobed one (`--probe
 * none`: the sidecar runs, nothing more; a main container crash-looping on its ports beats Ready
 * too) counts only with the api-server's word that this pod's Ready condition is True: for a
 * capture (last known good), a retire and a hand-over's success alike.
 */
export function readyProven(s: ParentState): boolean {
  if (s.phaseUnprobed !== true) return true;
  const pod = s.pod;
  return s.apiReachable && pod !== null && pod.ready === true && (s.holderUid === pod.uid || s.holderUid === '');
}

/**
 * The pod of this key the api-server lists on this node beside the one whose Stopping leads, when
 * that Stopping is a pod being replaced rather than the parent stopping: a surge's old pod leaving
 * beside a new pod not heard yet, which is the parent (beats.ts `listedSuccessor`). Null: none, the
 * Stopping is a deliberate stop.
 */
export function successorOfStopping(s: ParentState): { uid: string; name: string } | null {
  return listedSuccessor(s.beatTrust, listedHolders(s), s.holderUid ?? '');
}

/** Why a Stopping with a listed successor is not covered at once. */
export function replacedReason(next: { name: string }) {
  return R(
    'ParentReplaced',
    `the pod reporting Stopping is being replaced: pod ${next.name} of this parent is listed on this node; waiting for its beats (a silence is judged as usual)`,
  );
}

/**
 * Pending, Healthy or Starting: a fresh parent is Healthy or Starting by its phase, covered when
 * it reports a deliberate stop or has been Starting past startTimeout; once the grace is over, a
 * parent that is not fresh is Silent. Returns whether the state changed.
 */
export function judgeLive(s: ParentState, now: number, actions: Action[]): boolean {
  const p = s.policy;
  if (fresh(s, now)) {
    if (s.phase === 'Stopping') {
      const next = successorOfStopping(s);
      if (next === null) return cover(s, 'ParentStopping', 'the parent reported a deliberate stop', now, actions);
      holdNote(s, replacedReason(next), actions);
      return false;
    }
    if (deletionCovers(s)) return coverDeletion(s, now, actions);
    if (s.phase === 'Starting' && s.startingSince !== null && now - s.startingSince > p.startTimeoutMs) {
      return coverFailedStart(s, 'StartTimeout', `the parent has been Starting for over ${Math.round(p.startTimeoutMs / 1000)}s`, now, actions);
    }
    const want = liveState(s.phase);
    const live = want === 'Healthy' ? R('Ready', 'the parent reports Ready') : R('Starting', 'the parent reports Starting');
    if (want !== s.state) return enter(s, want, live, now, actions);
    if (s.reason.code === 'ParentReplaced') holdNote(s, live, actions);
    return false;
  }
  if (now < s.graceUntil) return false;
  return enter(
    s,
    'Silent',
    s.lastChangeAt === null ? R('NoBeat', 'no beat seen since the agent started') : R('WindowExpired', 'no beat changed within the window'),
    now,
    actions,
  );
}

/** Announce (once per change) that the policy's window is shorter than the parent's interval allows. */
export function noteWindow(s: ParentState, actions: Action[]): void {
  const judging = judgingWindowMs(s);
  const widened = judging > s.policy.windowMs ? judging : null;
  if (widened === s.windowNotedMs) return;
  if (widened !== null) {
    event(
      actions,
      'Warning',
      'WindowBelowInterval',
      `${s.id}: the parent beats every ${secs(s.declaredIntervalMs!)}, but the policy's window is ${secs(s.policy.windowMs)}; judging it by ${secs(widened)} (${WINDOW_INTERVALS} x its interval) instead. Give writer and agent the same policy (interval and window)`,
    );
  } else {
    event(
      actions,
      'Normal',
      'WindowCoversInterval',
      `${s.id}: the policy's window (${secs(s.policy.windowMs)}) covers ${WINDOW_INTERVALS} x the parent's interval again`,
    );
  }
  s.windowNotedMs = widened;
}

const WINDOW_REASON = 'WindowBelowInterval';

/** A Healthy or Starting parent judged by a widened window says so in its reason (status REASON). */
export function windowReason(s: ParentState, actions: Action[]): void {
  if (s.state !== 'Healthy' && s.state !== 'Starting') return;
  const noted = s.reason.code === WINDOW_REASON;
  if (s.windowNotedMs !== null) {
    const reason = R(
      WINDOW_REASON,
      `the parent declares a ${secs(s.declaredIntervalMs!)} interval; judged by ${secs(s.windowNotedMs)}, not the policy's ${secs(s.policy.windowMs)} window`,
    );
    if (!sameReason(s.reason, reason)) holdNote(s, reason, actions);
  } else if (noted) {
    holdNote(s, s.state === 'Healthy' ? R('Ready', 'the parent reports Ready') : R('Starting', 'the parent reports Starting'), actions);
  }
}

/** When the window runs out, the grace ends, or a Starting parent passes startTimeout. */
export function freshnessWakes(s: ParentState): Array<number | null> {
  return [
    s.lastChangeAt === null ? null : s.lastChangeAt + judgingWindowMs(s) + 1,
    s.graceUntil,
    s.startingSince === null ? null : s.startingSince + s.policy.startTimeoutMs + 1,
  ];
}
