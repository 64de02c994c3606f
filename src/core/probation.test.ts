import { describe, expect, it } from 'vitest';
import { initialState } from './decide.js';
import { POLICY } from './fixtures.test-helpers.js';
import {
  holds,
  holdsPod,
  nextTry,
  PROBATION,
  PROBATION_INITIAL_MS,
  PROBATION_MAX_MS,
  probationMs,
  recovered,
  sharesOnAfterVerdict,
  strike,
} from './probation.js';

const BAD = { specHash: 'h-bad', uid: 'u2' };

describe('probation: a verdict that expires on a back-off schedule', () => {
  it.each([
    [1, PROBATION_INITIAL_MS],
    [2, 2 * PROBATION_INITIAL_MS],
    [3, 4 * PROBATION_INITIAL_MS],
    [10, PROBATION_MAX_MS],
    [0, PROBATION_INITIAL_MS],
  ])('strike %i holds the spec %i ms', (strikes, ms) => {
    expect(probationMs(strikes)).toBe(ms);
  });

  it('each failure of the same spec is one more strike; another spec starts again at one', () => {
    const a = strike(null, BAD, 1000);
    expect(a).toEqual({ specHash: 'h-bad', podUid: 'u2', since: 1000, strikes: 1, until: 1000 + PROBATION_INITIAL_MS });
    const b = strike(a, { specHash: 'h-bad', uid: 'u3' }, 90_000);
    expect(b).toMatchObject({ strikes: 2, podUid: 'u3', until: 90_000 + 2 * PROBATION_INITIAL_MS });
    expect(strike(b, { specHash: 'h-other', uid: 'u4' }, 100_000)).toMatchObject({ strikes: 1, specHash: 'h-other' });
  });

  it('holds until its end, and only for the held spec', () => {
    const v = strike(null, BAD, 0);
    expect(holds(v, PROBATION_INITIAL_MS - 1)).toBe(true);
    expect(holds(v, PROBATION_INITIAL_MS)).toBe(false);
    expect(holds(null, 0)).toBe(false);
    expect(holdsPod(v, { specHash: 'h-bad' }, 10)).toBe(true);
    expect(holdsPod(v, { specHash: 'h-new' }, 10)).toBe(false);
    expect(holdsPod(v, null, 10)).toBe(false);
  });

  it('says when the spec is tried again', () => {
    const v = strike(null, BAD, 0);
    expect(nextTry(v, 0)).toBe('in 30m');
    expect(nextTry(v, 1_770_000)).toBe('in 30s');
    expect(nextTry(v, 2_000_000)).toBe('now');
    expect(nextTry(strike(v, BAD, 0), 10_000)).toBe('in 59m50s');
    expect(nextTry(strike(null, BAD, 0, PROBATION.overlap), 0)).toBe('in 30m');
  });

  it('read back from the record: strikes kept; the time left kept within a boot, a full probation after a reboot or when unreadable', () => {
    const rec = { specHash: 'h-bad', podUid: 'u2', strikes: 2, remainingMs: 30_000 };
    expect(recovered(rec, 500, false)).toEqual({ specHash: 'h-bad', podUid: 'u2', since: 500, strikes: 2, until: 30_500 });
    expect(recovered(rec, 500, true).until).toBe(500 + probationMs(2));
    // A wall clock that stepped cannot stretch it past one full probation, nor make it negative.
    expect(recovered({ ...rec, remainingMs: 10 * PROBATION_MAX_MS }, 0, false).until).toBe(probationMs(2));
    expect(recovered({ ...rec, remainingMs: -5 }, 0, false).until).toBe(0);
    // An older record (no strikes, no time left): one strike, a full probation.
    expect(recovered({ specHash: 'h-bad', podUid: 'u2' }, 0, false)).toMatchObject({ strikes: 1, until: PROBATION_INITIAL_MS });
  });
});

describe('a boot voids deadlines', () => {
  const base = { namespace: 'kube-system', key: 'kube-apiserver', policy: { ...POLICY, whenApiUnreachable: 'activate' as const }, now: 10_000 };
  const inProgress = {
    remainingMs: 50_000,
    attempts: 3,
    nextBackoffMs: 240_000,
    knownBad: { specHash: 'h-bad', podUid: 'u2', strikes: 2, remainingMs: 5_000 },
  };
  const stored = { stored: true, active: false, specHash: 'h1' };

  it('within a boot, a hand-over in progress resumes with its deadline, attempts and back-off', () => {
    const s = initialState({ ...base, checkpoint: stored, handover: inProgress });
    expect(s.state).toBe('HandingOver');
    expect(s.handover).toMatchObject({ attempts: 3, deadline: 10_000 + Math.min(POLICY.handoverTimeoutMs, 50_000), nextBackoffMs: 240_000 });
    expect(s.knownBad).toMatchObject({ strikes: 2, until: 15_000 });
  });

  it('after a reboot it is not resumed: the parent is judged afresh, no deadline, attempts or back-off carried over; the verdict keeps its strikes with a full probation', () => {
    const s = initialState({ ...base, checkpoint: stored, handover: inProgress, recordFromEarlierBoot: true, rebooted: true, apiReachable: false });
    expect(s.state).toBe('Pending');
    expect(s.handover).toEqual({ attempts: 0, deadline: null, notBefore: 10_000, nextBackoffMs: POLICY.handoverBackoff.initialMs });
    // The reboot rule: no api-server answers, so an `activate` parent is covered without a grace.
    expect(s.graceUntil).toBe(10_000);
    expect(s.knownBad).toMatchObject({ specHash: 'h-bad', strikes: 2, until: 10_000 + probationMs(2) });
  });
});

describe('overlap: after a verdict the copy keeps sharing only when the held spec fails as it starts', () => {
  it.each([
    ['a run as long as the copy took to be Ready', 15_000, 15_000, true],
    ['a run within the slack beyond it', 19_000, 15_000, true],
    ['a run longer than that (it held its share while it limped)', 21_000, 15_000, false],
  ] as const)('%s', (_what, ranMs, readyAfter, shares) => {
    const v = strike(null, { ...BAD, lastExitRanMs: ranMs }, 1000, PROBATION.overlap);
    expect(v.ranMs).toBe(ranMs);
    expect(sharesOnAfterVerdict(v, readyAfter, 5_000, true)).toBe(shares);
    expect(sharesOnAfterVerdict(v, readyAfter, 5_000, false)).toBe(shares);
  });

  it.each([
    ['an unknown run', undefined, 15_000],
    ["an unknown copy's time to Ready (an agent restarted since)", 1_000, null],
    ['a verdict read back from the record (no run on it)', 'recovered', 15_000],
  ] as const)('%s: the copy stays as it runs, sharing or not', (_what, ranMs, readyAfter) => {
    const v =
      ranMs === 'recovered'
        ? recovered({ specHash: BAD.specHash, podUid: BAD.uid, strikes: 1, remainingMs: 60_000 }, 0, false, PROBATION.overlap)
        : strike(null, ranMs === undefined ? BAD : { ...BAD, lastExitRanMs: ranMs }, 1000, PROBATION.overlap);
    expect(sharesOnAfterVerdict(v, readyAfter, 5_000, true)).toBe(true);
    expect(sharesOnAfterVerdict(v, readyAfter, 5_000, false)).toBe(false);
  });
});
