import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BeatWriter } from '../channels/channel.js';
import { FakeTime as FakeClock, settle } from '../core/fake-time.test-helpers.js';
import type { Beat, Channel } from '../core/types.js';
import type { HeartbeatIdentity, ProbeResult } from './beat.js';
import type { FenceFiles } from './fence.js';
import { runHeartbeatLoop, runSidecar } from './loop.js';

const identity: HeartbeatIdentity = { namespace: 'kube-system', podName: 'api-1', podUid: 'u-1', key: 'kube-apiserver', node: 'n1', role: 'parent' };

class Recorder implements BeatWriter {
  beats: Array<Beat & { at: number }> = [];
  closed = false;
  constructor(
    readonly channel: Channel,
    private readonly clock: FakeClock,
    private readonly behaviour: 'ok' | 'fail' | 'throw-sync' | 'hang' = 'ok',
  ) {}
  write(beat: Beat): Promise<void> {
    if (this.behaviour === 'throw-sync') throw new Error('broken writer');
    this.beats.push({ ...beat, at: this.clock.now() });
    if (this.behaviour === 'fail') return Promise.reject(new Error(`${this.channel}: api-server unreachable`));
    if (this.behaviour === 'hang') return new Promise((r) => this.clock.sleep(10_000).then(r));
    return Promise.resolve();
  }
  close() {
    this.closed = true;
  }
}

function memoryLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) });
  return { logger, lines };
}

