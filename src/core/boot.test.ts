import { describe, expect, it } from 'vitest';
import { bootGrace, observeFirstVerdict, recordCarriesOver } from './boot.js';
import { initialState } from './decide.js';
import { POLICY } from './fixtures.test-helpers.js';

const ACTIVATE = { ...POLICY, whenApiUnreachable: 'activate' as const };

describe('boot: the reboot rule, and a boot voids deadlines', () => {
  it('after a reboot with no api-server answering, an activate parent gets no grace; once the agent knows', () => {
    expect(bootGrace({ policy: ACTIVATE, rebooted: true, apiReachable: false })).toEqual({ noGrace: true, untilHeard: false });
    expect(bootGrace({ policy: ACTIVATE, rebooted: true })).toEqual({ noGrace: false, untilHeard: true });
    expect(bootGrace({ policy: ACTIVATE, rebooted: true, apiReachable: true })).toEqual({ noGrace: false, untilHeard: false });
    expect(bootGrace({ policy: POLICY, rebooted: true, apiReachable: false })).toEqual({ noGrace: false, untilHeard: false });
    expect(bootGrace({ policy: ACTIVATE, apiReachable: false })).toEqual({ noGrace: false, untilHeard: false });
  });

  it("the agent's first verdict ends the grace only if it says unreachable and nothing was seen yet", () => {
    const s = initialState({ namespace: 'n', key: 'k', policy: ACTIVATE, now: 0, rebooted: true });
    expect(s.graceEndsIfUnreachable).toBe(true);
    observeFirstVerdict(s, false, 500);
    expect(s.graceUntil).toBe(500);
    expect(s.graceEndsIfUnreachable).toBeUndefined();
    const heard = initialState({ namespace: 'n', key: 'k', policy: ACTIVATE, now: 0, rebooted: true });
    observeFirstVerdict(heard, true, 500);
    observeFirstVerdict(heard, false, 600); // only the first verdict counts
    expect(heard.graceUntil).toBe(ACTIVATE.startupGraceMs);
  });

  it('a hand-over record carries over only within the boot that wrote it', () => {
    expect(recordCarriesOver({ policy: POLICY })).toBe(true);
    expect(recordCarriesOver({ policy: POLICY, recordFromEarlierBoot: true })).toBe(false);
  });
});
