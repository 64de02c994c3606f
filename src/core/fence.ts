// Fencing a hung parent.
//
// A parent whose process holds its port but neither answers nor beats keeps clients from its copy:
// it holds the whole port (`release`), or its share of it (`overlap`, SO_REUSEPORT spreads new
// connections over every listener, and the hung one fails its share). Covering it means taking it
// off the port. The evidence is the parent's own sidecar: its probe of the main container got no
// answer at all (a timeout: `Beat.unanswered`), round after round, while the sidecar itself runs.
// A refusal or an error status is an answer (a process starting, or an api-server without etcd):
// never a hang.
//
// The rules (docs/decisions/0005-fencing.md):
// - Only on that evidence, for HANG_CONFIRM_ROUNDS unanswered rounds in a row from the same pod
//   after an answered one; an answered beat ends it. Never a parent fresh on any channel.
// - `overlap`: the checkpoint is activated at once (reason ParentHung) and the fence comes only
//   once the copy is proven Ready beside the hung process: clients have somewhere to go.
// - `release`: the hung process holds the whole port, so no copy can ever prove itself first. The
//   fence is the cover: the kubelet restarts the parent's container (its sidecar still runs), and
//   the parent gets a fresh start (startupGrace) to be seen again; if it cannot, the ordinary rules
//   (silence, startTimeout) activate the checkpoint.
// - Only a process of that parent's own pod, and only if it still does not answer when the fence
//   is carried out (the actuator checks again: src/agent/fence.ts). One fence per pod per
//   FENCE_REPEAT_MS; each is a Warning Event, a metric and a reason.
//
// Pure: times are the observer's monotonic milliseconds.
import type { Beat, ParentState } from './types.js';

/** Unanswered rounds in a row before a parent counts as hung: one is a slow answer, two a hang. */
export const HANG_CONFIRM_ROUNDS = 2;
/** The same pod is fenced at most once per this long (its restart, start and first beats fit well inside). */
export const FENCE_REPEAT_MS = 120_000;

export interface HangState {
  /** Pod uid, time and sequence of the first unanswered beat of the current run (null: the latest beat was answered). */
  since: { holderUid: string; at: number; sequence: number } | null;
  /** Unanswered rounds seen in the current run (by sequence: one round on several channels is one). */
  rounds: number;
  /** The parent's latest answered beat was this pod's Ready (a hang is a Ready process that stopped answering; null: none). */
  answeredBy: string | null;
  /** The copy started from the manifest as last written: its first beat (any phase) and first Ready beat. */
  copySeenAt: number | null;
  copyReadyAt: number | null;
  /** The last fence asked for: which pod, when, and its result (null: not reported yet). */
  fence: { podUid: string; at: number; killed: number | null } | null;
  /**
   * Release: a fenced parent must beat Ready again by then (a hand-over window after the fence), or
   * the checkpoint is activated (a kubelet that does not restart it, a process that hangs again).
   * null: no fence waiting for its parent. Cleared by a Ready beat.
   */
  recoverBy?: number | null;
}

export function emptyHang(): HangState {
  return { since: null, rounds: 0, answeredBy: null, copySeenAt: null, copyReadyAt: null, fence: null };
}

export function copyHang(h: HangState): HangState {
  return { ...h, since: h.since ? { ...h.since } : null, fence: h.fence ? { ...h.fence } : null };
}

/**
 * A parent beat, after it was judged the parent's own and new. Returns true when it is unanswered:
 * the sidecar lives, but its process does not; the caller then does not count it as a sign of life.
 */
export function observeParentBeat(h: HangState, b: Beat, now: number): boolean {
  if (b.unanswered !== true) {
    h.since = null;
    h.rounds = 0;
    // Only a process that was Ready hangs: a Starting beat (refused, an error status) is a process
    // on its way up, and one that is slow to answer while it starts (a loaded node: seen on the
    // three-node test bed) is not fenced.
    h.answeredBy = b.phase === 'Ready' ? b.holderUid : null;
    if (b.phase === 'Ready') h.recoverBy = null;
    return false;
  }
  // Only a process whose last answered beat was Ready hangs; one that never was is starting.
  if (h.answeredBy !== b.holderUid) return true;
  if (h.since === null || h.since.holderUid !== b.holderUid || b.sequence < h.since.sequence) {
    h.since = { holderUid: b.holderUid, at: now, sequence: b.sequence };
    h.rounds = 0;
  }
  h.rounds = Math.max(h.rounds, b.sequence - h.since.sequence + 1);
  return true;
}

/** A beat of the checkpoint's copy (from the manifest as last written). */
export function observeCopyBeat(h: HangState, ready: boolean, now: number): void {
  h.copySeenAt ??= now;
  if (ready) h.copyReadyAt ??= now;
}

/** A new manifest was written, or the copy retired: the copy must prove itself again. */
export function copyRestarted(h: HangState): void {
  h.copySeenAt = null;
  h.copyReadyAt = null;
}

/** The parent is hung: its sidecar reported HANG_CONFIRM_ROUNDS unanswered rounds in a row. Returns the hung pod's uid. */
export function hungPod(s: ParentState): string | null {
  const h = s.hang;
  return h.since !== null && h.rounds >= HANG_CONFIRM_ROUNDS ? h.since.holderUid : null;
}

/** No fence of this pod for FENCE_REPEAT_MS after the last one (a failed one is retried on the action back-off). */
export function fenceAllowed(h: HangState, podUid: string, now: number): boolean {
  const f = h.fence;
  if (f === null || f.podUid !== podUid) return true;
  if (f.killed === null) return false; // still in flight
  return now - f.at >= FENCE_REPEAT_MS;
}
