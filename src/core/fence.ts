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
// - Not a starved process: when the sidecar saw the port's holder waiting for a CPU through its
//   unanswered probe (Beat.starved: a node short of CPU; on the three-node test bed at load 45-70
//   healthy api-servers missed two probes in a row and were fenced), its beats are a sign of life
//   and it is fenced only once its run of unanswered rounds has lasted HANG_STARVED_MS, as long as
//   kubeadm's liveness probe gives an api-server; until then its own rules (startTimeout) judge it.
// - `overlap`: the checkpoint is activated (reason ParentHung) and the hung process fenced at once:
//   its share of the port fails its clients either way, and waiting for the copy to be proven
//   Ready beside it never ends on a real node (coverHung says why).
// - `redirect`: the same. The redirect sends new connections to the copy, but established ones
//   (the node's kubelet's, which the copy's own start waits on) stay with the hung process.
// - `release`: the hung process holds the whole port, so no copy can ever prove itself first. The
//   fence is the cover: the kubelet restarts the parent's container (its sidecar still runs), and
//   the parent gets a fresh start (startupGrace) to be seen again; if it cannot, the ordinary rules
//   (silence, startTimeout) activate the checkpoint.
// - A start that hangs (`overlap`, StartHung): a process of a new run that has not answered its
//   sidecar's probe once since it bound, for START_HUNG_MS while the checkpoint beside it has been
//   Ready, is fenced too, not left sharing the port for good. A slow start is still a start: its
//   refusals and error statuses are answers, and a copy that is Ready beside it reaches the same
//   storage, so a start that answers nothing at all for a minute then is not on its way up. The
//   fence is the run's exit, counted toward the spec's verdict like a crash (probation.ts).
// - Only a process of that parent's own pod, and only if it still does not answer when the fence
//   is carried out (the actuator checks again: src/agent/fence.ts). One fence per pod per
//   FENCE_REPEAT_MS; each is a Warning Event, a metric and a reason.
//
// Pure: times are the observer's monotonic milliseconds.
import { due, inFlight, succeeded } from './actions.js';
import { cover, coverFailedStart, event, holdNote, R, secs } from './transitions.js';
import type { Action, Beat, Input, ParentState } from './types.js';

/** Unanswered rounds in a row before a parent counts as hung: one is a slow answer, two a hang. */
export const HANG_CONFIRM_ROUNDS = 2;
/** The same pod is fenced at most once per this long (its restart, start and first beats fit well inside). */
export const FENCE_REPEAT_MS = 120_000;
/**
 * A process seen waiting for a CPU through its unanswered probes (Beat.starved) is taken for hung
 * only once its run of unanswered rounds has lasted this long: kubeadm's liveness probe of
 * kube-apiserver (failureThreshold 8, period 10 s, timeout 15 s) gives about as much before the
 * kubelet restarts it. Fencing a starved process frees no CPU: its restart costs more of it.
 */
export const HANG_STARVED_MS = 120_000;

/**
 * A start that has answered nothing since it bound, for this long while its copy was Ready beside
 * it, is hung (StartHung). An api-server binds its port seconds before it serves (a few on the real
 * beds, under load up to about twenty); one whose storage is a dead address exits by itself after
 * about 20 s. A minute of nothing beside a copy that serves the same storage is neither.
 */
export const START_HUNG_MS = 60_000;

export interface HangState {
  /** Pod uid, time and sequence of the first unanswered beat of the current run (null: the latest beat was answered). */
  since: { holderUid: string; at: number; sequence: number } | null;
  /** Unanswered rounds seen in the current run (by sequence: one round on several channels is one). */
  rounds: number;
  /** The latest unanswered beat of the run said its process waited for a CPU (Beat.starved). */
  starved?: boolean;
  /**
   * That beat came less than HANG_STARVED_MS into the run: the process counts as alive and is not
   * hung. Set on each beat only (never by the clock alone: the round that crosses the bound may be
   * the one it answers).
   */
  starvedHold?: boolean;
  /** The parent's latest answered beat was this pod's Ready (a hang is a Ready process that stopped answering; null: none). */
  answeredBy: string | null;
  /**
   * That Ready beat's sequence. A beat of the same pod with a lower sequence comes from a sidecar
   * that started over (a reboot, a restarted pod): its process is a new one, starting, whatever
   * the pod's last Ready before it said (a Lease written before a power cut, read at the agent's start).
   */
  answeredSeq?: number;
  /**
   * A process not Ready since it started that answers nothing: its pod, when its run of unanswered
   * rounds began, and whether the latest of them waited for a CPU (null: none, or it answered).
   */
  silent?: { holderUid: string; at: number; starved: boolean } | null;
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
  return { ...h, since: h.since ? { ...h.since } : null, fence: h.fence ? { ...h.fence } : null, silent: h.silent ? { ...h.silent } : null };
}

