import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BeatWriter } from '../channels/channel.js';
import { FakeTime as FakeClock } from '../core/fake-time.test-helpers.js';
import type { Beat } from '../core/types.js';
import type { HeartbeatIdentity, ProbeResult } from './beat.js';
import { startHeartbeat } from './heartbeat.js';
import { judgeReadyState, NO_PROOF_YET, READY_FRESH_INTERVALS, type ReadyState, readReadyVerdict, writeReadyState } from './ready-state.js';

const FILE = '/run/lastseen/ready/state';
const NOW = Date.UTC(2026, 11, 5, 12, 0, 0);
const text = (s: Record<string, unknown>) => JSON.stringify({ v: 1, phase: 'Ready', at: NOW, intervalMs: 5000, ...s });

describe('judgeReadyState', () => {
  it('a fresh Ready proof is ready, up to the freshness limit and not beyond', () => {
    expect(judgeReadyState(text({}), NOW, FILE)).toMatchObject({ ready: true });
    expect(judgeReadyState(text({ at: NOW - READY_FRESH_INTERVALS * 5000 }), NOW, FILE).ready).toBe(true);
    const stale = judgeReadyState(text({ at: NOW - READY_FRESH_INTERVALS * 5000 - 1 }), NOW, FILE);
    expect(stale.ready).toBe(false);
    expect(stale.message).toContain('15.0s ago, older than 3 intervals of 5000ms');
  });

  it('Starting and Stopping are not ready, and Starting says why the proof failed', () => {
    const starting = judgeReadyState(text({ phase: 'Starting', why: 'port 6443 is held by 1 listening socket(s) of no process of this pod' }), NOW, FILE);
    expect(starting).toEqual({ ready: false, message: expect.stringContaining('of no process of this pod') });
    expect(starting.message).toMatch(/^not ready \(Starting/);
    expect(judgeReadyState(text({ phase: 'Stopping' }), NOW, FILE)).toEqual({ ready: false, message: expect.stringContaining('stopping') });
  });

  it('an unprobed Ready is ready and says it proves nothing', () => {
    expect(judgeReadyState(text({ unprobed: true }), NOW, FILE)).toEqual({ ready: true, message: expect.stringContaining('unprobed') });
  });

  it('a missing, corrupt, foreign or oversized file is not ready, naming the file and what is wrong', () => {
    const cases: Array<[string | null, RegExp]> = [
      [null, /does not exist/],
      ['{"v":1,"phase":"Rea', /is not JSON/],
      ['', /is not JSON/],
      ['[]', /not an object/],
      [text({ v: 2 }), /version 2, expected 1/],
      [text({ phase: 'Healthy' }), /phase "Healthy"/],
      [text({ at: 'now' }), /at "now"/],
      [text({ intervalMs: 0 }), /intervalMs 0/],
      [text({ why: 7 }), /why is not a string/],
      [' '.repeat(5000), /5000 bytes/],
    ];
    for (const [t, says] of cases) {
      const v = judgeReadyState(t, NOW, FILE);
      expect(v.ready, String(t)).toBe(false);
      expect(v.message).toMatch(says);
      expect(v.message).toContain(FILE);
    }
  });

  it('a proof dated far in the future (the clock stepped back) is not ready', () => {
    expect(judgeReadyState(text({ at: NOW + 60_000 }), NOW, FILE)).toEqual({ ready: false, message: expect.stringContaining('in the future') });
    // Within the limit either way it counts: the writer and the probe read one clock, a moment apart.
    expect(judgeReadyState(text({ at: NOW + 1000 }), NOW, FILE).ready).toBe(true);
  });
});

describe('the ready file on disk', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lastseen-ready-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is written whole and read back; a missing or unreadable one is not ready', () => {
    const file = join(dir, 'state');
    expect(readReadyVerdict(file, NOW)).toMatchObject({ ready: false, message: expect.stringContaining('does not exist') });
    writeReadyState(file, { v: 1, phase: 'Ready', at: NOW, intervalMs: 5000 });
    expect(readReadyVerdict(file, NOW + 1000).ready).toBe(true);
    // No temporary left beside it.
    expect(readdirSync(dir)).toEqual(['state']);
    // A folder where the file should be: unreadable, not a crash.
    expect(readReadyVerdict(dir, NOW)).toMatchObject({ ready: false, message: expect.stringContaining(`cannot read ${dir}`) });
  });

  it('a failed write throws and leaves no temporary', () => {
    expect(() => writeReadyState(join(dir, 'no-such-folder', 'state'), { v: 1, phase: 'Ready', at: NOW, intervalMs: 5000 })).toThrow(/ENOENT/);
    writeFileSync(join(dir, 'state'), 'x');
    // The target is a folder: the rename fails, the temporary is removed.
    const folder = join(dir, 'sub');
    rmSync(join(dir, 'state'));
    mkdirSync(join(folder, 'state'), { recursive: true });
    writeFileSync(join(folder, 'state', 'x'), 'x');
    expect(() => writeReadyState(join(folder, 'state'), { v: 1, phase: 'Ready', at: NOW, intervalMs: 5000 })).toThrow();
    expect(readdirSync(folder)).toEqual(['state']);
  });
});

