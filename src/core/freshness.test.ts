import { describe, expect, it } from 'vitest';
import { beat, POD, POLICY, start } from './fixtures.test-helpers.js';
import {
  beatFingerprint,
  changedBeat,
  fresh,
  freshnessWakes,
  judgeLive,
  judgingWindowMs,
  noteWindow,
  observeBeat,
  readyProven,
  regrace,
  takeHeldBeat,
  windowReason,
} from './freshness.js';
import type { Action } from './types.js';

describe('freshness: alive by the agent’s own clock', () => {
  it('a first sighting on a channel is a baseline; the next change is a proof of life', () => {
    const s = start();
    observeBeat(s, beat('Ready'), 1000);
    expect(s.lastChangeAt).toBeNull();
    observeBeat(s, beat('Ready'), 2000);
    expect(s).toMatchObject({ lastChangeAt: 2000, phase: 'Ready', holderUid: POD.uid });
    expect(fresh(s, 2000 + POLICY.windowMs)).toBe(true);
    expect(fresh(s, 2001 + POLICY.windowMs)).toBe(false);
  });

  it('one round on two channels counts once; the same beat again on one channel is no change', () => {
    const s = start();
    observeBeat(s, beat('Ready'), 1000);
    observeBeat(s, beat('Ready', { channel: 'local' }), 1000);
    const b = beat('Ready');
    observeBeat(s, b, 2000);
    observeBeat(s, { ...b, channel: 'local' }, 3000);
    expect(s.lastChangeAt).toBe(2000);
    observeBeat(s, b, 3500);
    expect(s.lastChangeAt).toBe(2000);
  });

  it('a beat of a holder the api-server does not list is refused, never a sign of life', () => {
    const s = start();
    observeBeat(s, beat('Ready', { holder: 'intruder', holderUid: 'u9' }), 1000);
    observeBeat(s, beat('Ready', { holder: 'intruder', holderUid: 'u9' }), 2000);
    expect(s.lastChangeAt).toBeNull();
  });

  it('did the beat change: a live read differing from the last beat seen on its channel', () => {
    const s = start();
    const b = beat('Ready');
    observeBeat(s, b, 1000);
    expect(changedBeat(s, [b])).toBeNull();
    expect(changedBeat(s, [{ ...b, role: 'checkpoint', sequence: 99 }])).toBeNull();
    const next = { ...b, sequence: b.sequence + 1 };
    expect(changedBeat(s, [b, next])).toBe(next);
    expect(beatFingerprint(next)).not.toBe(beatFingerprint(b));
  });

  it('a parent is judged by twice the interval it declares when that is longer than the window, and says so once', () => {
    const s = start();
    observeBeat(s, beat('Ready', { intervalMs: 5000 }), 1000);
    expect(judgingWindowMs(s)).toBe(10_000);
    const actions: Action[] = [];
    noteWindow(s, actions);
    noteWindow(s, actions);
    expect(actions.map((a) => a.type === 'event' && a.reason)).toEqual(['WindowBelowInterval']);
    s.state = 'Healthy';
    windowReason(s, actions);
    expect(s.reason.code).toBe('WindowBelowInterval');
  });

  it('a first sighting late in the grace leaves the parent one (widened) window for its next beat', () => {
    const s = start();
    observeBeat(s, beat('Ready', { intervalMs: 5000 }), 5000);
    expect(s.graceUntil).toBe(15_000);
    expect(freshnessWakes(s)).toEqual([null, 15_000, null]);
  });

  it('a new policy re-measures a running grace from its start', () => {
    const s = start();
    regrace(s, { ...POLICY, startupGraceMs: 10_000 }, 1000);
    expect(s.graceUntil).toBe(10_000);
  });

  it('an unprobed Ready is proven only by the api-server’s Ready condition of that pod', () => {
    const s = start();
    observeBeat(s, beat('Ready', { unprobed: true }), 1000);
    observeBeat(s, beat('Ready', { unprobed: true }), 2000);
    expect(readyProven(s)).toBe(false);
    s.pod = { ...POD, ready: true };
    expect(readyProven(s)).toBe(true);
  });

  it('a beat that came before the pod list naming its holder is taken when that list arrives', () => {
    const s = start();
    const early = beat('Ready', { holder: 'new-pod', holderUid: 'u2' });
    observeBeat(s, early, 1000);
    s.pod = { uid: 'u2', name: 'new-pod', specHash: 'h2' };
    expect(takeHeldBeat(s)).toEqual(early);
    expect(s.seen.lease).toBe('held');
  });

  it('judging a live parent: Healthy or Starting by phase, covered on a deliberate stop, Silent after the grace', () => {
    const s = start();
    observeBeat(s, beat('Starting'), 1000);
    observeBeat(s, beat('Starting'), 2000);
    const actions: Action[] = [];
    expect(judgeLive(s, 2000, actions)).toBe(true);
    expect(s.state).toBe('Starting');
    // Still Starting, beating, past startTimeout: covered.
    observeBeat(s, beat('Starting'), 2001 + POLICY.startTimeoutMs);
    expect(s.startingSince).toBe(2000);
    expect(judgeLive(s, 2001 + POLICY.startTimeoutMs, actions)).toBe(true);
    expect(s).toMatchObject({ state: 'Active', reason: { code: 'StartTimeout' } });
    const quiet = start();
    expect(judgeLive(quiet, POLICY.startupGraceMs - 1, actions)).toBe(false);
    expect(judgeLive(quiet, POLICY.startupGraceMs, actions)).toBe(true);
    expect(quiet).toMatchObject({ state: 'Silent', reason: { code: 'NoBeat' } });
    const stopping = start();
    observeBeat(stopping, beat('Ready'), 1000);
    observeBeat(stopping, beat('Stopping'), 2000);
    expect(judgeLive(stopping, 2000, actions)).toBe(true);
    expect(stopping.state).toBe('Active');
  });
});
