import { describe, expect, it } from 'vitest';
import { bootGrace, observeFirstVerdict, recordCarriesOver } from './boot.js';
import { initialState } from './decide.js';
import { beat, feed, POD, POLICY } from './fixtures.test-helpers.js';
import type { ParentPolicy, ParentState } from './types.js';

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

  describe('a blind kubelet starts nothing (KubeletBlind)', () => {
    /** The agent's first look at a parent with a stored copy, after a reboot. */
    const rebootedStart = (policy: ParentPolicy = ACTIVATE, kubeletUnheard = true): ParentState =>
      initialState({
        namespace: 'kube-system',
        key: 'kube-apiserver',
        policy,
        now: 0,
        rebooted: true,
        kubeletUnheard,
        checkpoint: { stored: true, active: false, specHash: 'h1' },
      });
    /** After a reboot, the agent hears an api-server (through the other masters) and nothing of the parent. */
    const rebootedHearingApi = (policy: ParentPolicy = ACTIVATE, kubeletUnheard = true): ParentState =>
      feed(rebootedStart(policy, kubeletUnheard), [
        [300, { type: 'api', reachable: true }],
        [400, { type: 'pod', pod: POD }],
      ]).state;

    it('a kubelet not renewed since the boot ends the grace, and the live read covers with its reason', () => {
      const s = rebootedHearingApi();
      expect(s.graceEndsIfKubeletBlind).toBe(true);
      expect(s.graceUntil).toBe(300 + ACTIVATE.startupGraceMs);
      const r = feed(s, [[2000, { type: 'kubelet', reachedApi: false }]]);
      expect(r.state.state).toBe('Silent');
      expect(r.actions).toContainEqual({ type: 'confirm', channels: ['lease'] });
      const c = feed(r.state, [[2100, { type: 'confirmed', outcome: 'unchanged' }]]);
      expect(c.state.state).toBe('Active');
      expect(c.state.reason.code).toBe('KubeletBlind');
      expect(c.actions.some((a) => a.type === 'activate' && a.reason.code === 'KubeletBlind')).toBe(true);
    });

    it('a kubelet that reached an api-server closes the question: the grace runs its course', () => {
      const r = feed(rebootedHearingApi(), [
        [2000, { type: 'kubelet', reachedApi: true }],
        [2500, { type: 'kubelet', reachedApi: false }],
        [3000, { type: 'tick' }],
      ]);
      expect(r.state.state).toBe('Pending');
      expect(r.state.graceEndsIfKubeletBlind).toBeUndefined();
      expect(r.actions.some((a) => a.type === 'activate')).toBe(false);
    });

    it('a changed beat of the parent since the agent started wins over the kubelet verdict', () => {
      const r = feed(rebootedHearingApi(), [
        [900, { type: 'beat', beat: beat('Starting') }], // the first is a baseline only
        [1000, { type: 'beat', beat: beat('Starting') }],
        [2000, { type: 'kubelet', reachedApi: false }],
        [3000, { type: 'tick' }],
      ]);
      expect(r.state.state).toBe('Starting');
      expect(r.actions.some((a) => a.type === 'activate' || a.type === 'confirm')).toBe(false);
    });

    it('while no api-server answers the reboot rule decides, and the question stays open for a later verdict', () => {
      const s = feed(rebootedStart(), [[300, { type: 'api', reachable: false }]]).state;
      // The reboot rule covered it already (no grace); the verdict changes nothing there.
      expect(s.state).toBe('Active');
      expect(s.reason.code).toBe('ApiUnreachable');
      const waiting = feed(rebootedStart(), [[1000, { type: 'kubelet', reachedApi: false }]]).state;
      expect(waiting.graceEndsIfKubeletBlind).toBe(true);
      const heard = feed(waiting, [
        [1500, { type: 'api', reachable: true }],
        [1600, { type: 'pod', pod: POD }],
        [2000, { type: 'kubelet', reachedApi: false }],
      ]);
      expect(heard.state.state).toBe('Silent');
      expect(heard.state.reason.code).not.toBe('AgentStarted');
    });

    it('only after a reboot, and only for a parent whose absence is the failure', () => {
      expect(rebootedHearingApi(POLICY).graceEndsIfKubeletBlind).toBeUndefined();
      expect(rebootedHearingApi(ACTIVATE, false).graceEndsIfKubeletBlind).toBeUndefined();
      const hold = feed(rebootedHearingApi(POLICY), [
        [2000, { type: 'kubelet', reachedApi: false }],
        [3000, { type: 'tick' }],
      ]);
      expect(hold.state.state).toBe('Pending');
    });
  });
});
