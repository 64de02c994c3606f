import { describe, expect, it } from 'vitest';
import { fixtures, POLICY } from './fixtures.test-helpers.js';
import { answerLiveRead, CONFIRM_RETRY_MS, CONFIRM_TIMEOUT_MS, judgeSilence, silenceWake, usesApiChannels } from './silence.js';
import { enter, R } from './transitions.js';
import type { Action, SilentState } from './types.js';

function silent(policy = POLICY): { state: SilentState; now: number } {
  const { state, now } = structuredClone(fixtures(policy).Silent!);
  if (state.state !== 'Silent') throw new Error(`the Silent fixture is ${state.state}`);
  return { state, now };
}

describe('silence: confirmed by a live read before it is covered', () => {
  it('asks a live read of the api channels once, again only when it goes unanswered for CONFIRM_TIMEOUT_MS', () => {
    const { state: s, now } = silent();
    s.confirm = null;
    const actions: Action[] = [];
    expect(judgeSilence(s, now, actions)).toBe(false);
    expect(actions).toEqual([{ type: 'confirm', channels: ['lease'] }]);
    expect(judgeSilence(s, now + CONFIRM_TIMEOUT_MS - 1, actions)).toBe(false);
    expect(actions).toHaveLength(1);
    expect(silenceWake(s)).toBe(now + CONFIRM_TIMEOUT_MS);
    judgeSilence(s, now + CONFIRM_TIMEOUT_MS, actions);
    expect(actions).toHaveLength(2);
  });

  it('a read that found nothing new covers the parent; a late answer to an old question does not count', () => {
    const { state: s, now } = silent();
    s.confirm = null;
    answerLiveRead(s, { type: 'confirmed', outcome: 'unchanged' }, s.lastChangeAt, now);
    expect(s.confirm).toBeNull();
    judgeSilence(s, now, []);
    answerLiveRead(s, { type: 'confirmed', outcome: 'unchanged' }, s.lastChangeAt, now + 100);
    const actions: Action[] = [];
    expect(judgeSilence(s, now + 100, actions)).toBe(true);
    expect(s).toMatchObject({ state: 'Active', reason: { code: 'SilenceConfirmed' } });
  });

  it('a read that could not reach the api-server: hold waits and asks again after CONFIRM_RETRY_MS; activate covers', () => {
    const { state: s, now } = silent();
    s.confirm = { since: now, result: 'pending' };
    answerLiveRead(s, { type: 'confirmed', outcome: 'unavailable' }, s.lastChangeAt, now + 10);
    expect(judgeSilence(s, now + 10, [])).toBe(false);
    expect(silenceWake(s)).toBe(now + 10 + CONFIRM_RETRY_MS);
    expect(judgeSilence(s, now + 10 + CONFIRM_RETRY_MS, [])).toBe('again');
    const a = silent({ ...POLICY, whenApiUnreachable: 'activate' });
    a.state.confirm = { since: a.now, result: 'unavailable' };
    expect(judgeSilence(a.state, a.now, [])).toBe(true);
    expect(a.state.reason.code).toBe('ApiUnreachable');
  });

  it('a parent on the local channel alone, or with the api-server unreachable, needs no read', () => {
    expect(usesApiChannels({ ...POLICY, channels: ['local'] })).toBe(false);
    expect(usesApiChannels(POLICY)).toBe(true);
    const { state: s, now } = silent();
    s.apiReachable = false;
    const actions: Action[] = [];
    expect(judgeSilence(s, now, actions)).toBe(false);
    expect(s.reason.code).toBe('HoldApiUnreachable');
  });

  it('the live read means nothing outside Silent: leaving Silent clears it, and a late answer is ignored', () => {
    const { state: s, now } = silent();
    expect(s.confirm).toEqual({ since: now, result: 'pending' });
    enter(s, 'Active', R('SilenceConfirmed', 'test'), now + 1, []);
    expect(s.confirm).toBeNull();
    answerLiveRead(s, { type: 'confirmed', outcome: 'unchanged' }, s.lastChangeAt, now + 2);
    expect(s.confirm).toBeNull();
  });
});
