import { describe, expect, it } from 'vitest';
import { POLICY, start } from './fixtures.test-helpers.js';
import { cover, enter, holdNote, liveState, R, secs } from './transitions.js';
import type { Action } from './types.js';

describe('transitions: how a rule says what it decided', () => {
  it('a note changes the reason once, without a transition', () => {
    const s = start();
    const actions: Action[] = [];
    holdNote(s, R('Why', 'because'), actions);
    holdNote(s, R('Why', 'because'), actions);
    expect(actions).toEqual([{ type: 'note', state: 'Pending', reason: { code: 'Why', message: 'because' } }]);
    expect(s.reason.code).toBe('Why');
  });

  it('entering a state records the transition, its time and reason; entering Silent asks the live read afresh', () => {
    const s = start();
    s.confirm = { since: 1, result: 'unchanged' };
    const actions: Action[] = [];
    expect(enter(s, 'Silent', R('WindowExpired', 'quiet'), 500, actions)).toBe(true);
    expect(actions).toEqual([{ type: 'transition', from: 'Pending', to: 'Silent', reason: { code: 'WindowExpired', message: 'quiet' } }]);
    expect(s).toMatchObject({ state: 'Silent', since: 500, confirm: null });
  });

  it('a cover with a stored copy activates it; CheckpointActivated waits for the manifest to be written', () => {
    const s = start();
    const actions: Action[] = [];
    expect(cover(s, 'ParentStopping', 'stopped', 700, actions)).toBe(true);
    expect(s.state).toBe('Active');
    expect(actions.map((a) => (a.type === 'event' ? a.reason : a.type))).toEqual(['transition']);
  });

  it('without a copy, a cover says once that nothing can cover the parent (Silent, NoCheckpoint)', () => {
    const s = start(POLICY, false);
    const first: Action[] = [];
    expect(cover(s, 'ParentStopping', 'stopped', 700, first)).toBe(true);
    expect(s).toMatchObject({ state: 'Silent', reason: { code: 'NoCheckpoint' } });
    expect(first.filter((a) => a.type === 'event').map((a) => a.type === 'event' && a.eventType)).toEqual(['Warning']);
    const again: Action[] = [];
    expect(cover(s, 'Silent', 'still silent', 900, again)).toBe(false);
    expect(again).toEqual([]);
  });

  it('a fresh parent is Healthy when Ready, Starting otherwise; seconds have one decimal', () => {
    expect(liveState('Ready')).toBe('Healthy');
    expect(liveState('Starting')).toBe('Starting');
    expect(liveState(null)).toBe('Starting');
    expect(secs(12_345)).toBe('12.3s');
  });
});
