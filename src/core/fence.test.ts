import { describe, expect, it } from 'vitest';
import type { ParentPolicy } from '../policy/policy.js';
import {
  FENCE_REPEAT_MS,
  fenceFailed,
  fenceWakes,
  HANG_CONFIRM_ROUNDS,
  HANG_STARVED_MS,
  judgeFencedNotBack,
  judgeHang,
  observeFenced,
  START_HUNG_MS,
} from './fence.js';
import { beat, feed, fixtures, POD, POLICY, start } from './fixtures.test-helpers.js';
import type { Action, Input, ParentState } from './types.js';

const overlap = { ...POLICY, handover: 'overlap' as const };
const hungBeat = () => beat('Starting', { unanswered: true });
const kinds = (as: Action[]) => as.map((a) => (a.type === 'event' ? `event:${a.reason}` : a.type));

describe('a parent starved of CPU is slow, not hung (Beat.starved)', () => {
  // startTimeout above the bound, as the default (5 min): only the starved bound is at stake here.
  const slowStart = { startTimeoutMs: 300_000 };
  const starvedBeat = () => beat('Starting', { unanswered: true, afterReady: true, starved: true });
  const feedEvery = (state: Parameters<typeof feed>[0], from: number, to: number, b: () => ReturnType<typeof beat>) => {
    const inputs: [number, Input][] = [];
    for (let t = from; t <= to; t += 1000) inputs.push([t, { type: 'beat', beat: b() }]);
    return feed(state, inputs);
  };

  for (const handover of ['overlap', 'release'] as const) {
    it(`${handover}: unanswered rounds of a process waiting for a CPU are a sign of life until HANG_STARVED_MS, then it is fenced, saying so`, () => {
      const h = fixtures({ ...POLICY, ...slowStart, handover }).Healthy!.state; // a Ready beat at 2000
      const within = feedEvery(h, 2500, 2500 + HANG_STARVED_MS - 1000, starvedBeat);
      expect(kinds(within.actions)).not.toContain('fence');
      expect(kinds(within.actions)).not.toContain('activate');
      expect(within.state.state).not.toBe('Active');
      // Past the bound with no beat: nothing (a timer is no evidence; the round crossing it may answer).
      expect(kinds(feed(within.state, [[2500 + HANG_STARVED_MS + 500, { type: 'tick' }]]).actions)).not.toContain('fence');
      const past = feedEvery(within.state, 2500 + HANG_STARVED_MS, 2500 + HANG_STARVED_MS, starvedBeat);
      const fence = past.actions.find((a) => a.type === 'fence');
      expect(fence).toMatchObject({ type: 'fence', podUid: POD.uid, evenIfStarved: true });
      expect(fence?.type === 'fence' && fence.reason.message).toMatch(/waiting for a CPU/);
    });
  }

  it('a round not seen waiting for a CPU after starved ones: hung at once, and the sidecar is not told to fence a starved one', () => {
    const h = fixtures({ ...POLICY, ...slowStart, handover: 'overlap' }).Healthy!.state;
    const starved = feedEvery(h, 2500, 12_500, starvedBeat);
    expect(kinds(starved.actions)).not.toContain('fence');
    const hung = feed(starved.state, [[13_500, { type: 'beat', beat: hungBeat() }]]);
    expect(hung.state.state).toBe('Active');
    const fence = hung.actions.find((a) => a.type === 'fence');
    expect(fence).toMatchObject({ type: 'fence', podUid: POD.uid });
    expect(fence?.type === 'fence' && fence.evenIfStarved).toBeFalsy();
  });

  it('an answered round ends the run: a later starvation starts its bound over', () => {
    const h = fixtures({ ...POLICY, ...slowStart, handover: 'overlap' }).Healthy!.state;
    const a = feedEvery(h, 2500, 2500 + HANG_STARVED_MS - 10_000, starvedBeat);
    const b = feed(a.state, [[2500 + HANG_STARVED_MS - 9000, { type: 'beat', beat: beat('Ready') }]]);
    const c = feedEvery(b.state, 2500 + HANG_STARVED_MS - 8000, 2500 + HANG_STARVED_MS + 20_000, starvedBeat);
    expect(kinds(c.actions)).not.toContain('fence');
  });
});

