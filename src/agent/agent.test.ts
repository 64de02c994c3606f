// The agent loop with fake actuators and a fake clock: the wiring around decide() carries out
// each action once, feeds results back, and follows wakeAt without real sleeps.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { RecoveredHandover } from '../core/decide.js';
import { FakeTime, settle as flush } from '../core/fake-time.test-helpers.js';
import type { Beat, Phase } from '../core/types.js';
import { nodeCheckpointStatusSchema } from '../kube/nodecheckpoint-types.js';
import { parsePolicyText } from '../policy/policy.js';
import { type Actuators, Agent, CollectRefusedError, type HandoverRecord, LIST_PODS_EVERY_MS, type LiveRead, podLastExit } from './agent.js';
import { AgentMetrics } from './metrics.js';
import { type PodStatusLike, v1PodInfo } from './parents.js';
import { buildStatus } from './status.js';

const policy = (() => {
  const r = parsePolicyText(
    'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults: { interval: 1s, window: 3s, startupGrace: 4s, handoverTimeout: 5s, handoverBackoff: { initial: 2s, max: 8s } }\n',
  );
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
})();

function setup(live: () => LiveRead = () => ({ beats: [] }), handovers?: HandoverRecord) {
  const time = new FakeTime();
  const calls: string[] = [];
  const actuators: Actuators = {
    capture: async (_p, pod) => {
      calls.push(`capture:${pod.specHash}`);
      return { specHash: pod.specHash };
    },
    activate: async () => void calls.push('activate'),
    retire: async () => void calls.push('retire'),
    collect: async () => void calls.push('collect'),
    readLive: async () => {
      calls.push('readLive');
      return live();
    },
    event: async (_p, e) => void calls.push(`event:${e.reason}`),
    fence: async (_p, uid) => {
      calls.push(`fence:${uid}`);
      return { killed: 1, detail: 'SIGKILL' };
    },
  };
  const agent = new Agent({
    node: 'n1',
    clock: time,
    timers: time,
    logger: pino({ level: 'silent' }),
    actuators,
    podInfo: (pod: PodStatusLike) => v1PodInfo(pod, `h-${pod.metadata?.uid}`),
    policy,
    ...(handovers ? { handovers } : {}),
  });
  let seq = 0;
  const beat = (phase: Phase, uid = 'u1'): Beat => ({
    channel: 'lease',
    holder: 'apiserver-n1',
    holderUid: uid,
    role: 'parent',
    phase,
    sequence: ++seq,
    renewTime: `r${seq}`,
  });
  const pod = (uid = 'u1') =>
    new Map([
      ['kube-system/kube-apiserver', { namespace: 'kube-system', key: 'kube-apiserver', pod: { metadata: { uid, name: 'apiserver-n1' } }, labels: {} }],
    ]);
  return { time, calls, agent, beat, pod, actuators };
}

