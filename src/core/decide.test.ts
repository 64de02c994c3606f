// Table tests for the core: every state (reached by driving decide() from a fresh start) against
// every kind of input, then the time-driven rules one by one.
import { describe, expect, it } from 'vitest';
import { ACTION_TIMEOUT_MS } from './actions.js';
import { CONFIRM_TIMEOUT_MS, decide, handoverToPersist, handoverWindowMs, initialState, judgingWindowMs, OWN_SPEC_BIND_SLACK_MS } from './decide.js';
import { beat, drive, feed, fixtures, POD, POLICY, start } from './fixtures.test-helpers.js';
import { OVERLAP_EXITS_FOR_VERDICT, PROBATION } from './probation.js';
import { type Action, type Input, type ParentState, reasonText } from './types.js';

const inputs: Record<string, () => Input> = {
  tick: () => ({ type: 'tick' }),
  beatReady: () => ({ type: 'beat', beat: beat('Ready') }),
  beatStarting: () => ({ type: 'beat', beat: beat('Starting') }),
  beatStopping: () => ({ type: 'beat', beat: beat('Stopping') }),
  beatCheckpoint: () => ({ type: 'beat', beat: beat('Ready', { role: 'checkpoint' }) }),
  confirmedUnchanged: () => ({ type: 'confirmed', outcome: 'unchanged' }),
  confirmedUnavailable: () => ({ type: 'confirmed', outcome: 'unavailable' }),
  confirmedChanged: () => ({ type: 'confirmed', outcome: 'changed', beat: beat('Ready') }),
  apiDown: () => ({ type: 'api', reachable: false }),
  podGone: () => ({ type: 'pod', pod: null }),
  podNew: () => ({ type: 'pod', pod: { uid: 'u2', name: 'x', specHash: 'h2' } }),
  schedulingUnknown: () => ({ type: 'schedulingUnknown', why: 'pod watch failed' }),
  captured: () => ({ type: 'captured', specHash: 'h2' }),
  activated: () => ({ type: 'activated' }),
  retired: () => ({ type: 'retired' }),
  collected: () => ({ type: 'collected' }),
  actionFailed: () => ({ type: 'actionFailed', action: 'activate', error: 'ENOSPC' }),
  fencedNothing: () => ({ type: 'fenced', podUid: 'u1', killed: 0, detail: 'nothing hung' }),
  fencedKilled: () => ({ type: 'fenced', podUid: 'u1', killed: 1, detail: 'SIGKILL of pid 42' }),
};

const summary = (as: Action[]) =>
  as.filter((a) => a.type !== 'transition' && a.type !== 'note').map((a) => (a.type === 'event' ? `event:${a.reason}` : a.type));
const kinds = (as: Action[]) => as.map((a) => a.type);

