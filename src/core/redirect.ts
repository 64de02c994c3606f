// Hand-over behind a redirect (`handover: redirect`, docs/decisions/0012-one-listener-per-port.md). The copy serves on a port
// of its own, so the parent and its copy never share a port; while the copy is active and Ready and
// the parent is not proven Ready, the node redirects new connections to the parent's port to the
// copy's. When nothing says the parent may be serving (its last beat is not Ready, or not fresh: a
// power cycle, a hang, a parent gone), the redirect stands from the copy's first beat instead: a
// client then waits for the copy's start, not for the probe round after it that proves it Ready.
// A parent that starts, hangs or fails behind the redirect receives no new connection (a hung one
// is fenced too: fence.ts). The hand-back, once the parent is proven Ready (its own sidecar probes it on an address the redirect
// leaves alone): the redirect goes first, the copy's connections get REDIRECT_DRAIN_MS to finish,
// then the copy retires.
//
// The node's redirect is not persisted by the core: the agent reads it back at its start (a
// `redirected` report), and a reboot clears it (nftables rules live in the kernel).
//
// Owns `ParentState.redirect`. Pure: times are the observer's monotonic milliseconds.
import { ask, succeeded } from './actions.js';
import { judgingWindowMs } from './freshness.js';
import { holdNote, R } from './transitions.js';
import type { Action, Beat, Input, ParentState, RedirectState } from './types.js';

/**
 * From the redirect's removal to the copy's retire: requests the copy accepted just before are
 * answered (a poll, a write; watches end with the copy and their clients reconnect to the parent).
 */
export const REDIRECT_DRAIN_MS = 2_000;

export function emptyRedirect(): RedirectState {
  return { on: null, offSince: null, handingBack: false, copyReadyAt: null, copyHeardAt: null, copyBeat: null };
}

/**
 * A beat of the copy. Its uid says nothing about which run it is (a static pod's uid is a hash of
 * its manifest, so the copy after a reboot or a retire has the uid of the one before): a Ready beat
 * counts if it is a beat not seen before, seen since the manifest was written.
 */
export function observeCopyForRedirect(s: ParentState, b: Beat, now: number): void {
  const print = `${b.channel}/${b.holderUid}/${b.sequence}/${b.renewTime}`;
  if (print === s.redirect.copyBeat) return;
  s.redirect.copyBeat = print;
  s.redirect.copyHeardAt ??= now;
  if (b.phase !== 'Ready') s.redirect.copyReadyAt = null;
  else if (s.redirect.copyReadyAt === null) s.redirect.copyReadyAt = now;
}

/** The manifest was written or removed: the copy must show itself Ready again. */
export function copyChanged(s: ParentState): void {
  s.redirect.copyReadyAt = null;
  s.redirect.copyHeardAt = null;
}

/**
 * The parent may be serving its port: its last beat said Ready and is fresh (within the window it
 * is judged by). A pod being deleted serves on through its shutdown pause and beats Ready meanwhile.
 */
function parentMayServe(s: ParentState, now: number): boolean {
  return s.phase === 'Ready' && s.lastChangeAt !== null && now - s.lastChangeAt <= judgingWindowMs(s);
}

/**
 * The redirect should stand: the copy active, no hand-back under way, and either the copy Ready
 * since its manifest was written, or the copy heard from since then (it is starting) while nothing
 * says the parent may serve. In the second case clients meet a copy that is starting instead of a
 * port nobody serves (or a hung parent), and are served the moment it is Ready.
 */
export function wantRedirect(s: ParentState, now: number): boolean {
  if (s.policy.handover !== 'redirect' || s.state !== 'Active' || !s.checkpoint.active || s.redirect.handingBack) return false;
  if (s.redirect.copyReadyAt !== null && s.checkpointPhase === 'Ready') return true;
  return s.redirect.copyHeardAt !== null && !parentMayServe(s, now);
}

/** The agent carried out a redirect action, or found the node's redirect at its start. */
export function observeRedirected(s: ParentState, input: Extract<Input, { type: 'redirected' }>, now: number): void {
  succeeded(s, 'redirect');
  if (!input.on && s.redirect.on !== false) s.redirect.offSince = now;
  s.redirect.on = input.on;
}

/** Bring the node's redirect in line with the state. Nothing is asked of an agent whose parent never used one. */
export function reconcileRedirect(s: ParentState, now: number, actions: Action[]): void {
  const want = wantRedirect(s, now);
  if (s.redirect.on === want) return;
  if (s.redirect.on === null && !want && s.policy.handover !== 'redirect') return;
  // Unknown, and the copy not heard from yet: a redirect an earlier run left may be serving it.
  if (s.redirect.on === null && !want && s.checkpoint.active && s.checkpointPhase === null) return;
  ask(s, 'redirect', { type: 'redirect', on: want, reason: s.reason }, now, actions);
}

/**
 * Active, the parent proven Ready behind the redirect: whether the copy may retire now (the
 * redirect is gone and its connections had their time). Until then the hand-back is under way.
 */
export function handedBack(s: ParentState, now: number, actions: Action[]): boolean {
  s.redirect.handingBack = true;
  if (s.redirect.on !== false) {
    holdNote(s, R('HandingBack', 'the parent is Ready behind the redirect: removing the redirect before the copy retires'), actions);
    return false;
  }
  if (s.redirect.offSince !== null && now < s.redirect.offSince + REDIRECT_DRAIN_MS) {
    holdNote(s, R('HandingBack', "the redirect is removed: the copy's connections finish before it retires"), actions);
    return false;
  }
  return true;
}

/** The hand-back stops (the parent is not Ready any more, or the copy retired). */
export function stopHandBack(s: ParentState): void {
  s.redirect.handingBack = false;
}

/** When the copy's connections have had their time. */
export function redirectWake(s: ParentState): number | null {
  return s.redirect.handingBack && s.redirect.on === false && s.redirect.offSince !== null ? s.redirect.offSince + REDIRECT_DRAIN_MS : null;
}