describe('Agent loop', () => {
  it('a holder no pod list names asks for a fresh pod list, at most once per LIST_PODS_EVERY_MS', async () => {
    const { time, calls, agent, beat, pod, actuators } = setup();
    const lists: number[] = [];
    actuators.listPods = () => void lists.push(time.now());
    agent.api(true);
    agent.podsObserved(pod());
    await flush();
    agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
    await time.advance(1000);
    expect(lists).toEqual([]);
    // A surge's new pod, not in the list yet: one list asked for.
    agent.beat('kube-system', 'kube-apiserver', beat('Ready', 'u2'));
    await flush();
    expect(lists).toEqual([1000]);
    // Two more unnamed holders 2 s and 3 s later: one more list, when the bound allows it.
    await time.advance(2000);
    agent.beat('kube-system', 'kube-apiserver', beat('Ready', 'u3'));
    await time.advance(1000);
    agent.beat('kube-system', 'kube-apiserver', beat('Ready', 'u4'));
    await flush();
    expect(lists).toEqual([1000]);
    await time.advance(LIST_PODS_EVERY_MS);
    expect(lists).toEqual([1000, 1000 + LIST_PODS_EVERY_MS]);
    // Past the bound, a new unnamed holder is listed for at once.
    await time.advance(LIST_PODS_EVERY_MS);
    agent.beat('kube-system', 'kube-apiserver', beat('Ready', 'u5'));
    await flush();
    expect(lists).toEqual([1000, 1000 + LIST_PODS_EVERY_MS, 4000 + 2 * LIST_PODS_EVERY_MS]);
    expect(calls).not.toContain('activate');
    await agent.stop();
  });

  it('an unprobed Ready (--probe none) is captured only once the pod status says Ready', async () => {
    const { time, calls, agent, beat } = setup();
    const withStatus = (ready: 'True' | 'False') =>
      new Map([
        [
          'kube-system/kube-apiserver',
          {
            namespace: 'kube-system',
            key: 'kube-apiserver',
            pod: { metadata: { uid: 'u1', name: 'apiserver-n1' }, status: { conditions: [{ type: 'Ready', status: ready }] } },
            labels: {},
          },
        ],
      ]);
    agent.api(true);
    agent.podsObserved(withStatus('False'));
    for (let i = 0; i < 4; i++) {
      agent.beat('kube-system', 'kube-apiserver', { ...beat('Ready'), unprobed: true });
      await time.advance(1000);
    }
    expect(agent.views()[0]!.state.state).toBe('Healthy');
    expect(calls).toEqual([]);
    agent.podsObserved(withStatus('True'));
    await flush();
    expect(calls).toEqual(['capture:h-u1']);
  });

  it('captures from a Ready parent, activates after confirmed silence, retires when Ready returns', async () => {
    const { time, calls, agent, beat, pod } = setup();
    agent.api(true);
    agent.podsObserved(pod());
    for (let i = 0; i < 3; i++) {
      agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
      await time.advance(1000);
    }
    expect(calls).toEqual(['capture:h-u1']);
    expect(agent.views()[0]!.state.state).toBe('Healthy');
    // The parent stops beating: after the window (and the grace) a live read, then activation.
    await time.advance(10_000);
    // CheckpointActivated once the manifest is written, not when the core decides to write it.
    expect(calls).toEqual(['capture:h-u1', 'readLive', 'activate', 'event:CheckpointActivated']);
    expect(agent.views()[0]!.state.checkpoint.active).toBe(true);
    // The running copy's token lifetime is in the status, and only while it runs.
    const expiry = (id: string) => (id === 'kube-system/kube-apiserver' ? '2026-01-02T03:10:00.000Z' : undefined);
    const active = buildStatus('n1', agent.views(), time.now(), Date.now(), [], expiry);
    expect(active.parents?.[0]?.tokensExpireAt).toBe('2026-01-02T03:10:00.000Z');
    expect(nodeCheckpointStatusSchema.safeParse(active).success).toBe(true);
    agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
    await flush();
    expect(calls.slice(-2)).toEqual(['event:CheckpointRetired', 'retire']);
    expect(agent.views()[0]!.state.state).toBe('Healthy');
    expect(agent.views()[0]!.state.checkpoint.active).toBe(false);
    expect(buildStatus('n1', agent.views(), time.now(), Date.now(), [], expiry).parents?.[0]?.tokensExpireAt).toBeUndefined();
    await agent.stop();
  });

  // A heartbeat on 5s against an agent window of 3s flapped (activated and retired
  // every interval, Normal Events only). Declared, it is judged by 10s: Warning Event, metric, reason.
  it("the manifest folder's readings: a lost manifest is written again; a reading taken across our own write is dropped", async () => {
    const { time, calls, agent, beat, pod } = setup();
    agent.api(true);
    agent.podsObserved(pod());
    for (let i = 0; i < 3; i++) {
      agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
      await time.advance(1000);
    }
    await time.advance(10_000);
    expect(calls.slice(-2)).toEqual(['activate', 'event:CheckpointActivated']);
    const [check] = agent.manifestChecks();
    expect(check).toMatchObject({ id: 'kube-system/kube-apiserver', specHash: 'h-u1' });
    // What the core counts on already: nothing is fed.
    agent.manifestSeen(check!, 'ours');
    await flush();
    expect(calls.slice(-1)).toEqual(['event:CheckpointActivated']);
    // Removed from outside: written again, and said so.
    agent.manifestSeen(check!, 'absent');
    await flush();
    expect(calls.slice(-3)).toEqual(['event:ManifestRemoved', 'activate', 'event:CheckpointRestored']);
    // A reading asked for before that write ended is stale: dropped, nothing written.
    const n = calls.length;
    agent.manifestSeen(check!, 'absent');
    await flush();
    expect(calls.length).toBe(n);
    expect(agent.manifestChecks()[0]!.ticket).not.toBe(check!.ticket);
    await agent.stop();
  });

  it('CheckpointCollected only once the collection is done: a collection its live read refuses says nothing of it', async () => {
    const time = new FakeTime();
    const calls: string[] = [];
    let refuse = true;
    const actuators: Actuators = {
      capture: async (_p, pod) => ({ specHash: pod.specHash }),
      activate: async () => void calls.push('activate'),
      retire: async () => void calls.push('retire'),
      collect: async () => {
        calls.push(refuse ? 'collect:refused' : 'collect');
        if (refuse) throw new CollectRefusedError('the live read found a pod for this parent scheduled here');
      },
      readLive: async () => ({ beats: [] }),
      event: async (_p, e) => void calls.push(`event:${e.reason}`),
      fence: async () => ({ killed: 0, detail: 'not reached' }),
    };
    const agent = new Agent({
      node: 'n1',
      clock: time,
      timers: time,
      logger: pino({ level: 'silent' }),
      actuators,
      podInfo: (pod: PodStatusLike) => v1PodInfo(pod, 'h1'),
      policy,
    });
    agent.restore('kube-system', 'gone', { stored: true, active: false, specHash: 'h1' });
    agent.api(true);
    agent.podsObserved(new Map());
    const gcGraceMs = agent.views()[0]!.state.policy.gcGraceMs;
    await time.advance(gcGraceMs + 1000);
    expect(calls).toContain('collect:refused');
    expect(calls).not.toContain('event:CheckpointCollected');
    expect(calls).toContain('event:CollectionCancelled');
    refuse = false;
    agent.podsObserved(new Map());
    await time.advance(gcGraceMs + 1000);
    expect(calls.slice(-2)).toEqual(['collect', 'event:CheckpointCollected']);
    await agent.stop();
  });

  it('a parent beating slower than the window it declares is judged by twice its interval: no flapping, a Warning, the metric and the reason', async () => {
    const { time, calls, agent, beat, pod } = setup();
    const metrics = new AgentMetrics(false);
    agent.api(true);
    agent.podsObserved(pod());
    for (let i = 0; i < 8; i++) {
      agent.beat('kube-system', 'kube-apiserver', { ...beat('Ready'), intervalMs: 5000 });
      await time.advance(5000);
    }
    expect(calls.filter((c) => c === 'activate')).toEqual([]);
    expect(calls.filter((c) => c === 'event:WindowBelowInterval')).toHaveLength(1);
    const view = agent.views()[0]!;
    expect(view.state.state).toBe('Healthy');
    const st = buildStatus('n1', agent.views(), time.now(), Date.now(), []).parents?.[0];
    expect(st?.reason).toBe('WindowBelowInterval');
    expect(st?.message).toMatch(/^the parent declares a 5s interval; judged by 10s/);
    metrics.observe(agent.views(), time.now());
    expect(await metrics.registry.metrics()).toContain('lastseen_window_below_interval{parent="kube-system/kube-apiserver"} 1\n');
    await agent.stop();
  });

  it('the same parent without a declared interval flaps against the 3s window (what the issue saw)', async () => {
    const { time, calls, agent, beat, pod } = setup();
    agent.api(true);
    agent.podsObserved(pod());
    for (let i = 0; i < 8; i++) {
      agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
      await time.advance(5000);
    }
    expect(calls.filter((c) => c === 'activate').length).toBeGreaterThanOrEqual(3);
    await agent.stop();
  });

  it('a live read that finds the parent alive prevents activation', async () => {
    let lastBeat: Beat | null = null;
    let reads = 0;
    // Each live read finds a newer beat: the parent is alive, only the watch is stuck.
    const { time, calls, agent, beat, pod } = setup(() => {
      reads += 1;
      return { beats: lastBeat ? [{ ...lastBeat, sequence: lastBeat.sequence + 100 + reads, renewTime: `later-${reads}` }] : [] };
    });
    agent.api(true);
    agent.podsObserved(pod());
    for (let i = 0; i < 3; i++) {
      lastBeat = beat('Ready');
      agent.beat('kube-system', 'kube-apiserver', lastBeat);
      await time.advance(1000);
    }
    // The watch stalls (no more beats delivered) but the Lease keeps changing in the api-server.
    await time.advance(30_000);
    expect(calls.filter((c) => c === 'readLive').length).toBeGreaterThan(3);
    expect(calls).not.toContain('activate');
    await agent.stop();
  });

  it('an actuator failure is reported to the core and retried', async () => {
    const { time, calls, agent, beat, pod } = setup();
    let fail = true;
    const orig = (agent as unknown as { o: { actuators: Actuators } }).o.actuators;
    const activate = orig.activate;
    orig.activate = async (p, reason) => {
      if (fail) {
        calls.push('activate-failed');
        throw new Error('ENOSPC: no space left on device');
      }
      return activate(p, reason);
    };
    agent.api(true);
    agent.podsObserved(pod());
    for (let i = 0; i < 3; i++) {
      agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
      await time.advance(1000);
    }
    await time.advance(5000);
    expect(calls).toContain('activate-failed');
    fail = false;
    await time.advance(6000);
    expect(calls).toContain('activate');
    expect(agent.views()[0]!.state.checkpoint.active).toBe(true);
    await agent.stop();
  });

  it('beats seen before the parent is tracked are kept as its baseline', async () => {
    const { time, agent, beat, pod } = setup();
    agent.api(true);
    agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
    agent.podsObserved(pod());
    agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
    await time.advance(100);
    expect(agent.views()[0]!.state.state).toBe('Healthy');
    await agent.stop();
  });

  describe('hand-over record', () => {
    const ID = 'kube-system/kube-apiserver';
    const cp = { stored: true, active: true, specHash: 'h-u1' };
    const leftover: RecoveredHandover = { remainingMs: 3_000, attempts: 1, nextBackoffMs: 2_000 };
    const record = () => {
      const kept = new Map<string, RecoveredHandover>([[ID, leftover]]);
      const writes: Array<string | null> = [];
      let release: () => void = () => {};
      let hold = false;
      const handovers: HandoverRecord = {
        set: (id, h) => {
          if (h) kept.set(id, h);
          else kept.delete(id);
          writes.push(h ? `attempt ${h.attempts}` : null);
          return hold ? new Promise<void>((r) => (release = r)) : Promise.resolve();
        },
      };
      const holdNextWrites = () => {
        hold = true;
      };
      return { kept, writes, handovers, holdNextWrites, release: () => release() };
    };

    it('is cleared by any transition: a record left by a restart that found the checkpoint active cannot outlive it', async () => {
      // Resumed at a later restart, a record left behind would start a hand-over whose deadline
      // has passed and re-activate the checkpoint of a parent that is fine.
      const r = record();
      const { time, calls, agent, beat, pod } = setup(undefined, r.handovers);
      agent.restore('kube-system', 'kube-apiserver', cp, {}, leftover);
      expect(agent.views()[0]!.state.state).toBe('Active'); // the checkpoint was active: not resumed
      agent.api(true);
      agent.podsObserved(pod());
      agent.beat('kube-system', 'kube-apiserver', beat('Ready')); // baseline
      await time.advance(500);
      agent.beat('kube-system', 'kube-apiserver', beat('Ready'));
      await time.advance(500);
      expect(agent.views()[0]!.state.state).toBe('Healthy');
      expect(calls).toContain('retire');
      expect(r.kept.has(ID)).toBe(false);
      await agent.stop();
    });

    it('is durable before the retire that starts a hand-over', async () => {
      const r = record();
      r.kept.clear();
      const { time, calls, agent, beat, pod } = setup(undefined, r.handovers);
      agent.restore('kube-system', 'kube-apiserver', cp);
      agent.api(true);
      agent.podsObserved(pod());
      agent.beat('kube-system', 'kube-apiserver', beat('Starting')); // baseline
      await time.advance(500);
      r.holdNextWrites();
      agent.beat('kube-system', 'kube-apiserver', beat('Starting'));
      await time.advance(100);
      expect(agent.views()[0]!.state.state).toBe('HandingOver');
      expect(r.writes.at(-1)).toBe('attempt 1');
      expect(calls).not.toContain('retire'); // the record is not on disk yet
      r.release();
      await time.advance(100);
      expect(calls).toContain('retire');
      await agent.stop();
    });
  });
});