describe('fencing a hung parent (src/core/fence.ts)', () => {
  it('overlap: two unanswered rounds activate the checkpoint (ParentHung) and fence the hung process at once, not waiting for the copy', () => {
    const h = fixtures(overlap).Healthy!.state; // a Ready beat at 2000
    const one = feed(h, [[2500, { type: 'beat', beat: hungBeat() }]]);
    expect(one.state.state).toBe('Healthy'); // one round may be a slow answer
    expect(kinds(one.actions)).not.toContain('fence');
    expect(HANG_CONFIRM_ROUNDS).toBe(2);
    const two = feed(one.state, [[3500, { type: 'beat', beat: hungBeat() }]]);
    expect(two.state.state).toBe('Active');
    expect(two.state.reason.code).toBe('ParentHung');
    // A copy beside a hung listener cannot prove itself Ready, and the kubelet may start it late:
    // the fence does not wait for it.
    expect(kinds(two.actions)).toContain('activate');
    expect(two.actions.find((a) => a.type === 'fence')).toMatchObject({ type: 'fence', podUid: POD.uid });
    // Asked once: more unanswered beats, the copy's beats, do not ask again while it is in flight.
    const more = feed(two.state, [
      [3600, { type: 'activated' }],
      [4000, { type: 'beat', beat: beat('Starting', { role: 'checkpoint', holderUid: 'copy-1', holder: 'kube-apiserver-checkpoint' }) }],
      [4500, { type: 'beat', beat: hungBeat() }],
      [6000, { type: 'beat', beat: beat('Ready', { role: 'checkpoint', holderUid: 'copy-1', holder: 'kube-apiserver-checkpoint' }) }],
    ]);
    expect(kinds(more.actions)).not.toContain('fence');
    // Its result is claimed once known: a Warning Event and the reason.
    const done = feed(more.state, [[7200, { type: 'fenced', podUid: POD.uid, killed: 1, detail: 'SIGKILL of pid 42' }]]);
    expect(kinds(done.actions)).toContain('event:ParentFenced');
    expect(done.state.reason.code).toBe('ParentFenced');
    expect(done.state.state).toBe('Active'); // the copy serves until the restarted parent is Ready
  });

  it('overlap: a parent that hangs again after a fence found it answering is fenced again after FENCE_REPEAT_MS, once', () => {
    const h = fixtures(overlap).Healthy!.state;
    const active = feed(h, [
      [2500, { type: 'beat', beat: hungBeat() }],
      [3500, { type: 'beat', beat: hungBeat() }],
      [3600, { type: 'activated' }],
      [3700, { type: 'fenced', podUid: POD.uid, killed: 0, detail: 'the main container answers its probe again: not fenced' }],
    ]).state;
    expect(active.state).toBe('Active');
    // It answers, then hangs again once the repeat interval has passed: fenced again, once.
    const again = feed(active, [
      [3700 + FENCE_REPEAT_MS, { type: 'beat', beat: beat('Ready') }],
      [3800 + FENCE_REPEAT_MS, { type: 'beat', beat: hungBeat() }],
      [3900 + FENCE_REPEAT_MS, { type: 'beat', beat: hungBeat() }],
    ]);
    expect(again.actions.filter((a) => a.type === 'fence')).toHaveLength(1);
  });

  it('release: the hung process holds the whole port, so it is fenced at once, with no copy; the parent gets a fresh start', () => {
    const h = fixtures(POLICY).Healthy!.state;
    const r = feed(h, [
      [2500, { type: 'beat', beat: hungBeat() }],
      [3500, { type: 'beat', beat: hungBeat() }],
    ]);
    expect(kinds(r.actions)).toContain('fence');
    expect(kinds(r.actions)).not.toContain('activate');
    expect(r.state.state).toBe('Healthy');
    const done = feed(r.state, [[3600, { type: 'fenced', podUid: POD.uid, killed: 1, detail: 'SIGKILL' }]]);
    expect(done.state.graceUntil).toBe(3600 + POLICY.startupGraceMs);
    // Not judged silent while it restarts (no answered beat since 2000, window 4000).
    expect(feed(done.state, [[8000, { type: 'tick' }]]).state.state).toBe('Healthy');
    // Restarted, it answers again: the hang is over.
    const back = feed(done.state, [
      [9000, { type: 'beat', beat: beat('Starting') }],
      [12_000, { type: 'beat', beat: beat('Ready') }],
    ]);
    expect(back.state.state).toBe('Healthy');
    expect(back.state.hang.since).toBeNull();
  });

  it('release: a fenced parent that does not report Ready within a hand-over window is covered by its checkpoint (a kubelet that does not restart it)', () => {
    const h = fixtures(POLICY).Healthy!.state;
    const r = feed(h, [
      [2500, { type: 'beat', beat: hungBeat() }],
      [3500, { type: 'beat', beat: hungBeat() }],
      [3600, { type: 'fenced', podUid: POD.uid, killed: 1, detail: 'SIGKILL' }],
    ]);
    expect(r.state.hang.recoverBy).toBe(3600 + POLICY.handoverTimeoutMs);
    // Its sidecar beats Starting (the process is gone, nothing restarts it): fresh, but not Ready.
    const steps: Array<[number, Input]> = [];
    for (let t = 4000; t <= 14_000; t += 1000) steps.push([t, { type: 'beat', beat: beat('Starting') }]);
    const waiting = feed(
      r.state,
      steps.filter(([t]) => t < 13_600),
    );
    expect(waiting.state.state).toBe('Starting');
    const late = feed(waiting.state, [[13_600, { type: 'tick' }]]);
    expect(late.state.state).toBe('Active');
    expect(late.state.reason.code).toBe('FencedNotBack');
    // The Starting it goes on reporting is the run that just failed: the copy serves one back-off
    // before the first hand-over (a kubelet that restarts nothing while no api-server answers is
    // waiting for the copy), then the parent gets its ports.
    const backoff = late.state.handover.nextBackoffMs;
    const starting = (from: number, to: number): Array<[number, Input]> => {
      const out: Array<[number, Input]> = [];
      for (let t = from; t < to; t += 1000) out.push([t, { type: 'beat', beat: beat('Starting') }]);
      return out;
    };
    const serving = feed(late.state, starting(14_000, 13_600 + backoff));
    expect(serving.state.state).toBe('Active');
    expect(serving.actions.map((a) => a.type)).not.toContain('retire');
    const handed = feed(serving.state, starting(13_600 + backoff, 13_600 + backoff + 2000));
    expect(handed.state.state).toBe('HandingOver');
    // A Ready beat in time ends the wait.
    const back = feed(r.state, [[5000, { type: 'beat', beat: beat('Ready') }]]);
    expect(back.state.hang.recoverBy).toBeNull();
    expect(feed(back.state, [[14_000, { type: 'beat', beat: beat('Ready') }]]).state.state).toBe('Healthy');
  });

  it('release: a fence that keeps failing never keeps the silence rules from covering the parent', () => {
    const h = fixtures({ ...POLICY, whenApiUnreachable: 'activate' }).Healthy!.state;
    let r = feed(h, [
      [2500, { type: 'beat', beat: hungBeat() }],
      [3500, { type: 'beat', beat: hungBeat() }],
      [3600, { type: 'actionFailed', action: 'fence', error: 'EPERM' }],
    ]);
    const steps: Array<[number, Input]> = [];
    for (let t = 4500; t <= 12_500; t += 1000) steps.push([t, { type: 'beat', beat: hungBeat() }]);
    r = feed(r.state, [...steps, [12_600, { type: 'api', reachable: false }], [12_700, { type: 'tick' }]]);
    expect(['Silent', 'Active']).toContain(r.state.state);
    expect(kinds(r.actions)).toContain('fence'); // asked again after the back-off, too
  });

  it('never a process on its way up: unanswered rounds after a Starting beat (a slow start on a loaded node) are no hang', () => {
    for (const policy of [POLICY, overlap]) {
      const h = fixtures(policy).Healthy!.state;
      const r = feed(h, [
        [2500, { type: 'beat', beat: beat('Starting') }],
        [3500, { type: 'beat', beat: hungBeat() }],
        [4500, { type: 'beat', beat: hungBeat() }],
        [5500, { type: 'beat', beat: hungBeat() }],
      ]);
      expect(kinds(r.actions)).not.toContain('fence');
      expect(r.state.reason.code).not.toBe('ParentHung');
    }
  });

  it('a slow start is a start: unanswered rounds of a process not yet Ready keep the parent Starting until startTimeout (a master cut off from etcd)', () => {
    for (const policy of [POLICY, overlap]) {
      const h = fixtures(policy).Healthy!.state;
      // The api-server answers its readiness probe with an error (Starting), then too slowly to be
      // heard, round after round, for far longer than the window (4 s here).
      const steps: Array<[number, Input]> = [[2500, { type: 'beat', beat: beat('Starting') }]];
      for (let t = 3500; t <= 30_000; t += 1000) steps.push([t, { type: 'beat', beat: hungBeat() }], [t + 500, { type: 'tick' }]);
      const r = feed(h, steps);
      expect(r.state.state).toBe('Starting');
      expect(kinds(r.actions)).not.toContain('activate');
      expect(kinds(r.actions)).not.toContain('fence');
      // Past startTimeout (30 s after the first Starting beat) it is covered like any start that never ends.
      const late = feed(r.state, [
        [33_000, { type: 'beat', beat: hungBeat() }],
        [33_100, { type: 'tick' }],
      ]);
      expect(late.state.reason.code).toBe('StartTimeout');
    }
  });

  it("never a sidecar that started over: unanswered rounds after the pod's Ready from before a reboot (its sequence went back) are no hang", () => {
    // The pod keeps its uid across a power cut; the last Ready beat the agent reads at its start is
    // the Lease written before it. The new sidecar counts from 1 while its process starts slowly.
    for (const policy of [POLICY, overlap]) {
      const h = fixtures(policy).Healthy!.state; // a Ready beat of POD, sequence well above 3
      const r = feed(h, [
        [3500, { type: 'beat', beat: beat('Starting', { unanswered: true, sequence: 1, renewTime: 'r1' }) }],
        [4500, { type: 'beat', beat: beat('Starting', { unanswered: true, sequence: 2, renewTime: 'r2' }) }],
        [5500, { type: 'beat', beat: beat('Starting', { unanswered: true, sequence: 3, renewTime: 'r3' }) }],
      ]);
      expect(kinds(r.actions)).not.toContain('fence');
      expect(r.state.reason.code).not.toBe('ParentHung');
    }
  });

  it('an agent that starts while its parent already hangs: the sidecar says the process was Ready, so it is fenced, not left for startTimeout', () => {
    // No answered beat in this agent's memory: the first it reads is already unanswered.
    const r = feed(start(overlap), [
      [1500, { type: 'beat', beat: beat('Starting', { unanswered: true, afterReady: true }) }],
      [2500, { type: 'beat', beat: beat('Starting', { unanswered: true, afterReady: true }) }],
      [3500, { type: 'beat', beat: beat('Starting', { unanswered: true, afterReady: true }) }],
    ]);
    expect(r.state.reason.code).toBe('ParentHung');
    expect(r.actions.find((a) => a.type === 'fence')).toMatchObject({ type: 'fence', podUid: POD.uid });
    // Without the sidecar's word (an older writer) the same beats are a slow start, as before.
    const old = feed(start(overlap), [
      [1500, { type: 'beat', beat: hungBeat() }],
      [2500, { type: 'beat', beat: hungBeat() }],
      [3500, { type: 'beat', beat: hungBeat() }],
    ]);
    expect(kinds(old.actions)).not.toContain('fence');
  });

  it("never a process the sidecar saw not Ready since: afterReady false overrides the pod's Ready in the agent's memory (a restarted container, same pod)", () => {
    for (const policy of [POLICY, overlap]) {
      const h = fixtures(policy).Healthy!.state; // a Ready beat of POD at 2000
      const r = feed(h, [
        [2500, { type: 'beat', beat: beat('Starting', { unanswered: true, afterReady: false }) }],
        [3500, { type: 'beat', beat: beat('Starting', { unanswered: true, afterReady: false }) }],
        [4500, { type: 'beat', beat: beat('Starting', { unanswered: true, afterReady: false }) }],
      ]);
      expect(kinds(r.actions)).not.toContain('fence');
      expect(r.state.reason.code).not.toBe('ParentHung');
    }
  });

  it('never a parent without a local channel: its sidecar reads fence requests only from the heartbeat folder', () => {
    for (const policy of [POLICY, overlap]) {
      const leaseOnly = { ...policy, channels: ['lease' as const] };
      const h = fixtures(leaseOnly).Healthy!.state;
      const r = feed(h, [
        [2500, { type: 'beat', beat: hungBeat() }],
        [3500, { type: 'beat', beat: hungBeat() }],
        [4500, { type: 'beat', beat: hungBeat() }],
      ]);
      expect(kinds(r.actions)).not.toContain('fence');
    }
  });

  it('never while fresh: an answered beat between two unanswered ones starts the count again', () => {
    const h = fixtures(POLICY).Healthy!.state;
    const r = feed(h, [
      [2500, { type: 'beat', beat: hungBeat() }],
      [3000, { type: 'beat', beat: beat('Ready') }],
      [3500, { type: 'beat', beat: hungBeat() }],
    ]);
    expect(kinds(r.actions)).not.toContain('fence');
    expect(r.state.state).toBe('Healthy');
  });

  it('never a pod that never answered (a starting process, not a hang), and never the copy', () => {
    const r = feed(start(POLICY), [
      [1500, { type: 'beat', beat: hungBeat() }],
      [2500, { type: 'beat', beat: hungBeat() }],
      [3500, { type: 'beat', beat: hungBeat() }],
    ]);
    expect(kinds(r.actions)).not.toContain('fence');
    const copy = feed(fixtures(POLICY).Healthy!.state, [
      [2500, { type: 'beat', beat: beat('Starting', { role: 'checkpoint', unanswered: true, holderUid: 'c' }) }],
      [3500, { type: 'beat', beat: beat('Starting', { role: 'checkpoint', unanswered: true, holderUid: 'c' }) }],
    ]);
    expect(kinds(copy.actions)).not.toContain('fence');
  });

  it('one round on two channels is one round; a failed fence is asked again after the back-off, a done one not before FENCE_REPEAT_MS', () => {
    const h = fixtures(POLICY).Healthy!.state;
    const b = hungBeat();
    const dup = feed(h, [
      [2500, { type: 'beat', beat: b }],
      [2600, { type: 'beat', beat: { ...b, channel: 'local' } }],
    ]);
    expect(kinds(dup.actions)).not.toContain('fence');
    const asked = feed(dup.state, [[3500, { type: 'beat', beat: hungBeat() }]]);
    expect(kinds(asked.actions)).toContain('fence');
    const failed = feed(asked.state, [[3600, { type: 'actionFailed', action: 'fence', error: 'EPERM' }]]);
    expect(kinds(feed(failed.state, [[4500, { type: 'beat', beat: hungBeat() }]]).actions)).not.toContain('fence'); // back-off
    expect(kinds(feed(failed.state, [[9000, { type: 'beat', beat: hungBeat() }]]).actions)).toContain('fence');
    const none = feed(asked.state, [[3600, { type: 'fenced', podUid: POD.uid, killed: 0, detail: 'answers again' }]]);
    expect(none.state.reason.code).toBe('FenceNotNeeded');
    expect(kinds(feed(none.state, [[5000, { type: 'beat', beat: hungBeat() }]]).actions)).not.toContain('fence');
    expect(kinds(feed(none.state, [[3600 + FENCE_REPEAT_MS, { type: 'beat', beat: hungBeat() }]]).actions)).toContain('fence');
  });
});

