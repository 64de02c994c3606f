import { describe, expect, it } from 'vitest';
import { fixtures, POLICY } from './fixtures.test-helpers.js';
import { gcDue, gcWake, judgeOrphaned, judgeScheduled, observeScheduling, observeSchedulingUnknown, reconcileCollect, schedulingLost } from './gc.js';
import type { Action } from './types.js';

describe('gc: collection only with the api-server’s word', () => {
  it('no pod scheduled here for gcGrace, heard without a break: Orphaned, and the collection is asked for', () => {
    const { state: s } = structuredClone(fixtures().Healthy!);
    s.pod = null;
    observeScheduling(s, null, 3000);
    observeScheduling(s, null, 4000); // the clock runs from the first list without a pod
    expect(gcWake(s)).toBe(3000 + POLICY.gcGraceMs);
    expect(gcDue(s, 3000 + POLICY.gcGraceMs - 1)).toBe(false);
    const actions: Action[] = [];
    expect(judgeScheduled(s, 3000 + POLICY.gcGraceMs, actions)).toBe(true);
    expect(s.state).toBe('Orphaned');
    reconcileCollect(s, 3000 + POLICY.gcGraceMs, actions);
    expect(actions.map((a) => a.type)).toEqual(['transition', 'collect']);
  });

  it('never while the api-server is unreachable, and an outage or a failed watch starts the clock again', () => {
    const { state: s } = structuredClone(fixtures().Healthy!);
    s.pod = null;
    observeScheduling(s, null, 3000);
    s.apiReachable = false;
    expect(gcDue(s, 3000 + POLICY.gcGraceMs)).toBe(false);
    s.apiReachable = true;
    schedulingLost(s);
    expect(gcWake(s)).toBeNull();
    observeScheduling(s, null, 5000);
    s.inflight.collect = 5000;
    observeSchedulingUnknown(s);
    expect(s.unscheduledSince).toBeNull();
    expect(s.inflight.collect).toBeUndefined();
  });

  it('Orphaned: the word lost before the files are gone cancels the collection; a pod again makes it Pending', () => {
    const o = structuredClone(fixtures().Orphaned!);
    o.state.unscheduledSince = null;
    const actions: Action[] = [];
    expect(judgeOrphaned(o.state, o.now, actions)).toBe(true);
    expect(o.state).toMatchObject({ state: 'Pending', reason: { code: 'CollectionCancelled' } });
    const back = structuredClone(fixtures().Orphaned!);
    back.state.pod = { uid: 'u2', name: 'p', specHash: 'h1' };
    expect(judgeOrphaned(back.state, back.now, [])).toBe(true);
    expect(back.state.reason.code).toBe('Rescheduled');
    expect(back.state.graceUntil).toBe(back.now + POLICY.startupGraceMs);
  });
});