/** An unanswered beat of a process that has not been Ready since it started: its silent run goes on (or begins). */
function silentStart(h: HangState, b: Beat, now: number): false {
  if (!h.silent || h.silent.holderUid !== b.holderUid) h.silent = { holderUid: b.holderUid, at: now, starved: false };
  h.silent.starved = b.starved === true;
  return false;
}

/**
 * A parent beat, after it was judged the parent's own and new. Returns true when it may be a hang:
 * unanswered, from a process whose last answered probe was Ready (as its sidecar says, else as this
 * agent last saw it); the caller then does not count it as a sign of life. An unanswered beat of a process that has not been Ready since it started returns
 * false: a process that holds its port and is slow to answer while it starts (an api-server whose
 * etcd has no quorum, a loaded node) is starting, and its beats are Starting ones, judged by
 * startTimeout like any other start.
 */
export function observeParentBeat(h: HangState, b: Beat, now: number): boolean {
  if (b.unanswered !== true) {
    h.since = null;
    h.silent = null;
    h.rounds = 0;
    h.starved = false;
    h.starvedHold = false;
    // Only a process that was Ready hangs: a Starting beat (refused, an error status) is a process
    // on its way up, and one that is slow to answer while it starts (a loaded node: seen on the
    // three-node test bed) is not fenced.
    h.answeredBy = b.phase === 'Ready' ? b.holderUid : null;
    h.answeredSeq = b.sequence;
    if (b.phase === 'Ready') h.recoverBy = null;
    return false;
  }
  if (b.afterReady !== undefined) {
    // The sidecar says whether its process's last answered probe was Ready: it saw every round,
    // across this agent's restarts (an agent that starts while its parent already hangs has no
    // answered beat in memory) and its own (it forgets with its process).
    if (!b.afterReady) return silentStart(h, b, now);
  } else {
    // A writer that does not say: only a process whose last answered beat this agent saw was Ready
    // hangs; one that never was is starting, and so is one whose sidecar started over since that
    // Ready (its sequence went back).
    if (h.answeredBy !== b.holderUid) return silentStart(h, b, now);
    if (h.answeredSeq !== undefined && b.sequence < h.answeredSeq) {
      h.answeredBy = null;
      return silentStart(h, b, now);
    }
  }
  h.silent = null;
  if (h.since === null || h.since.holderUid !== b.holderUid || b.sequence < h.since.sequence) {
    h.since = { holderUid: b.holderUid, at: now, sequence: b.sequence };
    h.rounds = 0;
  }
  h.rounds = Math.max(h.rounds, b.sequence - h.since.sequence + 1);
  // A starved process is there, waiting for a CPU: a sign of life, until its run is too long.
  h.starved = b.starved === true;
  h.starvedHold = h.starved && now - h.since.at < HANG_STARVED_MS;
  return !h.starvedHold;
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

/**
 * The parent is hung: its sidecar reported HANG_CONFIRM_ROUNDS unanswered rounds in a row, and the
 * latest of them not of a process waiting for a CPU, or that beat came HANG_STARVED_MS or more into the run.
 * Returns the hung pod's uid.
 */
export function hungPod(s: ParentState): string | null {
  const h = s.hang;
  if (h.since === null || h.rounds < HANG_CONFIRM_ROUNDS || h.starvedHold === true) return null;
  return h.since.holderUid;
}

/** No fence of this pod for `repeatMs` after the last one (a failed one is retried on the action back-off). */
export function fenceAllowed(h: HangState, podUid: string, now: number, repeatMs = FENCE_REPEAT_MS): boolean {
  const f = h.fence;
  if (f === null || f.podUid !== podUid) return true;
  if (f.killed === null) return false; // still in flight
  return now - f.at >= repeatMs;
}

/** Since when a silent start has been silent beside a Ready copy (overlap, copy active), or null. */
function silentBesideCopySince(s: ParentState): number | null {
  const h = s.hang;
  if (!h.silent || s.policy.handover !== 'overlap' || !s.checkpoint.active || h.copyReadyAt === null) return null;
  return Math.max(h.silent.at, h.copyReadyAt);
}

/**
 * The pod whose start hangs (StartHung): a process not Ready since it started, that has answered
 * nothing for START_HUNG_MS while the copy beside it was Ready; one seen waiting for a CPU only
 * once that has lasted HANG_STARVED_MS, as for a hang.
 */
export function startHungPod(s: ParentState, now: number): string | null {
  const since = silentBesideCopySince(s);
  if (since === null) return null;
  const silent = s.hang.silent!;
  if (now - since < (silent.starved ? HANG_STARVED_MS : START_HUNG_MS)) return null;
  return silent.holderUid;
}

/**
 * Pending, Healthy, Starting or Silent: a hung parent (not one reporting a deliberate stop) is
 * covered (coverHung). Returns whether the state changed, or null to let the other rules judge.
 */
export function judgeHang(s: ParentState, now: number, actions: Action[]): boolean | null {
  const hung = hungPod(s);
  if (hung === null || s.phase === 'Stopping') return null;
  return coverHung(s, hung, now, actions);
}

/**
 * Release: a fenced parent that did not report Ready within its window after the fence is covered
 * by its checkpoint (a kubelet that does not restart it, a process that hangs again).
 */
export function judgeFencedNotBack(s: ParentState, now: number, actions: Action[]): boolean | null {
  const recoverBy = s.hang.recoverBy ?? null;
  if (recoverBy === null || now < recoverBy || s.phase === 'Ready') return null;
  s.hang.recoverBy = null;
  return coverFailedStart(
    s,
    'FencedNotBack',
    `the fenced parent did not report Ready within ${Math.round((recoverBy - (s.hang.fence?.at ?? recoverBy)) / 1000)}s of its fence`,
    now,
    actions,
  );
}

/**
 * The parent's own sidecar says its process has stopped answering. Overlap: activate the
 * checkpoint and fence the hung process at once. Release: the hung process holds the whole port,
 * no copy could bind: fence it, and let the kubelet restart it; the ordinary rules cover it if it
 * does not come back.
 *
 * Why overlap does not wait for the copy to be Ready first (measured on the real node, a
 * kube-apiserver stopped with SIGSTOP): a copy cannot prove itself Ready beside a hung listener
 * (its proof needs N answers in a row on fresh connections, and the kernel hands about half of
 * them to the process that answers nothing), and when the hung parent is the api-server the
 * kubelet starts the copy late: each sync of a static pod first creates its mirror pod through
 * that api-server (34 s on its stale HTTP/2 connection, then 10 s TLS handshake timeouts). Waiting
 * fenced nothing in 120 s. The hung process's share of the port fails its clients either way, so
 * taking it off the port costs them nothing; the sidecar still fences only a process that does not
 * answer its own probe then.
 */
function coverHung(s: ParentState, podUid: string, now: number, actions: Action[]): boolean | null {
  const secsHung = secs(now - s.hang.since!.at + (s.declaredIntervalMs ?? s.policy.intervalMs));
  if (s.policy.handover !== 'release') {
    // Under `redirect` the copy serves on its own port and, once Ready, the redirect sends new
    // connections to it. But a redirect moves no established connection: the node's kubelet keeps
    // its HTTP/2 connection to the hung api-server, and its start of the copy (a static pod: the
    // mirror pod is created first, through that connection) waited 35 s for it to be declared lost
    // on the three-node bed. So both modes fence at once; the kubelet's next connection reaches the copy.
    const behind = s.policy.handover === 'redirect' ? '; the copy serves behind the redirect' : '';
    const changed = cover(
      s,
      'ParentHung',
      `the parent's process holds its port but has not answered its sidecar's probe for ${s.hang.rounds} rounds (~${secsHung})${behind}`,
      now,
      actions,
    );
    requestFence(s, podUid, now, actions);
    return changed;
  }
  requestFence(s, podUid, now, actions);
  // While the fence is out, wait for its answer; once it failed (retried on the action back-off) or
  // found nothing to stop, the ordinary rules judge the parent (null): a hang must never keep the
  // silence rules from covering it.
  return s.hang.fence !== null && s.hang.fence.podUid === podUid && s.hang.fence.killed === null ? false : null;
}

/**
 * Active: fence a hung parent (in every mode: see coverHung), once per FENCE_REPEAT_MS. (A hung
 * parent is not fresh: its run of unanswered rounds began after its last answered beat.)
 */
export function fenceBesideCopy(s: ParentState, now: number, actions: Action[]): void {
  // (Behind the redirect a start that hangs receives no connection, established or new: only a
  // hang after Ready is fenced there; startHungPod is for overlap alone.)
  const hung = hungPod(s);
  if (hung !== null) {
    requestFence(s, hung, now, actions);
    return;
  }
  const starting = startHungPod(s, now);
  if (starting === null) return;
  // A fence that found nothing to stop leaves the run as it was: the pod's next beats say more.
  const f = s.hang.fence;
  if (f !== null && f.podUid === starting && s.hang.silent!.at < f.at) return;
  // The restarted process is judged on its own START_HUNG_MS, not held to FENCE_REPEAT_MS.
  requestFence(s, starting, now, actions, START_HUNG_MS);
}

/** Ask for the fence of pod `podUid` (once per `repeatMs`, after the action back-off when one failed). */
function requestFence(s: ParentState, podUid: string, now: number, actions: Action[], repeatMs = FENCE_REPEAT_MS): void {
  // The fence request goes to the parent's sidecar through the node's heartbeat folder, which it
  // reads only beside a local channel: a Lease-only parent could never answer (covered, not fenced).
  if (!s.policy.channels.includes('local')) return;
  if (!fenceAllowed(s.hang, podUid, now, repeatMs) || !due(s, 'fence', now)) return;
  const silent = s.hang.since === null ? (s.hang.silent ?? null) : null;
  s.hang.fence = { podUid, at: now, killed: null };
  inFlight(s, 'fence', now);
  const starved = silent ? silent.starved : s.hang.starved === true;
  const why = silent
    ? R(
        'StartHung',
        `pod ${podUid}'s process holds its port but has answered nothing since it started, for ~${secs(now - silent.at)}, while the checkpoint beside it was Ready${starved ? ' (waiting for a CPU)' : ''}; fencing it (the checkpoint serves)`,
      )
    : R(
        'ParentHung',
        `pod ${podUid}'s process holds its port but has not answered its sidecar's probe for ${s.hang.rounds} rounds${starved ? `, waiting for a CPU, for ~${secs(now - s.hang.since!.at)}` : ''}; fencing it${s.policy.handover === 'release' ? ' (the kubelet restarts it)' : ' (the checkpoint serves)'}`,
      );
  // A starved process is fenced only past HANG_STARVED_MS: the sidecar is told so, or its own
  // check (the process still waits for a CPU) would refuse.
  actions.push({ type: 'fence', podUid, reason: why, ...(starved ? { evenIfStarved: true } : {}) });
  holdNote(s, why, actions);
}

/**
 * The fence was carried out. The hung process is gone; the kubelet restarts it. Its sidecar's next
 * rounds say how it does, and it gets a fresh start to be seen again, as after an agent restart.
 * Without a copy serving (release), it must be Ready within `recoverWithinMs` (a hand-over window),
 * as after a retire.
 */
export function observeFenced(s: ParentState, input: Extract<Input, { type: 'fenced' }>, now: number, recoverWithinMs: number): void {
  succeeded(s, 'fence');
  if (s.hang.fence?.podUid === input.podUid) s.hang.fence.killed = input.killed;
  if (input.killed > 0) {
    s.hang.since = null;
    s.hang.silent = null;
    s.hang.rounds = 0;
    s.graceUntil = Math.max(s.graceUntil, now + s.policy.startupGraceMs);
    if (!s.checkpoint.active) s.hang.recoverBy = now + recoverWithinMs;
  }
}

/** A failed fence is asked again after the action's back-off. */
export function fenceFailed(s: ParentState): void {
  s.hang.fence = null;
}

/** A fence's result, claimed once it is known: a Warning Event when a process was stopped. */
export function fencedEvent(s: ParentState, input: Extract<Input, { type: 'fenced' }>, actions: Action[]): void {
  if (input.killed > 0) {
    event(
      actions,
      'Warning',
      'ParentFenced',
      `${s.id}: pod ${input.podUid} held its port without answering; its main process was stopped (${input.detail}) so ${s.policy.handover === 'overlap' ? 'the checkpoint serves alone until the kubelet restarts it' : s.policy.handover === 'redirect' ? "its established connections (the kubelet's among them) end, and new ones go to the checkpoint until the kubelet restarts it" : 'the kubelet restarts it on a free port'}`,
    );
    holdNote(s, R('ParentFenced', `pod ${input.podUid}: ${input.detail}`), actions);
  } else {
    holdNote(s, R('FenceNotNeeded', `pod ${input.podUid}: ${input.detail}`), actions);
  }
}

/** When the same pod may be fenced again, or a fenced parent must be back. */
export function fenceWakes(s: ParentState): Array<number | null | undefined> {
  // No wake at the starved bound: a starved process is judged hung on a beat that says it still
  // does not answer, never on a timer (the round that crosses the bound may be the one it answers).
  // A silent start is judged at its bound, not at the beat after it; a starved one is not, for the
  // reason above.
  const silentSince = silentBesideCopySince(s);
  const silentBound = silentSince === null || s.hang.silent!.starved ? null : silentSince + START_HUNG_MS;
  return [s.hang.fence !== null && s.hang.since !== null ? s.hang.fence.at + FENCE_REPEAT_MS : null, s.hang.recoverBy, silentBound];
}
