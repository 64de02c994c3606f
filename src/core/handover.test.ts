import { describe, expect, it } from 'vitest';
import { beat, fixtures, POLICY } from './fixtures.test-helpers.js';
import { observeBeat } from './freshness.js';
import {
  capBackoff,
  HANDOVER_ATTEMPTS_BEFORE_GROWTH,
  handoverJitter,
  handoverToPersist,
  handoverWakes,
  handoverWindowMs,
  initialHandover,
  judgeHandingOver,
  judgeReturn,
} from './handover.js';
import type { Action } from './types.js';

const events = (as: Action[]) => as.flatMap((a) => (a.type === 'event' ? [a.reason] : []));

describe('handover: retire on return, a window to be Ready, a growing back-off', () => {
  it('the window is handoverTimeout for the first attempts, then doubles, capped; the pause spreads 0-25% by id and attempt', () => {
    const p = { ...POLICY, handoverTimeoutMs: 10_000, handoverBackoff: { initialMs: 5000, maxMs: 40_000 } };
    const windows = [1, 2, 3, 4, 5, 6].map((n) => handoverWindowMs(p, n));
    expect(HANDOVER_ATTEMPTS_BEFORE_GROWTH).toBe(2);
    expect(windows).toEqual([10_000, 10_000, 20_000, 40_000, 40_000, 40_000]);
    const j = handoverJitter('kube-system/kube-apiserver', 1);
    expect(j).toBeGreaterThanOrEqual(0);
    expect(j).toBeLessThan(0.25);
    expect(handoverJitter('kube-system/kube-apiserver', 1)).toBe(j);
    expect(handoverJitter('kube-system/kube-apiserver', 2)).not.toBe(j);
  });

  it('Active, the parent back and Starting: a hand-over with a deadline; back and Ready: retired at once', () => {
    const a = structuredClone(fixtures().Active!);
    observeBeat(a.state, beat('Starting'), 7000);
    const actions: Action[] = [];
    expect(judgeReturn(a.state, 7000, actions)).toBe(true);
    expect(a.state).toMatchObject({ state: 'HandingOver', handover: { attempts: 1, deadline: 7000 + POLICY.handoverTimeoutMs } });
    expect(events(actions)).toEqual(['HandoverStarted']);
    const r = structuredClone(fixtures().Active!);
    observeBeat(r.state, beat('Ready'), 7000);
    expect(judgeReturn(r.state, 7000, actions)).toBe(true);
    expect(r.state).toMatchObject({ state: 'Healthy', reason: { code: 'ParentReady' }, handover: { attempts: 0 } });
  });

  it('no Ready by the deadline: Active again, the next hand-over after the jittered back-off, which doubles up to its cap', () => {
    const { state: s } = structuredClone(fixtures().HandingOver!);
    const deadline = s.handover.deadline!;
    expect(handoverWakes(s)).toEqual([null, deadline]);
    expect(judgeHandingOver(s, deadline - 1, [])).toBe(false);
    const actions: Action[] = [];
    expect(judgeHandingOver(s, deadline, actions)).toBe(true);
    expect(events(actions)).toEqual(['HandoverFailed']);
    const pause = POLICY.handoverBackoff.initialMs;
    expect(s.handover).toMatchObject({ deadline: null, nextBackoffMs: 2 * pause });
    expect(s.handover.notBefore).toBe(deadline + Math.round(pause * (1 + handoverJitter(s.id, 1))));
    expect(handoverWakes(s)).toEqual([s.handover.notBefore, null]);
    capBackoff(s, { ...POLICY, handoverBackoff: { initialMs: 1000, maxMs: 6000 } });
    expect(s.handover.nextBackoffMs).toBe(6000);
  });

  it('the record: a deadline in progress, or a standing verdict; read back clamped to one handoverTimeout', () => {
    const { state: s, now } = structuredClone(fixtures().HandingOver!);
    expect(handoverToPersist(s, now)).toEqual({ remainingMs: s.handover.deadline! - now, attempts: 1, nextBackoffMs: POLICY.handoverBackoff.initialMs });
    expect(handoverToPersist(fixtures().Healthy!.state, 0)).toBeNull();
    expect(initialHandover(POLICY, 100, { remainingMs: 10 * POLICY.handoverTimeoutMs, attempts: 3, nextBackoffMs: 9000 })).toEqual({
      attempts: 3,
      deadline: 100 + POLICY.handoverTimeoutMs,
      notBefore: 100,
      nextBackoffMs: 9000,
    });
    expect(initialHandover(POLICY, 100, { remainingMs: Number.NaN, attempts: 1, nextBackoffMs: 1 }).deadline).toBe(100);
    expect(initialHandover(POLICY, 100, null)).toEqual({ attempts: 0, deadline: null, notBefore: 100, nextBackoffMs: POLICY.handoverBackoff.initialMs });
  });
});
