import { describe, expect, it } from 'vitest';
import { ACTION_RETRY_MAX_MS, ACTION_RETRY_MS, ACTION_TIMEOUT_MS, actionWakes, ask, due, failed, succeeded } from './actions.js';
import { start } from './fixtures.test-helpers.js';
import type { Action } from './types.js';

const retire: Action = { type: 'retire', reason: { code: 'R', message: 'm' } };

describe('actions: each file action in flight and retried on its own', () => {
  it('one of a kind in flight at a time; a report overdue by ACTION_TIMEOUT_MS asks again', () => {
    const s = start();
    const out: Action[] = [];
    expect(ask(s, 'retire', retire, 1000, out)).toBe(true);
    expect(ask(s, 'retire', retire, 1000 + ACTION_TIMEOUT_MS - 1, out)).toBe(false);
    expect(due(s, 'activate', 1001)).toBe(true);
    expect(ask(s, 'retire', retire, 1000 + ACTION_TIMEOUT_MS, out)).toBe(true);
    expect(out).toEqual([retire, retire]);
    expect(actionWakes(s)).toEqual([1000 + 2 * ACTION_TIMEOUT_MS]);
  });

  it('a failure backs off, doubling per failure in a row up to the cap; a success clears it', () => {
    const s = start();
    const times: number[] = [];
    for (let i = 0; i < 6; i++) {
      expect(failed(s, { type: 'actionFailed', action: 'activate', error: 'EIO' }, 0)).toBe('activate');
      times.push(s.retry.activate!.at);
    }
    expect(times).toEqual([1, 2, 4, 8, 12, 12].map((k) => Math.min(ACTION_RETRY_MAX_MS, k * ACTION_RETRY_MS)));
    expect(due(s, 'activate', ACTION_RETRY_MAX_MS - 1)).toBe(false);
    expect(due(s, 'capture', 0)).toBe(true);
    succeeded(s, 'activate');
    expect(due(s, 'activate', 0)).toBe(true);
    expect(actionWakes(s)).toEqual([]);
  });

  it('a failure of something that is not a file action changes nothing', () => {
    const s = start();
    expect(failed(s, { type: 'actionFailed', action: 'event', error: 'forbidden' }, 0)).toBeNull();
    expect(s.retry).toEqual({});
  });
});