describe('podLastExit: Unknown', () => {
  const podLastExitUnknown = (pod: PodStatusLike) => podLastExit(pod)?.unknown === true;
  const status = (...last: Array<{ reason: string; finishedAt: string } | null>) => ({
    status: {
      containerStatuses: last.map((t) => ({ restartCount: 1, lastState: t ? { terminated: { exitCode: t.reason === 'Unknown' ? 255 : 1, ...t } } : {} })),
    },
  });
  it('reads the latest termination of the main containers, as a kubelet reports them after a power cycle', () => {
    // Read off the real node after a power cycle: reason Unknown, exit code 255.
    expect(podLastExitUnknown(status({ reason: 'Unknown', finishedAt: '2026-12-04T14:26:36Z' }))).toBe(true);
    expect(podLastExitUnknown(status({ reason: 'Error', finishedAt: '2026-12-04T14:26:49Z' }))).toBe(false);
    // The latest one decides: a crash after the reboot is an exit.
    expect(podLastExitUnknown(status({ reason: 'Unknown', finishedAt: '2026-12-04T14:26:36Z' }, { reason: 'Error', finishedAt: '2026-12-04T14:26:49Z' }))).toBe(
      false,
    );
    expect(podLastExitUnknown(status({ reason: 'Error', finishedAt: '2026-12-04T14:20:00Z' }, { reason: 'Unknown', finishedAt: '2026-12-04T14:26:36Z' }))).toBe(
      true,
    );
    expect(podLastExitUnknown(status(null))).toBe(false);
    expect(podLastExitUnknown({})).toBe(false);
  });
});