describe('the heartbeat keeps the ready file', () => {
  const identity: HeartbeatIdentity = { namespace: 'kube-system', podName: 'api-1', podUid: 'u-1', key: 'kube-apiserver', node: 'n1', role: 'parent' };
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lastseen-ready-hb-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const read = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as ReadyState;

  it('from the first moment (replacing a proof left by an earlier run), then each round, whatever the channels do, and Stopping at the end', async () => {
    const file = join(dir, 'state');
    const clock = new FakeClock({ io: true });
    // An earlier run of this container left a Ready proof, fresh by the clock.
    writeReadyState(file, { v: 1, phase: 'Ready', at: clock.wallNow(), intervalMs: 1000 });
    let answer: ProbeResult | null = null;
    const waiting: Array<(r: ProbeResult) => void> = [];
    const probe = () => (answer ? Promise.resolve(answer) : new Promise<ProbeResult>((r) => waiting.push(r)));
    // The Lease write fails every time: readiness is about the process, not the api-server.
    const failing: BeatWriter = { channel: 'lease', write: (_b: Beat) => Promise.reject(new Error('api-server unreachable')) };
    const hb = startHeartbeat({ identity, intervalMs: 1000, writers: [failing], probe, clock, logger: pino({ level: 'silent' }), readyFile: file });
    expect(read(file)).toMatchObject({ phase: 'Starting', why: NO_PROOF_YET, intervalMs: 1000 });
    expect(readReadyVerdict(file, clock.wallNow()).ready).toBe(false);

    // The first proof fails: Starting, with the probe's reason.
    for (const r of waiting.splice(0)) r({ ok: false, error: 'port 6443 is held by 1 listening socket(s) of no process of this pod' });
    answer = { ok: false, error: 'port 6443 is held by 1 listening socket(s) of no process of this pod' };
    await clock.advance(1);
    expect(read(file)).toMatchObject({ phase: 'Starting', why: expect.stringContaining('of no process of this pod') });
    const v = readReadyVerdict(file, clock.wallNow());
    expect(v).toEqual({ ready: false, message: expect.stringContaining('of no process of this pod') });

    // Proved: Ready at the next round, stamped with the round's wall time.
    answer = { ok: true };
    await clock.advance(1000);
    // Rounds keep their schedule (0, 1000, …): this one ran 1 ms ago.
    expect(read(file)).toMatchObject({ phase: 'Ready', at: clock.wallNow() - 1, intervalMs: 1000 });
    expect(read(file).why).toBeUndefined();
    expect(readReadyVerdict(file, clock.wallNow()).ready).toBe(true);

    // Not proved again: Starting.
    answer = { ok: false, error: 'HTTP 500' };
    await clock.advance(1000);
    expect(read(file)).toMatchObject({ phase: 'Starting', why: 'HTTP 500' });

    answer = { ok: true };
    await clock.advance(1000);
    expect(read(file).phase).toBe('Ready');
    await hb.stop();
    expect(read(file).phase).toBe('Stopping');
    expect(readReadyVerdict(file, clock.wallNow()).ready).toBe(false);
  });

  it('marks an unprobed Ready, and a proof the sidecar stops renewing goes stale', async () => {
    const file = join(dir, 'state');
    const clock = new FakeClock({ io: true });
    const hb = startHeartbeat({ identity, intervalMs: 1000, writers: [], probe: 'none', clock, logger: pino({ level: 'silent' }), readyFile: file });
    await clock.advance(1);
    expect(read(file)).toMatchObject({ phase: 'Ready', unprobed: true });
    // The loop stops writing (here: stopped, then the file put back as its last round left it).
    const last = readFileSync(file, 'utf8');
    await hb.stop();
    writeFileSync(file, last);
    const at = read(file).at;
    expect(readReadyVerdict(file, at + 3000).ready).toBe(true);
    expect(readReadyVerdict(file, at + 3001)).toMatchObject({ ready: false, message: expect.stringContaining('is not proving') });
  });

  it('a ready file it cannot write is logged once, and beating goes on', async () => {
    const clock = new FakeClock({ io: true });
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) });
    const beats: Beat[] = [];
    const writer: BeatWriter = {
      channel: 'local',
      write: (b: Beat) => {
        beats.push(b);
        return Promise.resolve();
      },
    };
    const file = join(dir, 'missing-folder', 'state');
    const hb = startHeartbeat({ identity, intervalMs: 1000, writers: [writer], probe: async () => ({ ok: true }), clock, logger, readyFile: file });
    await clock.advance(3500);
    await hb.stop();
    const warnings = lines.filter((l) => l.msg === 'ready file not written: the pod will turn NotReady once the last proof ages');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ file, error: expect.stringContaining('ENOENT') });
    expect(beats.map((b) => b.phase)).toEqual(['Ready', 'Ready', 'Ready', 'Ready', 'Stopping']);
  });
});
