import { describe, expect, it } from 'vitest';
import { decide, initialState } from './decide.js';
import { beat, feed, fixtures, POD, POLICY } from './fixtures.test-helpers.js';
import { OVERLAP_EXITS_FOR_VERDICT } from './probation.js';
import { REDIRECT_DRAIN_MS } from './redirect.js';
import type { Action, Input, ParentState } from './types.js';

const REDIRECT = { ...POLICY, handover: 'redirect' as const, redirect: { port: 6443, copyPort: 16443, exceptAddress: '127.0.0.2' } };
const copyBeat = (phase: 'Starting' | 'Ready') => beat(phase, { role: 'checkpoint', holder: 'copy', holderUid: 'copy-1' });
const redirects = (actions: Action[]) => actions.filter((a) => a.type === 'redirect').map((a) => a.type === 'redirect' && a.on);
const kinds = (actions: Action[]) => actions.map((a) => (a.type === 'event' ? `event:${a.reason}` : a.type));

/** A redirect parent Active since 6700 (the node's first answer: no redirect stands). */
function activeSettled(): ParentState {
  return feed(structuredClone(fixtures(REDIRECT).Active!.state), [[6750, { type: 'redirected', on: false }]]).state;
}

/** The same, its copy Ready at 7700 and the redirect standing from 7800. */
function behindRedirect(): ParentState {
  const active = activeSettled();
  const r = feed(active, [
    [7700, { type: 'beat', beat: copyBeat('Ready') }],
    [7800, { type: 'redirected', on: true }],
  ]);
  return r.state;
}

/** Active for a pod being deleted that beat Ready at 6900 (its shutdown pause): the deletion cover. */
function beingDeleted(): ParentState {
  const s = activeSettled();
  return Object.assign(s, { phase: 'Ready' as const, lastChangeAt: 6900, holderUid: 'pod-old', deleting: { uid: 'pod-old', name: 'kube-apiserver-old' } });
}