describe('podLastExit', () => {
  it('gives how long the latest exited run lasted, from its start and finish', () => {
    const pod = (...t: Array<{ reason: string; startedAt?: string; finishedAt?: string }>) => ({
      status: { containerStatuses: t.map((x) => ({ restartCount: 1, lastState: { terminated: { exitCode: 255, ...x } } })) },
    });
    // The real node's case: a kube-apiserver beside its copy, exit 255 after 61 s.
    expect(podLastExit(pod({ reason: 'Error', startedAt: '2026-12-04T17:46:14Z', finishedAt: '2026-12-04T17:47:15Z' }))).toEqual({
      unknown: false,
      ranMs: 61_000,
    });
    // The latest of two containers decides.
    expect(
      podLastExit(
        pod(
          { reason: 'Error', startedAt: '2026-12-04T17:00:00Z', finishedAt: '2026-12-04T17:00:02Z' },
          { reason: 'Unknown', startedAt: '2026-12-04T17:10:00Z', finishedAt: '2026-12-04T17:20:00Z' },
        ),
      ),
    ).toEqual({ unknown: true, ranMs: 600_000 });
    // No start given, or a start after the finish (clock trouble): no duration.
    expect(podLastExit(pod({ reason: 'Error', finishedAt: '2026-12-04T17:47:15Z' }))).toEqual({ unknown: false });
    expect(podLastExit(pod({ reason: 'Error', startedAt: '2026-12-04T17:48:00Z', finishedAt: '2026-12-04T17:47:15Z' }))).toEqual({ unknown: false });
    expect(podLastExit({ status: { containerStatuses: [{ restartCount: 0, lastState: {} }] } })).toBeNull();
    expect(podLastExit({})).toBeNull();
  });
});