// [state, input, next state, actions (events by reason; transitions left out), next reason]
// Inputs arrive 500 ms after the fixture's last input: inside the window, before any deadline.
const MATRIX: Array<[string, string, string, string[], string]> = [
  ['Pending', 'tick', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'beatReady', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Pending', 'beatStarting', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Pending', 'beatStopping', 'Active', ['activate'], 'ParentStopping: the parent reported a deliberate stop'],
  ['Pending', 'beatCheckpoint', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'confirmedUnchanged', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'confirmedUnavailable', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'confirmedChanged', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Pending', 'apiDown', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'podGone', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'podNew', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'schedulingUnknown', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'captured', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'activated', 'Pending', ['retire'], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'retired', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'collected', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'actionFailed', 'Pending', [], 'AgentStarted: waiting for a first beat'],
  ['Pending', 'fencedNothing', 'Pending', [], 'FenceNotNeeded: pod u1: nothing hung'],
  ['Pending', 'fencedKilled', 'Pending', ['event:ParentFenced'], 'ParentFenced: pod u1: SIGKILL of pid 42'],
  ['Healthy', 'tick', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'beatReady', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'beatStarting', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Healthy', 'beatStopping', 'Active', ['activate'], 'ParentStopping: the parent reported a deliberate stop'],
  ['Healthy', 'beatCheckpoint', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'confirmedUnchanged', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'confirmedUnavailable', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'confirmedChanged', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'apiDown', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'podGone', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'podNew', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'schedulingUnknown', 'Healthy', [], 'Ready: the parent reports Ready'],
  // The report stores another spec than the Ready pod's: that one is captured once its Ready has held a window.
  ['Healthy', 'captured', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'activated', 'Healthy', ['retire'], 'Ready: the parent reports Ready'],
  ['Healthy', 'retired', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'collected', 'Healthy', ['capture'], 'Ready: the parent reports Ready'],
  ['Healthy', 'actionFailed', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Healthy', 'fencedNothing', 'Healthy', [], 'FenceNotNeeded: pod u1: nothing hung'],
  ['Healthy', 'fencedKilled', 'Healthy', ['event:ParentFenced'], 'ParentFenced: pod u1: SIGKILL of pid 42'],
  ['Starting', 'tick', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'beatReady', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Starting', 'beatStarting', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'beatStopping', 'Active', ['activate'], 'ParentStopping: the parent reported a deliberate stop'],
  ['Starting', 'beatCheckpoint', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'confirmedUnchanged', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'confirmedUnavailable', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'confirmedChanged', 'Healthy', [], 'Ready: the parent reports Ready'],
  ['Starting', 'apiDown', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'podGone', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'podNew', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'schedulingUnknown', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'captured', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'activated', 'Starting', ['retire'], 'Starting: the parent reports Starting'],
  ['Starting', 'retired', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'collected', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'actionFailed', 'Starting', [], 'Starting: the parent reports Starting'],
  ['Starting', 'fencedNothing', 'Starting', [], 'FenceNotNeeded: pod u1: nothing hung'],
  ['Starting', 'fencedKilled', 'Starting', ['event:ParentFenced'], 'ParentFenced: pod u1: SIGKILL of pid 42'],
  ['Silent', 'tick', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'beatReady', 'Healthy', [], 'BeatResumed: a changed beat arrived'],
  ['Silent', 'beatStarting', 'Starting', [], 'BeatResumed: a changed beat arrived'],
  ['Silent', 'beatStopping', 'Active', ['activate'], 'ParentStopping: the parent reported a deliberate stop'],
  ['Silent', 'beatCheckpoint', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'confirmedUnchanged', 'Active', ['activate'], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Silent', 'confirmedUnavailable', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'confirmedChanged', 'Healthy', [], 'BeatResumed: a changed beat arrived'],
  ['Silent', 'apiDown', 'Silent', [], 'HoldApiUnreachable: silent, but the api-server is unreachable and the policy says hold'],
  ['Silent', 'podGone', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'podNew', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'schedulingUnknown', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'captured', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'activated', 'Silent', ['retire'], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'retired', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'collected', 'Silent', ['event:NoCheckpoint'], 'NoCheckpoint: silent'],
  ['Silent', 'actionFailed', 'Silent', [], 'WindowExpired: no beat changed within the window'],
  ['Silent', 'fencedNothing', 'Silent', [], 'FenceNotNeeded: pod u1: nothing hung'],
  ['Silent', 'fencedKilled', 'Silent', ['event:ParentFenced'], 'ParentFenced: pod u1: SIGKILL of pid 42'],
  ['Active', 'tick', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'beatReady', 'Healthy', ['event:CheckpointRetired', 'retire'], 'ParentReady: the parent reports Ready; checkpoint retired'],
  ['Active', 'beatStarting', 'HandingOver', ['event:HandoverStarted', 'retire'], 'HandoverStarted: attempt 1'],
  ['Active', 'beatStopping', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'beatCheckpoint', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'confirmedUnchanged', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'confirmedUnavailable', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'confirmedChanged', 'Healthy', ['event:CheckpointRetired', 'retire'], 'ParentReady: the parent reports Ready; checkpoint retired'],
  ['Active', 'apiDown', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'podGone', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'podNew', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'schedulingUnknown', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'captured', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'activated', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'retired', 'Active', ['activate'], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'collected', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'actionFailed', 'Active', [], 'SilenceConfirmed: no beat changed within the window, confirmed by a live read'],
  ['Active', 'fencedNothing', 'Active', [], 'FenceNotNeeded: pod u1: nothing hung'],
  ['Active', 'fencedKilled', 'Active', ['event:ParentFenced'], 'ParentFenced: pod u1: SIGKILL of pid 42'],
  ['HandingOver', 'tick', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'beatReady', 'Healthy', ['event:HandoverSucceeded'], 'HandedOver: the parent is Ready'],
  ['HandingOver', 'beatStarting', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'beatStopping', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'beatCheckpoint', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'confirmedUnchanged', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'confirmedUnavailable', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'confirmedChanged', 'Healthy', ['event:HandoverSucceeded'], 'HandedOver: the parent is Ready'],
  ['HandingOver', 'apiDown', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'podGone', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'podNew', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'schedulingUnknown', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'captured', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'activated', 'HandingOver', ['retire'], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'retired', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'collected', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'actionFailed', 'HandingOver', [], 'HandoverStarted: attempt 1'],
  ['HandingOver', 'fencedNothing', 'HandingOver', [], 'FenceNotNeeded: pod u1: nothing hung'],
  ['HandingOver', 'fencedKilled', 'HandingOver', ['event:ParentFenced'], 'ParentFenced: pod u1: SIGKILL of pid 42'],
  ['Orphaned', 'tick', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'beatReady', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'beatStarting', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'beatStopping', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'beatCheckpoint', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'confirmedUnchanged', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'confirmedUnavailable', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'confirmedChanged', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  [
    'Orphaned',
    'apiDown',
    'Pending',
    ['event:CollectionCancelled'],
    'CollectionCancelled: scheduling unknown (api-server unreachable, watch failed or a live read disagreed)',
  ],
  ['Orphaned', 'podGone', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'podNew', 'Pending', [], 'Rescheduled: the api-server has a pod for this parent here again'],
  [
    'Orphaned',
    'schedulingUnknown',
    'Pending',
    ['event:CollectionCancelled'],
    'CollectionCancelled: scheduling unknown (api-server unreachable, watch failed or a live read disagreed)',
  ],
  ['Orphaned', 'captured', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'activated', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'retired', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'collected', 'Orphaned', ['event:CheckpointCollected'], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'actionFailed', 'Orphaned', [], 'NotScheduled: no pod for this parent key on this node'],
  ['Orphaned', 'fencedNothing', 'Orphaned', [], 'FenceNotNeeded: pod u1: nothing hung'],
  ['Orphaned', 'fencedKilled', 'Orphaned', ['event:ParentFenced'], 'ParentFenced: pod u1: SIGKILL of pid 42'],
];

describe('decide: every state x every input', () => {
  const f = fixtures();
  it('the fixtures reach the states they are named after', () => {
    for (const [name, run] of Object.entries(f)) expect(run.state.state).toBe(name);
  });
  it('the matrix covers every state and every input', () => {
    expect(new Set(MATRIX.map((r) => r[0]))).toEqual(new Set(Object.keys(f)));
    for (const s of Object.keys(f)) expect(MATRIX.filter((r) => r[0] === s).map((r) => r[1])).toEqual(Object.keys(inputs));
  });
  it.each(MATRIX)('%s + %s -> %s %j', (state, input, next, actions, reason) => {
    const run = f[state]!;
    const d = decide(run.state, inputs[input]!(), run.now + 500);
    expect(d.state.state).toBe(next);
    expect(summary(d.actions)).toEqual(actions);
    expect(reasonText(d.state.reason)).toBe(reason);
    if (next !== state) expect(kinds(d.actions)).toContain('transition');
    // The input state is never mutated.
    expect(run.state.state).toBe(state);
  });
});

function ticksUntil(s: ParentState, from: number, to: number): { state: ParentState; actions: Action[]; times: number[] } {
  // Follows wakeAt like the agent's loop: the only clock the core needs.
  let st = s;
  let now = from;
  const actions: Action[] = [];
  const times: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const d = decide(st, { type: 'tick' }, now);
    st = d.state;
    for (const a of d.actions) {
      actions.push(a);
      times.push(now);
    }
    if (d.wakeAt === null || d.wakeAt > to) break;
    now = d.wakeAt;
  }
  return { state: st, actions, times };
}

/** When a new spec run by the Healthy fixture's Ready pod may be captured: its Ready run plus one window. */
function settledAt(s: ParentState): number {
  return s.readySince! + judgingWindowMs(s);
}

describe('decide: rules over time', () => {
  const f = fixtures();

  it('a first sighting is a baseline, not a proof of life', () => {
    const s = start();
    const d = decide(s, { type: 'beat', beat: beat('Ready') }, 1000);
    expect(d.state.state).toBe('Pending');
    expect(d.state.lastChangeAt).toBeNull();
  });

  it('silence is judged only after the window, and then confirmed by a live read', () => {
    const h = f.Healthy!; // last change at 2000, window 4000, grace until 6000
    expect(decide(h.state, { type: 'tick' }, 6000).state.state).toBe('Healthy');
    const d = decide(h.state, { type: 'tick' }, 6001);
    expect(d.state.state).toBe('Silent');
    expect(d.actions).toContainEqual({ type: 'confirm', channels: ['lease'] });
    expect(kinds(d.actions)).not.toContain('activate');
  });

  it('wakeAt names the moment the window expires', () => {
    expect(decide(f.Healthy!.state, { type: 'tick' }, 6000).wakeAt).toBe(6001);
  });

  it('no silence is judged during the startup grace', () => {
    const s = start();
    expect(decide(s, { type: 'tick' }, 5999).state.state).toBe('Pending');
    const d = decide(s, { type: 'tick' }, 6000);
    expect(d.state.state).toBe('Silent');
    expect(reasonText(d.state.reason)).toMatch(/^NoBeat/);
  });

  it('the api-server coming back gives every parent a fresh start', () => {
    const down = decide(f.Healthy!.state, { type: 'api', reachable: false }, 2500).state;
    const up = decide(down, { type: 'api', reachable: true }, 3000).state;
    expect(up.graceUntil).toBe(3000 + POLICY.startupGraceMs);
    expect(decide(up, { type: 'tick' }, 8999).state.state).toBe('Healthy');
    expect(decide(up, { type: 'tick' }, 9000).state.state).toBe('Silent');
  });

  it('a live read that finds a changed beat prevents the activation', () => {
    const d = decide(f.Silent!.state, { type: 'confirmed', outcome: 'changed', beat: beat('Ready') }, 6600);
    expect(d.state.state).toBe('Healthy');
    expect(kinds(d.actions)).not.toContain('activate');
  });

  it('a late answer to a live read no longer asked is ignored', () => {
    const d = decide(f.Healthy!.state, { type: 'confirmed', outcome: 'unchanged' }, 2500);
    expect(d.state.confirm).toBeNull();
    // ...so a later silence still asks afresh.
    expect(decide(d.state, { type: 'tick' }, 6001).actions).toContainEqual({ type: 'confirm', channels: ['lease'] });
  });

  it('an unanswered live read is asked again', () => {
    const s = f.Silent!.state; // asked at 6500
    expect(kinds(decide(s, { type: 'tick' }, 6500 + CONFIRM_TIMEOUT_MS - 1).actions)).not.toContain('confirm');
    expect(kinds(decide(s, { type: 'tick' }, 6500 + CONFIRM_TIMEOUT_MS).actions)).toContain('confirm');
  });

  it('hold: silent with the api-server unreachable never activates', () => {
    const down = decide(f.Healthy!.state, { type: 'api', reachable: false }, 2500).state;
    const r = ticksUntil(down, 2500, 600_000);
    expect(r.state.state).toBe('Silent');
    expect(reasonText(r.state.reason)).toMatch(/^HoldApiUnreachable/);
    expect(kinds(r.actions)).not.toContain('activate');
    expect(kinds(r.actions)).not.toContain('confirm');
  });

  it('activate: silent with the api-server unreachable activates without confirmation', () => {
    const policy = { ...POLICY, whenApiUnreachable: 'activate' as const };
    const h = fixtures(policy).Healthy!;
    const down = decide(h.state, { type: 'api', reachable: false }, 2500).state;
    const r = ticksUntil(down, 2500, 20_000);
    expect(r.state.state).toBe('Active');
    expect(kinds(r.actions)).toContain('activate');
    expect(kinds(r.actions)).not.toContain('confirm');
    expect(r.times[kinds(r.actions).indexOf('activate')]).toBe(6001);
  });

  it('activate: a fresh local beat keeps the parent alive while the api-server is away', () => {
    const policy = { ...POLICY, whenApiUnreachable: 'activate' as const };
    let s = decide(fixtures(policy).Healthy!.state, { type: 'api', reachable: false }, 2500).state;
    s = decide(s, { type: 'beat', beat: beat('Ready', { channel: 'local' }) }, 2600).state; // baseline
    for (let t = 3000; t < 60_000; t += 1000) {
      const d = decide(s, { type: 'beat', beat: beat('Ready', { channel: 'local' }) }, t);
      expect(kinds(d.actions)).not.toContain('activate');
      s = d.state;
    }
    expect(s.state).toBe('Healthy');
  });

  it('a local-only parent activates on local silence without a live read', () => {
    const policy = { ...POLICY, channels: ['local' as const] };
    const r = ticksUntil(fixtures(policy).Healthy!.state, 2000, 20_000);
    expect(r.state.state).toBe('Active');
    expect(kinds(r.actions)).not.toContain('confirm');
  });

  it('a deliberate stop is covered at once', () => {
    const d = decide(f.Healthy!.state, { type: 'beat', beat: beat('Stopping') }, 2100);
    expect(d.state.state).toBe('Active');
    expect(d.actions).toContainEqual({ type: 'activate', reason: expect.objectContaining({ code: 'ParentStopping' }) });
  });

  it('a Stopping beside another listed pod of the parent is a pod being replaced: no cover until a silence', () => {
    // A surge: the api-server lists a new pod beside the tracked one, whose beats the agent has not
    // counted (the old pod's writes of the shared local file replaced them). The old pod says Stopping.
    const withNew = decide(f.Healthy!.state, { type: 'pod', pod: { ...POD, alsoListed: [{ uid: 'uid-new', name: 'p-new' }] } }, 2050).state;
    const d = decide(withNew, { type: 'beat', beat: beat('Stopping') }, 2100);
    expect(d.state.state).toBe('Healthy');
    expect(kinds(d.actions)).not.toContain('activate');
    expect(d.state.reason.code).toBe('ParentReplaced');
    expect(d.state.reason.message).toContain('p-new');
    // The new pod beats: the parent is Ready, and says so.
    const heard = decide(d.state, { type: 'beat', beat: beat('Ready', { holder: 'p-new', holderUid: 'uid-new' }) }, 2600);
    expect(heard.state.state).toBe('Healthy');
    expect(heard.state.reason.code).toBe('Ready');
    expect(kinds(heard.actions)).not.toContain('activate');
    // The new pod never beats: a window later the parent is Silent, and the silence rule takes it
    // from there (a live read of the api channels first, as for any silence).
    const r = ticksUntil(d.state, 2100, 60_000);
    expect(r.state.state).toBe('Silent');
    expect(r.times[kinds(r.actions).indexOf('transition')]).toBe(2100 + POLICY.windowMs + 1);
    expect(kinds(r.actions)).toContain('confirm');
    // A listed pod that itself said Stopping is no successor: the other's Stopping is covered at once.
    const bothStop = decide(withNew, { type: 'beat', beat: beat('Stopping', { holder: 'p-new', holderUid: 'uid-new' }) }, 2080).state;
    expect(decide(bothStop, { type: 'beat', beat: beat('Stopping') }, 2100).state.state).toBe('Active');
  });

  it('a Stopping that ends a silence beside another listed pod is a pod being replaced too: no cover at once', () => {
    const s = f.Silent!.state;
    const withNew = decide(s, { type: 'pod', pod: { ...POD, alsoListed: [{ uid: 'uid-new', name: 'p-new' }] } }, 6550).state;
    expect(withNew.state).toBe('Silent');
    const d = decide(withNew, { type: 'beat', beat: beat('Stopping', { sequence: 50 }) }, 6600);
    expect(kinds(d.actions)).not.toContain('activate');
    expect(d.state.state).toBe('Starting');
    expect(d.state.reason.code).toBe('ParentReplaced');
    expect(d.state.reason.message).toContain('p-new');
    // The new pod never beats: a window later the silence is judged again, as usual.
    const r = ticksUntil(d.state, 6600, 60_000);
    expect(r.state.state).toBe('Silent');
    // With no pod listed beside it, the same Stopping is a deliberate stop, covered at once.
    const alone = decide(s, { type: 'beat', beat: beat('Stopping', { sequence: 50 }) }, 6600);
    expect(alone.state.state).toBe('Active');
    expect(alone.actions).toContainEqual({ type: 'activate', reason: expect.objectContaining({ code: 'ParentStopping' }) });
  });

  it("an agent started while the probe fails knows a surge's pods from an identity-only list, not from who beat first", () => {
    // The agent restarts (seed 37619): the api-server answers too slowly for the probe, so no full
    // pod list has told it its pod, while the pod watch still hears the api-server.
    const s0 = initialState({
      namespace: 'kube-system',
      key: 'kube-apiserver',
      policy: POLICY,
      now: 0,
      checkpoint: { stored: true, active: false, specHash: 'h1' },
    });
    const old = { holder: POD.name, holderUid: POD.uid, channel: 'local' as const };
    const fresh = { holder: 'kube-apiserver-n1-new', holderUid: 'uid-new', channel: 'local' as const };
    let s = feed(s0, [
      [100, { type: 'beat', beat: beat('Ready', old) }], // first sighting on the channel
      [1100, { type: 'beat', beat: beat('Ready', old) }], // the first holder that beats: adopted, provisionally
    ]).state;
    // The identity-only list names both pods of the surge.
    s = feed(s, [[1200, { type: 'pod', pod: { ...POD, uid: 'uid-new', name: fresh.holder, alsoListed: [{ uid: POD.uid, name: POD.name }] } }]]).state;
    expect(s.pod).toBeNull(); // scheduling and spec still unknown
    const heard = feed(s, [[1300, { type: 'beat', beat: beat('Ready', fresh) }]]);
    expect(kinds(heard.actions)).not.toContain('beatRefused');
    expect(heard.state.lastChangeAt).toBe(1300);
    // The old pod leaves: the new one beats Ready, nothing to cover.
    const stop = feed(heard.state, [[2000, { type: 'beat', beat: beat('Stopping', old) }]]);
    expect(kinds(stop.actions)).not.toContain('activate');
    // Without that list the new pod's beats were refused, and the old pod's Stopping covered.
    const before = feed(s0, [
      [100, { type: 'beat', beat: beat('Ready', old) }],
      [1100, { type: 'beat', beat: beat('Ready', old) }],
      [1300, { type: 'beat', beat: beat('Ready', fresh) }],
      [1400, { type: 'beat', beat: beat('Ready', fresh) }],
      [2000, { type: 'beat', beat: beat('Stopping', old) }],
    ]);
    expect(kinds(before.actions)).toContain('beatRefused');
    expect(kinds(before.actions)).toContain('activate');
    // A full list later takes over (the identity-only one is dropped).
    const full = feed(heard.state, [
      [2100, { type: 'api', reachable: true }],
      [2200, { type: 'pod', pod: { ...POD, uid: 'uid-new', name: fresh.holder } }],
    ]).state;
    expect(full.beatTrust.listedOnly).toBeUndefined();
  });

  it('without a stored checkpoint nothing is activated, and a warning is raised once', () => {
    const s = start(POLICY, false);
    const r = ticksUntil(s, 0, 600_000);
    expect(kinds(r.actions)).not.toContain('activate');
    expect(r.actions.filter((a) => a.type === 'event' && a.reason === 'NoCheckpoint')).toHaveLength(1);
  });

  it('a parent stuck in Starting past startTimeout is covered, and handed over only after the backoff', () => {
    let s = f.Starting!.state; // Starting since 2000
    let t = 2000;
    const all: Action[] = [];
    for (; t <= 2000 + POLICY.startTimeoutMs + 1000; t += 1000) {
      const d = decide(s, { type: 'beat', beat: beat('Starting') }, t);
      all.push(...d.actions);
      s = d.state;
    }
    expect(s.state).toBe('Active');
    expect(reasonText(s.reason)).toMatch(/^StartTimeout/);
    const activatedAt = s.since;
    s = decide(s, { type: 'activated' }, t).state;
    // Starting beats keep coming: no hand-over before the initial backoff.
    for (; t < activatedAt + POLICY.handoverBackoff.initialMs; t += 1000) {
      s = decide(s, { type: 'beat', beat: beat('Starting') }, t).state;
      expect(s.state).toBe('Active');
    }
    const d = decide(s, { type: 'beat', beat: beat('Starting') }, activatedAt + POLICY.handoverBackoff.initialMs);
    expect(d.state.state).toBe('HandingOver');
  });

  it('hand-over: Ready in time ends it; not Ready re-activates with exponential backoff', () => {
    // Parent keeps reporting Starting: record every hand-over and re-activation.
    let s = f.HandingOver!.state; // attempt 1 started at 7000, deadline 17000
    const starts: number[] = [7000];
    const reactivations: number[] = [];
    for (let t = 7200; t < 400_000; t += 200) {
      let d = decide(s, { type: 'beat', beat: beat('Starting') }, t);
      for (const a of d.actions) {
        if (a.type === 'retire') d = decide(d.state, { type: 'retired' }, t);
        if (a.type === 'activate') d = decide(d.state, { type: 'activated' }, t);
        if (a.type === 'transition' && a.to === 'HandingOver') starts.push(t);
        if (a.type === 'transition' && a.to === 'Active') reactivations.push(t);
      }
      s = d.state;
    }
    // Each attempt gets handoverTimeout; the pause before the next doubles from 5s up to 40s.
    // Two windows of handoverTimeout (10s), then doubling up to handoverBackoff.max (40s).
    const windows = reactivations.map((r, i) => r - starts[i]!);
    expect(windows.slice(0, 5)).toEqual([10_000, 10_000, 20_000, 40_000, 40_000]);
    for (const [i, w] of windows.entries()) expect(w).toBe(handoverWindowMs(POLICY, i + 1));
    const pauses = reactivations.slice(0, starts.length - 1).map((r, i) => starts[i + 1]! - r);
    // ...plus a deterministic 0-25% spread (and up to one 200 ms test step).
    const base = [5000, 10_000, 20_000, 40_000, 40_000];
    pauses.slice(0, 5).forEach((p, i) => {
      expect(p).toBeGreaterThanOrEqual(base[i]!);
      expect(p).toBeLessThanOrEqual(base[i]! * 1.25 + 200);
    });
    expect(new Set(pauses.slice(3, 5)).size).toBe(2); // the spread differs per attempt
    // And a Ready beat ends it, resetting the backoff.
    const ready = decide(
      s.state === 'HandingOver' ? s : decide(s, { type: 'beat', beat: beat('Starting') }, 400_000).state,
      { type: 'beat', beat: beat('Ready') },
      400_100,
    );
    expect(['Healthy']).toContain(ready.state.state);
    expect(ready.state.handover.nextBackoffMs).toBe(POLICY.handoverBackoff.initialMs);
  });

  it('after a reboot, with no api-server, an activate parent starts without startupGrace; others keep it', () => {
    const args = { namespace: 'kube-system', key: 'kube-apiserver', now: 1000, checkpoint: { stored: true, active: false, specHash: 'h1' } };
    const activate = { ...POLICY, whenApiUnreachable: 'activate' as const };
    expect(initialState({ ...args, policy: activate, rebooted: true, apiReachable: false }).graceUntil).toBe(1000);
    expect(initialState({ ...args, policy: activate, rebooted: false, apiReachable: false }).graceUntil).toBe(1000 + POLICY.startupGraceMs);
    expect(initialState({ ...args, policy: POLICY, rebooted: true, apiReachable: false }).graceUntil).toBe(1000 + POLICY.startupGraceMs); // hold
    expect(initialState({ ...args, policy: activate, rebooted: true, apiReachable: true }).graceUntil).toBe(1000 + POLICY.startupGraceMs);
  });

  it('after a reboot, the grace ends only once the agent hears that no api-server answers, and not for a parent already seen beating', () => {
    const args = { namespace: 'kube-system', key: 'kube-apiserver', now: 1000, checkpoint: { stored: true, active: false, specHash: 'h1' } };
    const activate = { ...POLICY, whenApiUnreachable: 'activate' as const };
    // Not heard yet: the usual grace, until the first verdict.
    const unknown = initialState({ ...args, policy: activate, rebooted: true });
    expect(unknown.graceUntil).toBe(1000 + POLICY.startupGraceMs);
    // No api-server answers: silent at once, the checkpoint activated.
    const cut = decide(unknown, { type: 'api', reachable: false }, 1200);
    expect(cut.state.graceUntil).toBe(1200);
    expect(cut.state.state).toBe('Active');
    expect(cut.actions.map((a) => a.type)).toContain('activate');
    // An api-server answers: the grace stays (its watches need a window to show the beats).
    const heard = decide(unknown, { type: 'api', reachable: true }, 1200);
    expect(heard.state.graceUntil).toBeGreaterThanOrEqual(1000 + POLICY.startupGraceMs);
    expect(decide(heard.state, { type: 'tick' }, 1300).state.state).toBe('Pending');
    // A parent seen beating before the verdict (a local beat that changed: alive in this boot) keeps
    // its window. (A first sighting alone proves nothing: it may be a file left from the last boot.)
    const first = decide(unknown, { type: 'beat', beat: beat('Ready', { channel: 'local' }) }, 1050).state;
    const beating = decide(first, { type: 'beat', beat: beat('Ready', { channel: 'local' }) }, 1100).state;
    expect(beating.lastChangeAt).toBe(1100);
    const after = decide(beating, { type: 'api', reachable: false }, 1200);
    expect(after.state.graceUntil).toBe(1000 + POLICY.startupGraceMs);
    expect(decide(after.state, { type: 'tick' }, 1300).state.state).not.toBe('Active');
  });

  it('overlap hand-over: a Starting parent leaves the checkpoint serving; Ready retires it; never Ready never retires', () => {
    const overlap = { ...POLICY, handover: 'overlap' as const };
    const o = fixtures(overlap);
    let s = o.Active!.state;
    // A parent that keeps Starting (a bad rollout, or one still replaying etcd) for far longer than
    // any hand-over window: no retire, no HandingOver, the checkpoint stays.
    for (let t = 7000; t < 7000 + 10 * POLICY.handoverTimeoutMs; t += 1000) {
      const d = decide(s, { type: 'beat', beat: beat('Starting') }, t);
      expect(d.state.state).toBe('Active');
      expect(kinds(d.actions)).not.toContain('retire');
      s = d.state;
    }
    // Ready: retired at once, straight to Healthy, no hand-over window at all.
    const ready = decide(s, { type: 'beat', beat: beat('Ready') }, 200_000);
    expect(ready.state.state).toBe('Healthy');
    expect(kinds(ready.actions)).toContain('retire');
    // The same inputs under release start a hand-over on the first Starting beat.
    const release = decide(f.Active!.state, { type: 'beat', beat: beat('Starting') }, 7000);
    expect(release.state.state).toBe('HandingOver');
  });

  describe('no hand-over to a known-bad spec', () => {
    const BAD = { uid: 'u2', name: 'kube-apiserver-n1-2', specHash: 'h-bad' };
    /** Active on the good copy (h1) with a pod of spec `pod` scheduled here; drive Starting beats and act on every action. */
    function run(pod: typeof POD, until: number, from = f.Active!.state, t0 = 7000) {
      let s = from;
      const handovers: number[] = [];
      const events: string[] = [];
      let last = { state: s, actions: [] as Action[] };
      for (let t = t0 - 200; t < until; t += 200) {
        const input: Input = t < t0 ? { type: 'pod', pod } : { type: 'beat', beat: beat('Starting', { holderUid: pod.uid, holder: pod.name }) };
        let d = decide(s, input, t);
        for (const a of d.actions) {
          if (a.type === 'retire') d = decide(d.state, { type: 'retired' }, t);
          if (a.type === 'activate') d = decide(d.state, { type: 'activated' }, t);
          if (a.type === 'transition' && a.to === 'HandingOver' && a.from !== 'HandingOver') handovers.push(t);
          if (a.type === 'event') events.push(a.reason);
        }
        s = d.state;
        last = d;
      }
      return { state: s, handovers, events, last };
    }

    it('a new spec that fails its hand-over is on probation: tried again after 30m, then 1h, each failure a strike; the good copy keeps the node', () => {
      expect(PROBATION.release.initialMs).toBe(30 * 60_000);
      const r = run(BAD, 2_000_000);
      // Verdict at 17 s (the 10 s window); probation 30 min -> 1817 s; fails at 1827 s, 1 h more.
      expect(r.handovers).toEqual([7000, 1_817_000]);
      expect(r.events.filter((e) => e === 'KnownBadSpec')).toHaveLength(2);
      expect(r.events.filter((e) => e === 'ProbationEnded')).toHaveLength(1);
      expect(r.state.state).toBe('Active');
      expect(r.state.checkpoint.active).toBe(true);
      expect(r.state.knownBad).toEqual({ specHash: 'h-bad', podUid: 'u2', since: 1_827_000, strikes: 2, until: 1_827_000 + 60 * 60_000 });
      expect(reasonText(r.state.reason)).toMatch(/^KnownBadSpec: rollout held/);
    });

    it('the held spec wakes the core when its probation ends, and the Event names the spec and the next try', () => {
      const r = run(BAD, 20_000);
      expect(r.state.knownBad).toMatchObject({ strikes: 1, until: 1_817_000 });
      const d = decide(r.state, { type: 'tick' }, 20_000);
      expect(d.wakeAt).not.toBeNull();
      expect(d.wakeAt!).toBeLessThanOrEqual(1_817_000);
      const bad = run(BAD, 18_000);
      expect(bad.last.actions).toEqual([]);
      const all = run(BAD, 17_400);
      expect(all.events).toContain('KnownBadSpec');
    });

    it("the checkpoint's own spec failing a hand-over is a race, not a verdict: it is retried on the backoff", () => {
      const r = run(POD, 400_000);
      expect(r.handovers.length).toBeGreaterThan(3);
      expect(r.state.knownBad).toBeNull();
    });

    it('a new spec clears the verdict: the next pod gets its hand-over', () => {
      const bad = run(BAD, 100_000);
      const next = { uid: 'u3', name: 'kube-apiserver-n1-3', specHash: 'h3' };
      const r = run(next, 200_000, bad.state, 100_000);
      expect(r.handovers[0]).toBe(99_800); // the backoff since the failure has long passed
      expect(r.state.knownBad === null || r.state.knownBad.specHash === 'h3').toBe(true);
    });

    it('the bad spec reporting Ready on its own retires the checkpoint and forgets the verdict', () => {
      const bad = run(BAD, 100_000);
      const d = decide(bad.state, { type: 'beat', beat: beat('Ready', { holderUid: BAD.uid, holder: BAD.name }) }, 100_100);
      expect(d.state.state).toBe('Healthy');
      expect(kinds(d.actions)).toContain('retire');
      expect(d.state.knownBad).toBeNull();
    });

    it('survives an agent restart: the persisted record brings the verdict back, and no hand-over follows', () => {
      const bad = run(BAD, 100_000);
      const rec = handoverToPersist(bad.state, 100_000);
      expect(rec).toMatchObject({ inProgress: false, knownBad: { specHash: 'h-bad', podUid: 'u2' } });
      // The agent restarts with the checkpoint still active; the same pod runs Starting.
      const restarted = initialState({
        namespace: 'kube-system',
        key: 'kube-apiserver',
        policy: POLICY,
        now: 200_000,
        checkpoint: { stored: true, active: true, specHash: 'h1' },
        handover: rec!,
      });
      expect(restarted.state).toBe('Active');
      expect(restarted.knownBad).toMatchObject({ specHash: 'h-bad', podUid: 'u2' });
      // Strike 1 at 17 s holds the spec until 1817 s; the record kept 1717 s of it at 100 s, so the
      // restarted agent (same boot) tries it again 1717 s after its start, not before.
      const after = run(BAD, 2_000_000, drive(restarted, [[200_000, { type: 'api', reachable: true }]]).state, 200_200);
      expect(after.handovers).toEqual([1_917_000]);
      expect(after.state.checkpoint.active).toBe(true);
      expect(after.state.knownBad).toMatchObject({ strikes: 2 });
      // Without the record (the earlier behaviour) the restarted agent hands over to it again.
      const forgetful = initialState({
        namespace: 'kube-system',
        key: 'kube-apiserver',
        policy: POLICY,
        now: 200_000,
        checkpoint: { stored: true, active: true, specHash: 'h1' },
      });
      expect(run(BAD, 500_000, drive(forgetful, [[200_000, { type: 'api', reachable: true }]]).state, 200_200).handovers[0]).toBeLessThan(210_000);
    });

    it('a record that only keeps a verdict resumes no hand-over', () => {
      const s = initialState({
        namespace: 'kube-system',
        key: 'kube-apiserver',
        policy: POLICY,
        now: 0,
        checkpoint: { stored: true, active: false, specHash: 'h1' },
        handover: { remainingMs: 0, attempts: 1, nextBackoffMs: 5000, inProgress: false, knownBad: { specHash: 'h-bad', podUid: 'u2' } },
      });
      expect(s.state).toBe('Pending');
      expect(s.handover.deadline).toBeNull();
      expect(s.knownBad).toMatchObject({ specHash: 'h-bad' });
    });

    describe('overlap: an exit beside the sharing checkpoint is the verdict, and the checkpoint stops sharing', () => {
      const overlap = { ...POLICY, handover: 'overlap' as const };
      /** Active (overlap) on h1 with the bad pod here, reporting `restarts`, Starting beats in between. */
      /** The copy's own beat: Ready (holder `cp1`, a copy started from the manifest as written). */
      const copyReady = (): Input => ({
        type: 'beat',
        beat: beat('Ready', { role: 'checkpoint', holder: 'kube-apiserver-checkpoint-n1', holderUid: 'cp1', channel: 'local' }),
      });
      // A verdict needs OVERLAP_EXITS_FOR_VERDICT exits of another spec: one step of these tables is
      // that many restarts of the bad spec (x), one restart of the checkpoint's own spec.
      const N = OVERLAP_EXITS_FOR_VERDICT;
      const x = (spec: { specHash: string }) => (spec.specHash === BAD.specHash ? N : 1);
      /** The bad spec, its failing runs a minute long each (longer than the copy's start). */
      const LIMPING = Object.assign({ lastExitRanMs: 60_000 }, BAD);
      function overlapRun(restarts: number[], spec = BAD, copySeenReady = true) {
        let s = fixtures(overlap).Active!.state;
        if (copySeenReady) s = decide(s, copyReady(), 6900).state;
        const actions: Action[] = [];
        let t = 7000;
        for (const r of restarts) {
          t += 1000;
          let d = decide(s, { type: 'beat', beat: beat('Starting', { holderUid: spec.uid, holder: spec.name }) }, t);
          d = decide(d.state, { type: 'pod', pod: { ...spec, restarts: r * x(spec) } }, t + 1);
          for (const a of d.actions) {
            actions.push(a);
            if (a.type === 'activate') d = decide(d.state, a.exclusive ? { type: 'activated', exclusive: true } : { type: 'activated' }, t + 2);
          }
          s = d.state;
        }
        return { state: s, actions, t };
      }

      it('a restart of a new spec that never reported Ready: known-bad, and the manifest rewritten without sharing', () => {
        // Its runs lasted a minute each (it held its share while it limped): rewritten without sharing.
        const r = overlapRun([0, 0, 1, 1, 2], LIMPING);
        expect(r.state.knownBad).toMatchObject({ specHash: 'h-bad', podUid: 'u2' });
        const activations = r.actions.filter((a) => a.type === 'activate');
        expect(activations).toEqual([expect.objectContaining({ exclusive: true })]); // once, not again on the next restart
        expect(r.actions.filter((a) => a.type === 'event' && a.reason === 'KnownBadSpec')).toHaveLength(1);
        expect(r.state.checkpoint).toMatchObject({ active: true, exclusive: true });
        expect(r.actions.some((a) => a.type === 'retire')).toBe(false);
        expect(r.state.state).toBe('Active');
      });

      it('a held spec that fails as it starts (its run no longer than the copy took to be Ready): known-bad, and the copy keeps sharing', () => {
        // The copy's time to its first Ready beat is known (readyAfterMs); the bad spec's runs are shorter.
        const probe = overlapRun([0]);
        const readyAfter = probe.state.exitWatch.readyAfterMs;
        expect(readyAfter).not.toBeNull();
        const short = overlapRun([0, 0, 1, 1, 2], Object.assign({ lastExitRanMs: readyAfter! }, BAD));
        expect(short.state.knownBad).toMatchObject({ specHash: 'h-bad', ranMs: readyAfter });
        expect(short.actions.filter((a) => a.type === 'activate')).toEqual([]);
        expect(short.state.checkpoint.exclusive).not.toBe(true);
        const ev = short.actions.find((a) => a.type === 'event' && a.reason === 'KnownBadSpec');
        expect(ev).toMatchObject({ message: expect.stringContaining('keeps sharing') });
        // A run longer than that (plus the slack) held its share while it limped: rewritten without sharing.
        const long = overlapRun([0, 0, 1, 1, 2], Object.assign({ lastExitRanMs: readyAfter! + OWN_SPEC_BIND_SLACK_MS + 1000 }, BAD));
        expect(long.actions.filter((a) => a.type === 'activate')).toEqual([expect.objectContaining({ exclusive: true })]);
        expect(long.state.checkpoint).toMatchObject({ active: true, exclusive: true });
      });

      it("no verdict without a rise (first sighting), nor for the checkpoint's own spec", () => {
        expect(overlapRun([3, 3, 3]).state.knownBad).toBeNull();
        expect(overlapRun([0, 1, 2], { ...POD, uid: 'u1' }).state.knownBad).toBeNull();
      });

      it('exits count only beside a copy seen Ready since the manifest was written; across an outage from a base listed beside it', () => {
        // No Ready beat from the copy yet (it may still be starting, or an exclusive one draining).
        expect(overlapRun([0, 1, 2], BAD, false).state.knownBad).toBeNull();
        // An outage between two listings, the base listed while the sharing copy was Ready: every
        // rise since happened beside that copy and counts (on one master a bad spec's bound share
        // makes the agent's probe fail for a moment at each of its starts).
        let s = decide(fixtures(overlap).Active!.state, copyReady(), 6900).state;
        s = decide(s, { type: 'beat', beat: beat('Starting', { holderUid: BAD.uid, holder: BAD.name }) }, 6950).state;
        s = decide(s, { type: 'pod', pod: { ...LIMPING, restarts: 0 } }, 7000).state;
        s = decide(s, { type: 'api', reachable: false }, 7100).state;
        s = decide(s, { type: 'api', reachable: true }, 7200).state;
        s = decide(s, { type: 'pod', pod: { ...LIMPING, restarts: 2 * N } }, 7300).state;
        expect(s.knownBad).toMatchObject({ specHash: 'h-bad' });
        // The rewritten (exclusive) manifest starts the watch again: the copy that ran before it does not count.
        expect(s.exitWatch.ready).toBe(true);
        const rewritten = decide(s, { type: 'activated', exclusive: true }, 7500).state;
        expect(rewritten.exitWatch).toEqual({ notHolder: 'cp1', ready: false, base: null, since: 7500, readyAfterMs: null });
        expect(decide(rewritten, copyReady(), 7600).state.exitWatch.ready).toBe(false); // the old copy's late beat
      });

      it('a copy activated again after a retire counts under the same uid (a static pod is named by its manifest)', () => {
        let s = decide(fixtures(overlap).Active!.state, copyReady(), 6900).state;
        expect(s.exitWatch.ready).toBe(true);
        s = decide(s, { type: 'retired' }, 7000).state;
        s = decide(s, copyReady(), 7050).state; // the retired copy, beating through its shutdown
        s = decide(s, { type: 'activated' }, 7100).state;
        expect(s.exitWatch).toMatchObject({ notHolder: null, ready: false, since: 7100 });
        expect(decide(s, copyReady(), 7200).state.exitWatch.ready).toBe(true);
      });

      it("an exit of the checkpoint's own spec beside it means the ports are not shared: one warning, then a release hand-over", () => {
        const own = { ...POD, uid: 'u1' };
        // Without a rise (first sighting only) the overlap stands.
        expect(overlapRun([3, 3, 3], own).state.overlapFallback).toBeNull();
        const r = overlapRun([0, 1, 2], own);
        expect(r.state.overlapFallback).toMatchObject({ announced: true });
        expect(r.state.knownBad).toBeNull();
        expect(r.actions.filter((a) => a.type === 'event' && a.reason === 'OverlapUnavailable')).toHaveLength(1);
        // The release hand-over follows at once (the parent is Starting): the checkpoint is retired.
        expect(r.actions.filter((a) => a.type === 'retire')).toHaveLength(1);
        expect(r.state.state).toBe('HandingOver');
        // Once the parent is Ready, overlap is tried again on the next outage.
        let d = decide(r.state, { type: 'retired' }, r.t + 100);
        d = decide(d.state, { type: 'beat', beat: beat('Ready', { holderUid: own.uid }) }, r.t + 200);
        expect(d.state.state).toBe('Healthy');
        expect(d.state.overlapFallback).toBeNull();
      });

      it('a restart the kubelet calls Unknown (a container lost with its node) is no exit: no verdict, no fallback (found on the real node after a power cycle)', () => {
        for (const spec of [BAD, { ...POD, uid: 'u1' }]) {
          let s = decide(fixtures(overlap).Active!.state, copyReady(), 6900).state;
          s = decide(s, { type: 'beat', beat: beat('Starting', { holderUid: spec.uid, holder: spec.name }) }, 7000).state;
          // The status the api-server kept from before the reboot, then the kubelet's first report of this boot.
          s = decide(s, { type: 'pod', pod: { ...spec, restarts: 2 * x(spec) } }, 7100).state;
          const d = decide(s, { type: 'pod', pod: { ...spec, restarts: 3 * x(spec), lastExitUnknown: true } }, 7200);
          expect(d.state.knownBad).toBeNull();
          expect(d.state.overlapFallback).toBeNull();
          expect(d.actions.filter((a) => a.type === 'event' || a.type === 'activate' || a.type === 'retire')).toEqual([]);
          // A real exit after it still counts.
          const later = decide(d.state, { type: 'pod', pod: { ...spec, restarts: 4 * x(spec) } }, 7300).state;
          expect(later.knownBad !== null || later.overlapFallback !== null).toBe(true);
        }
      });

      it('an exit of its own spec after a long run is no sign of unshared ports: no fallback, the overlap stands (found on the real node: exit 255 after 61 s)', () => {
        const own = { ...POD, uid: 'u1' };
        let s = decide(fixtures(overlap).Active!.state, copyReady(), 6900).state;
        s = decide(s, { type: 'beat', beat: beat('Starting', { holderUid: own.uid }) }, 7000).state;
        s = decide(s, { type: 'pod', pod: { ...own, restarts: 2 } }, 7100).state;
        const d = decide(s, { type: 'pod', pod: { ...own, restarts: 3, lastExitRanMs: 61_000 } }, 7200);
        expect(d.state.overlapFallback).toBeNull();
        expect(d.state.knownBad).toBeNull();
        expect(d.actions.filter((a) => a.type === 'event' || a.type === 'retire')).toEqual([]);
        expect(d.state.state).toBe('Active');
        // The copy took readyAfterMs to beat Ready: an exit within that (plus the slack), as a failed
        // bind comes, still reads as unshared ports; one just longer does not.
        const limit = d.state.exitWatch.readyAfterMs! + OWN_SPEC_BIND_SLACK_MS;
        expect(limit).toBeLessThan(61_000);
        const slow = decide(d.state, { type: 'pod', pod: { ...own, restarts: 4, lastExitRanMs: limit + 1000 } }, 7250);
        expect(slow.state.overlapFallback).toBeNull();
        const quick = decide(slow.state, { type: 'pod', pod: { ...own, restarts: 5, lastExitRanMs: limit } }, 7300);
        expect(quick.state.overlapFallback).toMatchObject({ announced: true });
        expect(quick.actions.filter((a) => a.type === 'event' && a.reason === 'OverlapUnavailable')).toHaveLength(1);
        // A new spec's exit is a verdict however long it ran: a spec that fails is not handed over to.
        let b = decide(fixtures(overlap).Active!.state, copyReady(), 6900).state;
        b = decide(b, { type: 'beat', beat: beat('Starting', { holderUid: BAD.uid, holder: BAD.name }) }, 7000).state;
        b = decide(b, { type: 'pod', pod: { ...BAD, restarts: 0 } }, 7100).state;
        expect(decide(b, { type: 'pod', pod: { ...BAD, restarts: 1 * N, lastExitRanMs: 61_000 } }, 7200).state.knownBad).toMatchObject({ specHash: 'h-bad' });
      });

      it('a new spec ends the verdict: the checkpoint shares its ports again for the overlap hand-over', () => {
        const r = overlapRun([0, 1], LIMPING);
        expect(r.state.checkpoint.exclusive).toBe(true);
        const next = { uid: 'u3', name: 'kube-apiserver-n1-3', specHash: 'h3', restarts: 0 };
        const d = decide(r.state, { type: 'pod', pod: next }, r.t + 500);
        expect(d.state.knownBad).toBeNull();
        expect(d.actions).toContainEqual({ type: 'activate', reason: expect.any(Object) });
        const shared = decide(d.state, { type: 'activated' }, r.t + 600);
        expect(shared.state.checkpoint.exclusive).toBe(false);
      });
    });

    it('with the pod unknown (no word from the api-server) nothing is judged', () => {
      let s = f.Active!.state;
      s = { ...s, pod: null };
      const d = ticksUntil(decide(s, { type: 'beat', beat: beat('Starting') }, 7000).state, 7000, 7000 + POLICY.handoverTimeoutMs + 1);
      expect(d.state.knownBad).toBeNull();
    });
  });

  it('last known good: a parent that never reports Ready is never captured', () => {
    let s = decide(f.Starting!.state, { type: 'pod', pod: { ...POD, specHash: 'h-bad' } }, 2100).state;
    for (let t = 2200; t < 20_000; t += 1000) {
      const d = decide(s, { type: 'beat', beat: beat('Starting') }, t);
      expect(kinds(d.actions)).not.toContain('capture');
      s = d.state;
    }
  });

  it('a Ready parent with a new spec is captured once, from that pod only', () => {
    const early = decide(f.Healthy!.state, { type: 'pod', pod: { ...POD, specHash: 'h2' } }, 2100);
    expect(kinds(early.actions)).not.toContain('capture');
    const s = decide(early.state, { type: 'beat', beat: beat('Ready') }, settledAt(f.Healthy!.state));
    expect(s.actions).toContainEqual({
      type: 'capture',
      pod: { ...POD, specHash: 'h2' },
      reason: { code: 'NewSpec', message: 'the Ready parent runs a new spec' },
    });
    const again = decide(s.state, { type: 'beat', beat: beat('Ready') }, settledAt(f.Healthy!.state) + 100);
    expect(kinds(again.actions)).not.toContain('capture');
    // A Ready beat from another pod (a different uid) does not capture this pod: it is refused, and
    // the parent's phase stays what its own pod last said (Starting here).
    const starting = decide(f.Healthy!.state, { type: 'beat', beat: beat('Starting') }, 2050).state;
    const once = decide(starting, { type: 'beat', beat: beat('Ready', { holderUid: 'someone-else' }) }, 2100);
    const other = decide(once.state, { type: 'beat', beat: beat('Ready', { holderUid: 'someone-else' }) }, 2150);
    expect(other.actions.map((a) => a.type)).toContain('beatRefused');
    expect(kinds(decide(other.state, { type: 'pod', pod: { ...POD, specHash: 'h3' } }, 2200).actions)).not.toContain('capture');
  });

  it('a beat from a holder no pod list names asks once for a fresh pod list; the list that names it lets it count', () => {
    const s = decide(f.Healthy!.state, { type: 'beat', beat: beat('Ready') }, 2050).state;
    const fresh = { holder: 'p-new', holderUid: 'uid-new' };
    const first = decide(s, { type: 'beat', beat: beat('Ready', fresh) }, 2100);
    expect(first.actions).toContainEqual({ type: 'listPods', ...fresh });
    expect(kinds(first.actions)).not.toContain('beatRefused');
    // Its next beat, with no list naming it yet, is refused as foreign, and asks no more.
    const second = decide(first.state, { type: 'beat', beat: beat('Ready', fresh) }, 2150);
    expect(kinds(second.actions)).toContain('beatRefused');
    expect(kinds(second.actions)).not.toContain('listPods');
    // A list that names it (a surge's new pod beside the tracked one): its later beats count.
    const listed = decide(second.state, { type: 'pod', pod: { ...POD, alsoListed: [{ uid: 'uid-new', name: 'p-new' }] } }, 2200);
    const third = decide(listed.state, { type: 'beat', beat: beat('Ready', fresh) }, 2250);
    expect(kinds(third.actions)).not.toContain('beatRefused');
    expect(third.state.lastChangeAt).toBe(2250);
  });

  it('last known good: an unprobed Ready (--probe none) is captured only once the api-server reports the pod Ready', () => {
    // A pod whose main container never ran: the sidecar beats Ready without a probe, the pod's own
    // Ready condition is False (or not reported yet).
    let s = decide(f.Healthy!.state, { type: 'beat', beat: beat('Ready', { unprobed: true }) }, 2050).state;
    const first = decide(s, { type: 'pod', pod: { ...POD, specHash: 'h2', ready: false } }, 2100);
    expect(kinds(first.actions)).not.toContain('capture');
    s = first.state;
    for (let t = 2200; t < 10_000; t += 1000) {
      const d = decide(s, { type: 'beat', beat: beat('Ready', { unprobed: true }) }, t);
      expect(d.state.state).toBe('Healthy');
      expect(kinds(d.actions)).not.toContain('capture');
      s = d.state;
    }
    const d = decide(s, { type: 'pod', pod: { ...POD, specHash: 'h2', ready: true } }, 10_100);
    expect(d.actions).toContainEqual({
      type: 'capture',
      pod: { ...POD, specHash: 'h2', ready: true },
      reason: { code: 'NewSpec', message: 'the Ready parent runs a new spec' },
    });
    // A probed Ready needs no word from the api-server on the pod's condition.
    const probed = decide(s, { type: 'beat', beat: beat('Ready') }, 10_200);
    expect(kinds(probed.actions)).toContain('capture');
  });

  it('an unprobed Ready (--probe none) retires a checkpoint, or ends a hand-over, only once the api-server reports the pod Ready', () => {
    // Active: the sidecar beats Ready without a probe while the main container crash-loops on the ports.
    let s = decide(f.Active!.state, { type: 'pod', pod: { ...POD, ready: false } }, 7000).state;
    for (let t = 7100; t < 12_000; t += 1000) {
      const d = decide(s, { type: 'beat', beat: beat('Ready', { unprobed: true }) }, t);
      expect(d.state.state).toBe('Active');
      expect(kinds(d.actions)).not.toContain('retire');
      s = d.state;
    }
    expect(s.reason.code).toBe('UnprobedReady');
    const ready = decide(s, { type: 'pod', pod: { ...POD, ready: true } }, 12_100);
    expect(ready.state.state).toBe('Healthy');
    expect(kinds(ready.actions)).toContain('retire');
    // A probed Ready needs no word on the pod's condition.
    expect(decide(s, { type: 'beat', beat: beat('Ready') }, 12_200).state.state).toBe('Healthy');
    // HandingOver: an unprobed Ready is no success until the pod is Ready; the deadline still holds.
    let h = decide(f.HandingOver!.state, { type: 'pod', pod: { ...POD, ready: false } }, 7200).state;
    h = decide(h, { type: 'beat', beat: beat('Ready', { unprobed: true }) }, 7300).state;
    expect(h.state).toBe('HandingOver');
    expect(decide(h, { type: 'pod', pod: { ...POD, ready: true } }, 7400).state.state).toBe('Healthy');
  });

  it('no capture while the api-server is unreachable', () => {
    const at = settledAt(f.Healthy!.state);
    const up = decide(f.Healthy!.state, { type: 'pod', pod: { ...POD, specHash: 'h2' } }, 2100).state;
    const down = decide(up, { type: 'api', reachable: false }, 2150).state;
    expect(kinds(decide(down, { type: 'beat', beat: beat('Ready') }, at).actions)).not.toContain('capture');
    expect(kinds(decide(up, { type: 'beat', beat: beat('Ready') }, at).actions)).toContain('capture');
  });

  it('GC only with the api-server word, after gcGrace', () => {
    let s = decide(f.Active!.state, { type: 'pod', pod: null }, 7000).state;
    expect(decide(s, { type: 'tick' }, 7000 + POLICY.gcGraceMs - 1).state.state).toBe('Active');
    const gone = decide(s, { type: 'tick' }, 7000 + POLICY.gcGraceMs);
    expect(gone.state.state).toBe('Orphaned');
    expect(kinds(gone.actions)).toContain('collect');
    // An outage resets the clock, and nothing is collected while the api-server is unreachable.
    s = decide(s, { type: 'api', reachable: false }, 30_000).state;
    const r = ticksUntil(s, 30_000, 1_000_000);
    expect(kinds(r.actions)).not.toContain('collect');
    s = decide(r.state, { type: 'api', reachable: true }, 1_000_000).state;
    expect(decide(s, { type: 'tick' }, 1_000_000 + POLICY.gcGraceMs).state.state).not.toBe('Orphaned');
  });

  it('a collection asked for but not yet done is cancelled when the api-server word is lost, and waits a full grace again', () => {
    const start = decide(f.Active!.state, { type: 'pod', pod: null }, 7000).state;
    const due = 7000 + POLICY.gcGraceMs;
    for (const lost of [
      { type: 'api', reachable: false },
      { type: 'schedulingUnknown', why: 'live read failed' },
    ] as Input[]) {
      const orphaned = decide(start, { type: 'tick' }, due);
      expect(kinds(orphaned.actions)).toContain('collect');
      const cancelled = decide(orphaned.state, lost, due + 100);
      // The checkpoint was running: it keeps running, and its copy stays.
      expect(cancelled.state.state).toBe('Active');
      expect(cancelled.state.checkpoint).toMatchObject({ stored: true, active: true });
      expect(summary(cancelled.actions)).toEqual(['event:CollectionCancelled']);
      // Ticks alone never bring the collection back: only a new list without the pod, then a full gcGrace.
      let s = cancelled.state;
      if (lost.type === 'api') s = decide(s, { type: 'api', reachable: true }, due + 200).state;
      const quiet = ticksUntil(s, due + 200, due + 10 * POLICY.gcGraceMs);
      expect(kinds(quiet.actions)).not.toContain('collect');
      const relisted = decide(quiet.state, { type: 'pod', pod: null }, due + 10 * POLICY.gcGraceMs).state;
      const early = ticksUntil(relisted, due + 10 * POLICY.gcGraceMs, due + 11 * POLICY.gcGraceMs - 1);
      expect(kinds(early.actions)).not.toContain('collect');
      expect(kinds(decide(early.state, { type: 'tick' }, due + 11 * POLICY.gcGraceMs).actions)).toContain('collect');
    }
  });

  it('a failed action backs off on its own: a failing capture does not delay an activation', () => {
    // A capture fails, again and again (disk full in the store's folder).
    let s = f.Silent!.state;
    s = decide(s, { type: 'actionFailed', action: 'capture', error: 'ENOSPC' }, 6500).state;
    s = decide(s, { type: 'actionFailed', action: 'capture', error: 'ENOSPC' }, 6550).state;
    expect(s.retry.capture).toEqual({ at: 6550 + 10_000, failures: 2 });
    // The silence is confirmed right after: the activation goes out at once, not after the capture's back-off.
    const act = decide(s, { type: 'confirmed', outcome: 'unchanged' }, 6600);
    expect(kinds(act.actions)).toContain('activate');
    // Its own failures double from ACTION_RETRY_MS; a success clears them.
    const f1 = decide(act.state, { type: 'actionFailed', action: 'activate', error: 'EIO' }, 6700);
    expect(f1.state.retry.activate).toEqual({ at: 11_700, failures: 1 });
    const again = decide(f1.state, { type: 'tick' }, 11_700);
    expect(kinds(again.actions)).toContain('activate');
    const f2 = decide(again.state, { type: 'actionFailed', action: 'activate', error: 'EIO' }, 11_800);
    expect(f2.state.retry.activate).toEqual({ at: 21_800, failures: 2 });
    expect(kinds(decide(f2.state, { type: 'tick' }, 21_799).actions)).not.toContain('activate');
    const ok = decide(decide(f2.state, { type: 'tick' }, 21_800).state, { type: 'activated' }, 21_900);
    expect(ok.state.retry.activate).toBeUndefined();
    expect(ok.state.retry.capture).toEqual({ at: 16_550, failures: 2 });
  });

  it('a failed action is retried after a pause, a lost report after a timeout', () => {
    const silent = f.Silent!.state;
    const act = decide(silent, { type: 'confirmed', outcome: 'unchanged' }, 6600);
    expect(kinds(act.actions)).toContain('activate');
    const failed = decide(act.state, { type: 'actionFailed', action: 'activate', error: 'ENOSPC' }, 6700);
    expect(kinds(failed.actions)).not.toContain('activate');
    expect(failed.wakeAt).toBe(6700 + 5000);
    expect(kinds(decide(failed.state, { type: 'tick' }, 11_700).actions)).toContain('activate');
    expect(kinds(decide(act.state, { type: 'tick' }, 6600 + ACTION_TIMEOUT_MS).actions)).toContain('activate');
  });

  it('an agent restart with an active checkpoint keeps it active until the parent returns', () => {
    const s = initialState({ namespace: 'n', key: 'k', policy: POLICY, now: 0, checkpoint: { stored: true, active: true, specHash: 'h1' } });
    expect(s.state).toBe('Active');
    const r = drive(s, [
      [100, { type: 'api', reachable: true }],
      [200, { type: 'beat', beat: beat('Ready') }], // baseline
      [300, { type: 'tick' }],
    ]);
    expect(r.state.state).toBe('Active');
    expect(r.all.flatMap((d) => kinds(d.actions))).not.toContain('retire');
    expect(decide(r.state, { type: 'beat', beat: beat('Ready') }, 1200).state.state).toBe('Healthy');
  });

  it('decisions are serializable', () => {
    const d = decide(f.Silent!.state, { type: 'confirmed', outcome: 'unchanged' }, 6600);
    expect(JSON.parse(JSON.stringify(d))).toEqual(d);
  });
});

describe('decide: a parent is judged by the interval it declares', () => {
  // The run: a heartbeat on a 5s interval, an agent window of 4s (POLICY), live reads that
  // find nothing new. Drives decide() through its own wake-ups for a minute and counts activations.
  function run(declaredMs: number | undefined, everyMs = 5000, untilMs = 60_000, stopAtMs = Infinity) {
    let st = start();
    const all: Action[] = [];
    const feed = (input: Input, t: number) => {
      const d = decide(st, input, t);
      st = d.state;
      all.push(...d.actions);
      for (const a of d.actions) {
        if (a.type === 'confirm') feed({ type: 'confirmed', outcome: 'unchanged' }, t);
        if (a.type === 'activate') feed({ type: 'activated' }, t);
        if (a.type === 'retire') feed({ type: 'retired' }, t);
      }
      return d;
    };
    let nextBeat = 1000;
    let wake: number | null = 0;
    let t = 0;
    while (t < untilMs) {
      const beatDue = nextBeat < stopAtMs ? nextBeat : Infinity;
      t = Math.min(beatDue, wake ?? Infinity, untilMs);
      const d =
        t === beatDue ? feed({ type: 'beat', beat: beat('Ready', declaredMs === undefined ? {} : { intervalMs: declaredMs }) }, t) : feed({ type: 'tick' }, t);
      if (t === beatDue) nextBeat += everyMs;
      wake = d.wakeAt;
    }
    return { state: st, actions: all, activations: all.filter((a) => a.type === 'activate').length };
  }

  it('an undeclared 5s heartbeat against a 4s window flaps: covered and handed back every interval (what the issue saw)', () => {
    expect(run(undefined).activations).toBeGreaterThanOrEqual(5);
  });

  it('a declared 5s interval against a 4s window: judged by 10s, never covered, one Warning, and the reason says so', () => {
    const r = run(5000);
    expect(r.activations).toBe(0);
    expect(r.state.state).toBe('Healthy');
    const warnings = r.actions.filter((a) => a.type === 'event' && a.reason === 'WindowBelowInterval');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ eventType: 'Warning', message: expect.stringContaining('judging it by 10s') });
    expect(reasonText(r.state.reason)).toMatch(/^WindowBelowInterval: the parent declares a 5s interval; judged by 10s, not the policy's 4s window/);
    expect(judgingWindowMs(r.state)).toBe(10_000);
  });

  it('a declared interval still lets a dead parent be covered, after twice that interval', () => {
    const r = run(5000, 5000, 40_000, 12_000); // beats at 1s, 6s, 11s, then nothing
    expect(r.activations).toBe(1);
    const silent = r.actions.find((a) => a.type === 'transition' && a.to === 'Silent');
    expect(silent).toBeDefined();
    // Last change at 11s: silent at 11s + 10s, not at 11s + 4s.
    expect(r.state.since).toBe(21_001);
  });

  it('wakeAt and freshness follow the widened window', () => {
    // At 6000 the startup grace is over (the policy window alone would call it silent at 10001).
    const h = decide(fixtures().Healthy!.state, { type: 'beat', beat: beat('Ready', { intervalMs: 3000 }) }, 6000);
    expect(h.wakeAt).toBe(6000 + 6000 + 1);
    expect(decide(h.state, { type: 'tick' }, 12_000).state.state).toBe('Healthy');
    expect(decide(h.state, { type: 'tick' }, 12_001).state.state).toBe('Silent');
  });

  it('an interval within the policy changes nothing: no Event, the policy window', () => {
    const r = run(1000, 1000, 20_000);
    expect(r.actions.filter((a) => a.type === 'event')).toEqual([]);
    expect(judgingWindowMs(r.state)).toBe(POLICY.windowMs);
    expect(reasonText(r.state.reason)).toBe('Ready: the parent reports Ready');
  });

  it('when the policy catches up, a Normal Event and the reason return to normal', () => {
    const r = run(5000, 5000, 20_000);
    const d = decide(
      r.state,
      { type: 'policy', policy: { ...POLICY, intervalMs: 5000, windowMs: 20_000, startupGraceMs: 20_000, handoverTimeoutMs: 30_000 } },
      20_000,
    );
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'event', eventType: 'Normal', reason: 'WindowCoversInterval' }));
    expect(reasonText(d.state.reason)).toBe('Ready: the parent reports Ready');
    expect(d.state.windowNotedMs).toBeNull();
  });

  it('a grace still running lasts at least one widened window from the first sighting', () => {
    const s = start(); // grace until 6000
    const d = decide(s, { type: 'beat', beat: beat('Ready', { intervalMs: 10_000 }) }, 1000);
    expect(d.state.graceUntil).toBe(21_000);
    expect(decide(d.state, { type: 'tick' }, 20_999).state.state).toBe('Pending');
    expect(decide(d.state, { type: 'tick' }, 21_000).state.state).toBe('Silent');
  });

  it('a checkpoint copy declaring an interval does not change how the parent is judged', () => {
    const d = decide(fixtures().Healthy!.state, { type: 'beat', beat: beat('Ready', { role: 'checkpoint', intervalMs: 60_000 }) }, 2500);
    expect(judgingWindowMs(d.state)).toBe(POLICY.windowMs);
  });
});

describe('decide: policy changes', () => {
  it('a grace still running is re-measured under the new policy', () => {
    const s = start(); // grace 6000 from 0
    const shorter = decide(s, { type: 'policy', policy: { ...POLICY, startupGraceMs: 2000 } }, 500).state;
    expect(shorter.graceUntil).toBe(2000);
    const over = decide(decide(s, { type: 'tick' }, 7000).state, { type: 'policy', policy: { ...POLICY, startupGraceMs: 60_000 } }, 7000).state;
    expect(over.graceUntil).toBe(6000);
  });
});

describe('decide: one round on several channels', () => {
  it('a round already seen on one channel, arriving late on another, is not a new sign of life', () => {
    const h = fixtures().Healthy!; // last change at 2000
    const local = beat('Ready', { channel: 'local' });
    let s = decide(h.state, { type: 'beat', beat: local }, 2100).state; // baseline on local
    const round = beat('Ready', { channel: 'local' });
    s = decide(s, { type: 'beat', beat: round }, 3000).state;
    expect(s.lastChangeAt).toBe(3000);
    const stopping = beat('Stopping', { channel: 'local' });
    s = decide(s, { type: 'beat', beat: stopping }, 3500).state;
    expect(s.state).toBe('Active');
    // The Lease's copy of the earlier Ready round arrives after a stalled watch re-lists.
    const late = decide(s, { type: 'beat', beat: { ...round, channel: 'lease' } }, 4000);
    expect(late.state.state).toBe('Active');
    expect(late.state.lastChangeAt).toBe(3500);
    // A restarted writer (sequence from 1 again) is new.
    const restarted = decide(s, { type: 'beat', beat: { ...round, channel: 'lease', sequence: 1, renewTime: 'later', phase: 'Ready' } }, 4100);
    expect(restarted.state.state).toBe('Healthy');
  });

  it('a first sighting late in the grace gets one window from then for the next beat; at the start it changes nothing', () => {
    const s0 = start(POLICY); // grace until 6000, window 4000
    expect(decide(s0, { type: 'beat', beat: beat('Ready', { channel: 'local' }) }, 100).state.graceUntil).toBe(6000);
    const late = decide(s0, { type: 'beat', beat: beat('Ready', { channel: 'local' }) }, 5000).state;
    expect(late.graceUntil).toBe(9000);
    // Not judged silent at the old end of the grace; silent a window after the first sighting without a change.
    expect(decide(late, { type: 'tick' }, 6500).state.state).toBe('Pending');
    expect(decide(late, { type: 'tick' }, 9100).state.state).not.toBe('Pending');
  });

  it("a round first sighted on one channel counts when it arrives as a change on another (the sidecar's first beat after a reboot)", () => {
    // The agent starts: the Lease left from before the reboot is its lease baseline; the local folder is empty.
    let s = start(POLICY);
    s = decide(s, { type: 'beat', beat: beat('Ready', { channel: 'lease', holderUid: 'old', sequence: 40 }) }, 1000).state;
    s = decide(s, { type: 'beat', beat: beat('Ready', { channel: 'annotation', holderUid: 'old', sequence: 40 }) }, 1000).state;
    // The new sidecar's first round: in the folder (a first sighting there), then on the Lease (a change).
    const first = beat('Ready', { channel: 'local', holderUid: 'u1', sequence: 1 });
    s = decide(s, { type: 'beat', beat: first }, 1500).state;
    expect(s.lastChangeAt).toBeNull();
    s = decide(s, { type: 'beat', beat: { ...first, channel: 'lease' } }, 1600).state;
    expect(s.lastChangeAt).toBe(1600);
    expect(s.state).toBe('Healthy');
    // Counted once: the same round arriving as a change on a third channel is not another sign of life.
    expect(decide(s, { type: 'beat', beat: { ...first, channel: 'annotation' } }, 1700).state.lastChangeAt).toBe(1600);
  });
});

describe('decide: a hand-over survives an agent restart', () => {
  it('resumes HandingOver with the deadline left, capped at one handoverTimeout', () => {
    const ck = { stored: true, active: false, specHash: 'h1' };
    const s = initialState({
      namespace: 'n',
      key: 'k',
      policy: POLICY,
      now: 1000,
      checkpoint: ck,
      handover: { remainingMs: 3000, attempts: 2, nextBackoffMs: 10_000 },
    });
    expect(s.state).toBe('HandingOver');
    expect(s.handover).toMatchObject({ attempts: 2, deadline: 4000, nextBackoffMs: 10_000 });
    const d = decide(s, { type: 'tick' }, 4000);
    expect(d.state.state).toBe('Active');
    expect(kinds(d.actions)).toContain('activate');
    const stepped = initialState({
      namespace: 'n',
      key: 'k',
      policy: POLICY,
      now: 0,
      checkpoint: ck,
      handover: { remainingMs: 1e9, attempts: 1, nextBackoffMs: 5000 },
    });
    expect(stepped.handover.deadline).toBe(POLICY.handoverTimeoutMs);
    const r = drive(s, [[1500, { type: 'tick' }]]);
    expect(r.state.state).toBe('HandingOver');
  });
});
