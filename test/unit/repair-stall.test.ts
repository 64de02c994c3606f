// The real node's delete-pod measure: a kube-apiserver that lost its service repair's first run,
// told from the usual second or two of a start by the failed /readyz polls that name the hook.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REPAIR_HOOK, repairStallS } from '../node/testbed.js';

type Round = { unavailableS: number; darkAfterServed: Array<[number, number]>; darkWhy: string[][] };
const rounds = JSON.parse(readFileSync(new URL('./fixtures/delete-pod-rounds.json', import.meta.url), 'utf8')) as Record<'stalled' | 'usual', Round>;

describe('repairStallS', () => {
  it('measures the minute a stalled share failed, from two real deletions', () => {
    expect(repairStallS(rounds.stalled.darkAfterServed, rounds.stalled.darkWhy)).toBeGreaterThan(55);
    // The copy's start and its successor's both name the hook, 20 s apart: two starts, not a stall.
    const usual = repairStallS(rounds.usual.darkAfterServed, rounds.usual.darkWhy);
    expect(usual).not.toBeNull();
    expect(usual as number).toBeLessThan(5);
  });

  it('joins failures no more than 5 s apart, and only those naming the hook', () => {
    const why = `HTTP 500: [-]${REPAIR_HOOK} failed`;
    expect(repairStallS([], [])).toBeNull();
    expect(repairStallS([[1, 2]], [['HTTP 403: forbidden']])).toBeNull();
    expect(
      repairStallS(
        [
          [1, 2],
          [6.5, 7],
          [13, 14],
          [14.5, 15],
        ],
        [[why], [why], [why], ['HTTP 500: [-]shutdown failed']],
      ),
    ).toBe(6);
  });
});