describe('a start that hangs beside a Ready copy (StartHung)', () => {
  // Active by overlap at 6700 (fixtures); the copy's first Ready beat at 7000.
  const silentBeat = (over: Parameters<typeof beat>[1] = {}) => beat('Starting', { unanswered: true, afterReady: false, ...over });
  const copyReady = () => beat('Ready', { role: 'checkpoint', holderUid: 'c', holder: 'copy' });
  const every = (state: ParentState, from: number, to: number, b: () => ReturnType<typeof beat>) => {
    const inputs: [number, Input][] = [];
    for (let t = from; t <= to; t += 1000) inputs.push([t, { type: 'beat', beat: b() }]);
    return feed(state, inputs);
  };
  const activeWithCopy = (policy: ParentPolicy = overlap) => feed(fixtures(policy).Active!.state, [[7000, { type: 'beat', beat: copyReady() }]]).state;
  const fences = (as: Action[]) => as.filter((a) => a.type === 'fence');

  it('overlap: a process that answers nothing since it started is fenced once it has been silent START_HUNG_MS beside the Ready copy, saying so', () => {
    const a = activeWithCopy();
    const before = every(a, 7500, 7500 + START_HUNG_MS - 1500, () => silentBeat());
    expect(fences(before.actions)).toEqual([]);
    expect(before.state.state).toBe('Active');
    const at = every(before.state, 7500 + START_HUNG_MS - 500, 7500 + START_HUNG_MS + 500, () => silentBeat());
    const f = fences(at.actions);
    expect(f).toHaveLength(1);
    expect(f[0]).toMatchObject({ type: 'fence', podUid: POD.uid, reason: { code: 'StartHung' } });
    expect(f[0]?.type === 'fence' && f[0].evenIfStarved).toBeFalsy();
    expect(f[0]?.type === 'fence' && f[0].reason.message).toMatch(
      /answered nothing since it started, for ~6\d(\.\d)?s, while the checkpoint beside it was Ready/,
    );
  });

  it("its silence counts from the copy's first Ready beat, and the bound is a wake", () => {
    const act = fixtures(overlap).Active!.state;
    const silentFirst = every(act, 7000, 37_000, () => silentBeat()); // silent since 7000, copy not Ready yet
    const ready = feed(silentFirst.state, [[40_000, { type: 'beat', beat: copyReady() }]]);
    expect(fenceWakes(ready.state)).toContain(40_000 + START_HUNG_MS);
    const early = every(ready.state, 41_000, 40_000 + START_HUNG_MS - 1000, () => silentBeat());
    expect(fences(early.actions)).toEqual([]);
    const tick = feed(early.state, [[40_000 + START_HUNG_MS, { type: 'tick' }]]);
    expect(fences(tick.actions)).toHaveLength(1);
  });

  it('never a start that answers: an answered beat (refused, an error status) starts the count over', () => {
    const a = activeWithCopy();
    const half = every(a, 7500, 7500 + START_HUNG_MS / 2, () => silentBeat());
    const answered = feed(half.state, [[8000 + START_HUNG_MS / 2, { type: 'beat', beat: beat('Starting') }]]);
    const rest = every(answered.state, 9000 + START_HUNG_MS / 2, 7500 + START_HUNG_MS + 5000, () => silentBeat());
    expect(fences(rest.actions)).toEqual([]);
  });

  it('never under release, and never without a copy', () => {
    const rel = activeWithCopy({ ...POLICY, handover: 'release' });
    expect(fences(every(rel, 7500, 7500 + START_HUNG_MS + 5000, () => silentBeat()).actions)).toEqual([]);
    const noCopy = fixtures(overlap).Starting!.state;
    expect(fences(every(noCopy, 2500, 2500 + START_HUNG_MS + 5000, () => silentBeat()).actions)).toEqual([]);
  });

  it('a process seen waiting for a CPU only past HANG_STARVED_MS, and the sidecar is told so', () => {
    const a = activeWithCopy();
    const starved = () => silentBeat({ starved: true });
    const within = every(a, 7500, 7500 + HANG_STARVED_MS - 1000, starved);
    expect(fences(within.actions)).toEqual([]);
    const past = every(within.state, 7500 + HANG_STARVED_MS, 7500 + HANG_STARVED_MS + 1000, starved);
    expect(fences(past.actions)[0]).toMatchObject({ podUid: POD.uid, evenIfStarved: true, reason: { code: 'StartHung' } });
  });

  it('after a fence, the restarted process gets its own START_HUNG_MS, not FENCE_REPEAT_MS', () => {
    const a = activeWithCopy();
    const first = every(a, 7500, 7500 + START_HUNG_MS + 500, () => silentBeat());
    expect(fences(first.actions)).toHaveLength(1);
    const t = 7500 + START_HUNG_MS + 1000;
    const done = feed(first.state, [[t, { type: 'fenced', podUid: POD.uid, killed: 1, detail: 'SIGKILL of pid 7' }]]);
    const again = every(done.state, t + 2000, t + 2000 + START_HUNG_MS + 1000, () => silentBeat());
    expect(START_HUNG_MS + 3000).toBeLessThan(FENCE_REPEAT_MS);
    expect(fences(again.actions)).toHaveLength(1);
  });
});

