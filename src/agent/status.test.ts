import { describe, expect, it } from 'vitest';
import type { Condition } from '../kube/nodecheckpoint-types.js';
import { keepTransitionTimes } from './status.js';

const cond = (type: string, status: 'True' | 'False', at: string): Condition => ({
  type,
  status,
  reason: status === 'True' ? 'Ok' : 'Bad',
  message: '',
  lastTransitionTime: at,
});

describe('keepTransitionTimes', () => {
  it('keeps the recorded time while a condition keeps its status, and moves it when the status changes', () => {
    const recorded = [cond('PolicyValid', 'True', '2026-12-01T00:00:00.000Z'), cond('ApiReachable', 'False', '2026-12-01T00:00:00.000Z')];
    const next = [
      cond('PolicyValid', 'True', '2026-12-03T10:00:00.000Z'),
      cond('ApiReachable', 'True', '2026-12-03T10:00:00.000Z'),
      cond('New', 'True', '2026-12-03T10:00:00.000Z'),
    ];
    expect(keepTransitionTimes(recorded, next).map((c) => c.lastTransitionTime)).toEqual([
      '2026-12-01T00:00:00.000Z',
      '2026-12-03T10:00:00.000Z',
      '2026-12-03T10:00:00.000Z',
    ]);
    expect(keepTransitionTimes(undefined, next)).toEqual(next);
  });
});