describe('hand-over behind the redirect', () => {
  it('a parent that may be serving (its last beat Ready and fresh): the redirect stands once the copy, as last written, beats Ready; not before', () => {
    // A pod being deleted serves on through its shutdown pause and beats Ready meanwhile.
    const serving = beingDeleted();
    const starting = feed(serving, [[7000, { type: 'beat', beat: copyBeat('Starting') }]]);
    expect(redirects(starting.actions)).toEqual([]);
    const ready = feed(starting.state, [[7700, { type: 'beat', beat: copyBeat('Ready') }]]);
    expect(redirects(ready.actions)).toEqual([true]);
  });

  it("a parent's Ready that is no longer fresh does not hold the redirect back once the copy beats", () => {
    const serving = beingDeleted();
    const window = serving.policy.windowMs;
    const fresh = feed(serving, [[7000, { type: 'beat', beat: copyBeat('Starting') }]]);
    expect(redirects(fresh.actions)).toEqual([]);
    const stale = feed(fresh.state, [[6900 + window + 1, { type: 'beat', beat: copyBeat('Starting') }]]);
    expect(redirects(stale.actions)).toEqual([true]);
  });

  it("nothing says the parent serves (silent, as after a power cycle): the redirect stands from the copy's first beat, before its Ready", () => {
    const s = activeSettled();
    expect(s.phase === 'Ready' && s.lastChangeAt !== null && 7000 - s.lastChangeAt <= s.policy.windowMs).toBe(false);
    const quiet = feed(s, [[6900, { type: 'tick' }]]);
    expect(redirects(quiet.actions)).toEqual([]);
    const starting = feed(quiet.state, [[7000, { type: 'beat', beat: copyBeat('Starting') }]]);
    expect(redirects(starting.actions)).toEqual([true]);
    // A parent starting behind it changes nothing.
    const parent = feed(starting.state, [
      [7100, { type: 'redirected', on: true }],
      [7500, { type: 'beat', beat: beat('Starting') }],
    ]);
    expect(redirects(parent.actions)).toEqual([]);
  });

  it('a parent starting behind it changes nothing; once it is proven Ready the redirect goes, the copy drains, then retires', () => {
    const s = behindRedirect();
    const starting = feed(s, [
      [9000, { type: 'beat', beat: beat('Starting') }],
      [10_000, { type: 'beat', beat: beat('Starting') }],
    ]);
    expect(kinds(starting.actions)).not.toContain('retire');
    expect(starting.state.state).toBe('Active');
    const ready = feed(starting.state, [[11_000, { type: 'beat', beat: beat('Ready') }]]);
    expect(redirects(ready.actions)).toEqual([false]);
    expect(kinds(ready.actions)).not.toContain('retire');
    expect(ready.state.reason.code).toBe('HandingBack');
    const off = decide(ready.state, { type: 'redirected', on: false }, 11_100);
    expect(kinds(off.actions)).not.toContain('retire');
    expect(off.wakeAt).toBe(11_100 + REDIRECT_DRAIN_MS);
    const drained = feed(off.state, [
      [11_500, { type: 'beat', beat: beat('Ready') }],
      [11_100 + REDIRECT_DRAIN_MS, { type: 'tick' }],
    ]);
    expect(kinds(drained.actions)).toEqual(expect.arrayContaining(['retire', 'event:CheckpointRetired']));
    expect(drained.state.state).toBe('Healthy');
    expect(redirects(drained.actions)).toEqual([]);
  });

  it('a parent that is not Ready any more during the hand-back gets the redirect back', () => {
    const s = behindRedirect();
    const back = feed(s, [
      [9000, { type: 'beat', beat: beat('Ready') }],
      [9100, { type: 'redirected', on: false }],
      [9500, { type: 'beat', beat: beat('Starting') }],
    ]);
    expect(redirects(back.actions)).toEqual([false, true]);
    expect(kinds(back.actions)).not.toContain('retire');
  });

  it("a hung parent is covered and fenced at once: the redirect takes new clients, the fence ends the established ones (the kubelet's)", () => {
    const healthy = structuredClone(fixtures(REDIRECT).Healthy!.state);
    const hung = (n: number): Input => ({ type: 'beat', beat: beat('Ready', { channel: 'local', unanswered: true, afterReady: true, sequence: 1000 + n }) });
    const r = feed(healthy, [
      [2500, hung(1)],
      [3500, hung(2)],
      [4500, hung(3)],
      [5500, hung(4)],
    ]);
    expect(r.state.state).toBe('Active');
    expect(r.state.reason.code).toBe('ParentHung');
    expect(kinds(r.actions)).toEqual(expect.arrayContaining(['activate', 'fence']));
    expect(r.actions.filter((a) => a.type === 'fence')).toHaveLength(1);
  });

  it("a bad spec's exits behind it are a verdict, said, and never rewrite the copy; the copy's own spec exiting fast is no sign of anything", () => {
    const s = behindRedirect();
    s.pod = { ...POD, restarts: 0 };
    s.phase = 'Starting';
    const base = feed(s, [[8000, { type: 'pod', pod: { ...POD, specHash: 'h-bad', restarts: 0 } }]]);
    const exits = feed(base.state, [
      [8500, { type: 'beat', beat: beat('Starting') }],
      [9000, { type: 'pod', pod: { ...POD, specHash: 'h-bad', restarts: OVERLAP_EXITS_FOR_VERDICT } }],
    ]);
    expect(exits.state.knownBad).toMatchObject({ specHash: 'h-bad', strikes: 1 });
    expect(kinds(exits.actions)).toContain('event:KnownBadSpec');
    expect(exits.actions.filter((a) => a.type === 'activate')).toEqual([]);
    const own = feed(base.state, [[9000, { type: 'pod', pod: { ...POD, restarts: 1, lastExitRanMs: 100 } }]]);
    expect(own.state.overlapFallback).toBeNull();
    expect(kinds(own.actions)).not.toContain('event:OverlapUnavailable');
  });

  it('a redirect found on the node at start is removed for a parent that does not use one; nothing is asked while none is known', () => {
    const s = initialState({ namespace: 'kube-system', key: 'kube-apiserver', policy: POLICY, now: 0 });
    expect(redirects(decide(s, { type: 'tick' }, 0).actions)).toEqual([]);
    expect(redirects(decide(s, { type: 'redirected', on: true }, 0).actions)).toEqual([false]);
  });

  it('a failed redirect is asked again after the action back-off', () => {
    const r = feed(activeSettled(), [
      [7700, { type: 'beat', beat: copyBeat('Ready') }],
      [7800, { type: 'actionFailed', action: 'redirect', error: 'nft: Operation not permitted' }],
      [8000, { type: 'tick' }],
    ]);
    expect(redirects(r.actions)).toEqual([true]);
    const later = decide(r.state, { type: 'tick' }, 13_000);
    expect(redirects(later.actions)).toEqual([true]);
  });
});

describe('the redirect never outlives its copy', () => {
  it('a parent orphaned while the redirect stands has it removed', () => {
    const s = behindRedirect();
    const r = feed(s, [
      [8000, { type: 'pod', pod: null }],
      [8000 + 61_000, { type: 'tick' }],
    ]);
    expect(r.state.state).toBe('Orphaned');
    expect(redirects(r.actions)).toContain(false);
  });
});

describe("the copy's Ready, whatever its uid", () => {
  it('a copy written again under the uid of the one before (a static pod is named by its manifest) stands the redirect once a new Ready beat is seen; the old beat seen again does not', () => {
    const s = behindRedirect();
    const stale = copyBeat('Ready');
    const again = feed(s, [
      [8000, { type: 'beat', beat: stale }],
      [9000, { type: 'retired' }],
      [9100, { type: 'redirected', on: false }],
    ]);
    // Active again after a reboot or a retire: the manifest written, the same uid beating.
    const active = structuredClone(again.state) as ParentState;
    Object.assign(active, { state: 'Active', confirm: null, checkpoint: { ...again.state.checkpoint, active: false } });
    const written = feed(active, [
      [10_000, { type: 'activated' }],
      [10_100, { type: 'beat', beat: stale }],
    ]);
    expect(written.state.redirect.copyReadyAt).toBeNull();
    expect(redirects(written.actions)).toEqual([]);
    const fresh = feed(written.state, [[11_000, { type: 'beat', beat: copyBeat('Ready') }]]);
    expect(redirects(fresh.actions)).toEqual([true]);
  });
});