describe('runHeartbeatLoop', () => {
  it('beats every interval on all channels, one sequence per round, then a Stopping beat on stop', async () => {
    const clock = new FakeClock({ io: true });
    const lease = new Recorder('lease', clock);
    const local = new Recorder('local', clock);
    const { logger } = memoryLogger();
    const hb = runHeartbeatLoop({ identity, intervalMs: 1000, writers: [lease, local], probe: async () => ({ ok: true }), clock, logger });
    await clock.advance(4500);
    expect(lease.beats.map((b) => b.at)).toEqual([0, 1000, 2000, 3000, 4000]);
    expect(lease.beats.map((b) => b.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(local.beats.map((b) => b.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(lease.beats.every((b) => b.phase === 'Ready' && b.channel === 'lease' && b.holder === 'api-1')).toBe(true);
    expect(local.beats[2]!.renewTime).toBe(lease.beats[2]!.renewTime);
    expect(lease.beats[1]!.renewTime).toMatch(/^2026-12-02T10:00:01\.000000Z$/);
    await hb.stop();
    const last = lease.beats.at(-1)!;
    expect(last).toMatchObject({ phase: 'Stopping', sequence: 6 });
    expect(local.beats.at(-1)).toMatchObject({ phase: 'Stopping', sequence: 6 });
    expect(lease.closed && local.closed).toBe(true);
    expect(hb.beats()).toBe(6);
    await clock.advance(5000);
    expect(lease.beats).toHaveLength(6);
    await hb.stop(); // idempotent
    expect(lease.beats).toHaveLength(6);
  });

  it('an unanswered beat says whether the last answered probe was Ready: a hang after Ready, not a slow start', async () => {
    const clock = new FakeClock({ io: true });
    const local = new Recorder('local', clock);
    const { logger } = memoryLogger();
    const hung: ProbeResult = { ok: false, error: 'no answer within 400ms', unanswered: true };
    const refused: ProbeResult = { ok: false, error: 'connect ECONNREFUSED' };
    // A process slow to start, then Ready, hung, restarted (refused), slow again, Ready, hung.
    const answers: ProbeResult[] = [hung, { ok: true }, hung, hung, refused, hung, { ok: true }, hung];
    let i = 0;
    const hb = runHeartbeatLoop({ identity, intervalMs: 1000, writers: [local], probe: async () => answers[i++] ?? hung, clock, logger });
    await clock.advance(7500);
    await hb.stop();
    expect(local.beats.slice(0, 8).map((b) => (b.unanswered ? `unanswered:${b.afterReady}` : b.phase))).toEqual([
      'unanswered:false',
      'Ready',
      'unanswered:true',
      'unanswered:true',
      'Starting',
      'unanswered:false',
      'Ready',
      'unanswered:true',
    ]);
    expect(local.beats.at(-1)).toMatchObject({ phase: 'Stopping' });
    expect(local.beats.at(-1)!.afterReady).toBeUndefined();
  });

  it('an unanswered probe of a process waiting for a CPU makes a starved beat; a starved round does not change what the last answer was', async () => {
    const clock = new FakeClock({ io: true });
    const local = new Recorder('local', clock);
    const { logger } = memoryLogger();
    const starved: ProbeResult = { ok: false, error: 'no answer within 400ms; waited for a CPU', unanswered: true, starved: true };
    const hung: ProbeResult = { ok: false, error: 'no answer within 400ms', unanswered: true };
    const answers: ProbeResult[] = [{ ok: true }, starved, starved, hung, { ok: true }];
    let i = 0;
    const hb = runHeartbeatLoop({ identity, intervalMs: 1000, writers: [local], probe: async () => answers[i++] ?? { ok: true }, clock, logger });
    await clock.advance(4500);
    await hb.stop();
    expect(local.beats.slice(0, 5).map((b) => (b.unanswered ? `unanswered:${b.afterReady}:${b.starved === true}` : b.phase))).toEqual([
      'Ready',
      'unanswered:true:true',
      'unanswered:true:true',
      'unanswered:true:false',
      'Ready',
    ]);
  });

  it('every beat declares the interval of its round, which follows a changed interval', async () => {
    const clock = new FakeClock({ io: true });
    const lease = new Recorder('lease', clock);
    const { logger } = memoryLogger();
    let interval = 1000;
    const hb = runHeartbeatLoop({ identity, intervalMs: () => interval, writers: [lease], probe: async () => ({ ok: true }), clock, logger });
    await clock.advance(1500);
    interval = 3000;
    await clock.advance(3000);
    await hb.stop();
    expect(lease.beats.map((b) => b.intervalMs)).toEqual([1000, 1000, 3000, 3000]);
  });

  it('a failing channel does not stop the others, and is logged with structured fields', async () => {
    const clock = new FakeClock({ io: true });
    const lease = new Recorder('lease', clock, 'fail');
    const annotation = new Recorder('annotation', clock, 'throw-sync');
    const local = new Recorder('local', clock);
    const { logger, lines } = memoryLogger();
    const hb = runHeartbeatLoop({ identity, intervalMs: 500, writers: [lease, annotation, local], probe: async () => ({ ok: true }), clock, logger });
    await clock.advance(2400);
    expect(local.beats.map((b) => b.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(lease.beats).toHaveLength(5);
    const failures = lines.filter((l) => l.msg === 'heartbeat channel write failed');
    expect(failures.filter((l) => l.channel === 'lease').map((l) => l.consecutiveFailures)).toEqual([1, 2, 3, 4, 5]);
    expect(failures.find((l) => l.channel === 'annotation')).toMatchObject({ level: 40, sequence: 1, error: 'broken writer' });
    expect(failures.find((l) => l.channel === 'lease')).toMatchObject({ error: 'lease: api-server unreachable', phase: 'Ready' });
    expect(hb.stats()).toMatchObject({ local: { written: 5, failed: 0 }, lease: { written: 0, failed: 5 } });
    await hb.stop();
    expect(local.beats.at(-1)!.phase).toBe('Stopping');
    expect(lease.beats.at(-1)!.phase).toBe('Stopping');
  });

  it('the probe chooses the phase', async () => {
    const clock = new FakeClock({ io: true });
    const local = new Recorder('local', clock);
    const answers: ProbeResult[] = [
      { ok: false, error: 'connection refused' },
      { ok: false, error: 'HTTP 503' },
      { ok: true },
      { ok: false, error: 'HTTP 500' },
    ];
    let i = 0;
    const { logger, lines } = memoryLogger();
    const hb = runHeartbeatLoop({ identity, intervalMs: 100, writers: [local], probe: async () => answers[i++] ?? { ok: true }, clock, logger });
    await clock.advance(350);
    expect(local.beats.map((b) => b.phase)).toEqual(['Starting', 'Starting', 'Ready', 'Starting']);
    // A new phase is logged, and so is a Starting whose reason changes (which proof fails).
    expect(lines.filter((l) => l.msg === 'heartbeat phase').map((l) => [l.phase, l.probeError])).toEqual([
      ['Starting', 'connection refused'],
      ['Starting', 'HTTP 503'],
      ['Ready', undefined],
      ['Starting', 'HTTP 500'],
    ]);
    await hb.stop();
  });

  it('a hung channel skips the rounds it cannot take; the others keep their interval (a frozen api-server never slows the local file)', async () => {
    const clock = new FakeClock({ io: true });
    const lease = new Recorder('lease', clock, 'hang'); // each write takes 10 s
    const local = new Recorder('local', clock);
    const { logger, lines } = memoryLogger();
    const hb = runHeartbeatLoop({ identity, intervalMs: 1000, writers: [lease, local], probe: async () => ({ ok: true }), clock, logger });
    await clock.advance(12_500);
    await settle();
    // Local: every interval, to the millisecond on the fake clock; one sequence per round.
    expect(local.beats.map((b) => b.at)).toEqual([0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10_000, 11_000, 12_000]);
    expect(local.beats.map((b) => b.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    // Lease: the first write hung until 10 s; rounds in between were skipped on it, not queued.
    expect(lease.beats.map((b) => b.at)).toEqual([0, 10_000]);
    expect(lease.beats.map((b) => b.sequence)).toEqual([1, 11]);
    expect(hb.stats()).toMatchObject({ local: { written: 13, skipped: 0 }, lease: { written: 1, skipped: 11 } });
    expect(lines.filter((l) => l.msg === 'heartbeat channel still writing an earlier beat; round skipped on it')).toHaveLength(1);
    expect(lines.some((l) => l.msg === 'heartbeat round overran its interval')).toBe(false);
    // Stop (the Lease's second write hangs until 20 s): the local file gets its Stopping beat at
    // once; the Lease once its hung write is done.
    const stopped = hb.stop();
    await clock.advance(10);
    await settle();
    expect(local.beats.at(-1)).toMatchObject({ phase: 'Stopping', sequence: 14, at: 12_500 });
    expect(lease.beats.at(-1)!.phase).toBe('Ready');
    await clock.advance(20_000);
    await stopped;
    expect(lease.beats.at(-1)).toMatchObject({ phase: 'Stopping', sequence: 14 });
  });

  it('a round reaches the api channels only once the local file holds it, waiting half an interval at most', async () => {
    const clock = new FakeClock({ io: true });
    const events: string[] = [];
    let localMs = 30; // a slow fsync
    const local: BeatWriter = {
      channel: 'local',
      write: (b: Beat) => {
        events.push(`local ${b.sequence} start ${clock.now()}`);
        return clock.sleep(localMs).then(() => void events.push(`local ${b.sequence} done ${clock.now()}`));
      },
    };
    const lease: BeatWriter = {
      channel: 'lease',
      write: (b: Beat) => {
        events.push(`lease ${b.sequence} start ${clock.now()}`);
        return Promise.resolve();
      },
    };
    const { logger } = memoryLogger();
    // The api writer comes first in the list, as in a policy's `channels: [lease, local]`.
    const hb = runHeartbeatLoop({ identity, intervalMs: 1000, writers: [lease, local], probe: async () => ({ ok: true }), clock, logger });
    await clock.advance(1500);
    await settle();
    expect(events).toEqual(['local 1 start 0', 'local 1 done 30', 'lease 1 start 30', 'local 2 start 1000', 'local 2 done 1030', 'lease 2 start 1030']);
    // A local write that hangs holds the api channels half an interval, no more, and the next round
    // (its local channel still busy) does not wait for it at all.
    localMs = 5000;
    events.length = 0;
    await clock.advance(1000);
    await settle();
    expect(events).toEqual(['local 3 start 2000', 'lease 3 start 2500']);
    await clock.advance(1000);
    await settle();
    expect(events.slice(2)).toEqual(['lease 4 start 3000']);
    const stopped = hb.stop();
    await clock.advance(10_000);
    await stopped;
  });

  it('a probe that overruns skips the ticks it missed instead of bunching up', async () => {
    const clock = new FakeClock({ io: true });
    const local = new Recorder('local', clock);
    const { logger, lines } = memoryLogger();
    let first = true;
    const probe = async (): Promise<ProbeResult> => {
      if (first) {
        first = false;
        await clock.sleep(3500);
      }
      return { ok: true };
    };
    const hb = runHeartbeatLoop({ identity, intervalMs: 1000, writers: [local], probe, clock, logger });
    await clock.advance(6000);
    await settle();
    expect(local.beats.map((b) => b.at)).toEqual([3500, 4000, 5000, 6000]);
    expect(lines.find((l) => l.msg === 'heartbeat round overran its interval')).toMatchObject({ sequence: 1, tookMs: 3500 });
    await hb.stop();
  });
});

describe('runSidecar: the loop and a parent’s fence responder', () => {
  const request = (id: string) => JSON.stringify({ id, podUid: 'u-1', reason: 'ParentHung: no answer', requestedAt: '2026-12-02T10:00:00.000Z' });

  function sidecar(fenced: boolean) {
    const clock = new FakeClock({ io: true });
    const local = new Recorder('local', clock);
    const { logger, lines } = memoryLogger();
    const f = { request: null as string | null, answers: [] as string[], watching: 0, notify: null as (() => void) | null, killed: [] as number[] };
    const files: FenceFiles = {
      readRequest: async () => f.request,
      writeAnswer: async (t) => void f.answers.push(t),
      watchRequests: (changed) => {
        f.watching++;
        f.notify = changed;
        return { close: () => f.watching-- };
      },
    };
    const hung: ProbeResult = { ok: false, error: 'no answer within 400ms', unanswered: true };
    const hb = runSidecar({
      identity,
      intervalMs: 1000,
      writers: [local],
      probe: async () => hung,
      clock,
      logger,
      fence: fenced ? { files, podUid: 'u-1', probe: async () => hung, portHolders: () => [77], kill: (pid) => void f.killed.push(pid) } : null,
    });
    return { clock, local, lines, f, hb };
  }

  it('answers a request as soon as its files say one came, and at every round otherwise', async () => {
    const { clock, lines, f, hb } = sidecar(true);
    await clock.advance(100);
    expect(f.watching).toBe(1);
    // Notified: answered at once, between rounds.
    f.request = request('r1');
    f.notify!();
    await clock.advance(0);
    expect(f.killed).toEqual([77]);
    expect(f.answers.map((a) => JSON.parse(a))).toEqual([
      { id: 'r1', podUid: 'u-1', killed: 1, detail: 'SIGKILL of pid 77 (no answer: no answer within 400ms)' },
    ]);
    expect(lines.find((l) => l.msg === 'fence request answered')).toMatchObject({ level: 40, killed: 1 });
    // Not notified (a lost notification, a folder that cannot be watched): the next round answers it.
    f.request = request('r2');
    await clock.advance(850);
    expect(f.answers).toHaveLength(1);
    await clock.advance(100);
    expect(f.answers.map((a) => JSON.parse(a).id)).toEqual(['r1', 'r2']);
    expect(f.killed).toEqual([77, 77]);
    await hb.stop();
    expect(f.watching).toBe(0);
  });

  it('without fence ports it only beats', async () => {
    const { clock, local, f, hb } = sidecar(false);
    f.request = request('r3');
    await clock.advance(2500);
    await hb.stop();
    expect(local.beats.map((b) => [b.phase, b.unanswered === true])).toEqual([
      ['Starting', true],
      ['Starting', true],
      ['Starting', true],
      ['Stopping', false],
    ]);
    expect(f.watching + f.answers.length + f.killed.length).toBe(0);
  });
});