describe('fence.ts on its own: which rule judges a hung parent', () => {
  it('judgeHang leaves a parent that is not hung, or reports a deliberate stop, to the other rules (null)', () => {
    const h = fixtures(overlap).Healthy!.state;
    expect(judgeHang(structuredClone(h), 2500, [])).toBeNull();
    const hung = feed(h, [[2500, { type: 'beat', beat: hungBeat() }]]).state;
    hung.hang.rounds = HANG_CONFIRM_ROUNDS;
    const stopping = structuredClone(hung);
    stopping.phase = 'Stopping';
    expect(judgeHang(stopping, 3500, [])).toBeNull();
    expect(judgeHang(hung, 3500, [])).toBe(true);
    expect(hung.reason.code).toBe('ParentHung');
  });

  it('a fenced parent must be back by recoverBy; the wakes follow the fence and that deadline', () => {
    const s = structuredClone(fixtures(POLICY).Healthy!.state);
    s.hang.fence = { podUid: POD.uid, at: 3000, killed: null };
    observeFenced(s, { type: 'fenced', podUid: POD.uid, killed: 1, detail: 'SIGKILL' }, 3500, 10_000);
    s.phase = 'Starting'; // its restart beats, not Ready yet
    expect(s.hang).toMatchObject({ since: null, rounds: 0, recoverBy: 13_500, fence: { killed: 1 } });
    expect(fenceWakes(s)).toEqual([null, 13_500, null]);
    expect(judgeFencedNotBack(s, 13_499, [])).toBeNull();
    expect(judgeFencedNotBack(s, 13_500, [])).toBe(true);
    expect(s.reason.code).toBe('FencedNotBack');
    fenceFailed(s);
    expect(s.hang.fence).toBeNull();
  });
});
