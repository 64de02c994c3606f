import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BeatWriter } from '../channels/channel.js';
import { leaseWithBeat } from '../channels/lease.js';
import { FakeTime as FakeClock, settle } from '../core/fake-time.test-helpers.js';
import { ANNOTATION_POLICY_PROBLEM } from '../core/names.js';
import type { Beat, Channel } from '../core/types.js';
import type { HeartbeatIdentity } from './beat.js';
import { startHeartbeat } from './heartbeat.js';
import { POLICY_RELOAD_MS } from './policy-file.js';

const identity: HeartbeatIdentity = { namespace: 'kube-system', podName: 'api-1', podUid: 'u-1', key: 'kube-apiserver', node: 'n1', role: 'parent' };
const FILE = '/etc/lastseen/policy.yaml';
const HEAD = 'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\n';
const GOOD = HEAD + 'defaults:\n  interval: 1s\n  window: 4s\n';
const FIXED = HEAD + 'defaults:\n  interval: 2s\n  window: 8s\n';
// A typo in a unit: the schema refuses it with the path defaults.interval.
const BAD = HEAD + 'defaults:\n  interval: 1 sec\n  window: 4s\n';
const BUILTIN_INTERVAL_MS = 5_000;

class Recorder implements BeatWriter {
  beats: Array<Beat & { at: number }> = [];
  constructor(
    readonly channel: Channel,
    private readonly clock: FakeClock,
  ) {}
  write(beat: Beat): Promise<void> {
    this.beats.push({ ...beat, at: this.clock.now() });
    return Promise.resolve();
  }
}

function setup(initial: string | null) {
  const clock = new FakeClock({ io: true });
  const lease = new Recorder('lease', clock);
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) });
  const file = { text: initial };
  const hb = startHeartbeat({
    identity,
    policyFile: FILE,
    writers: [lease],
    probe: async () => ({ ok: true }),
    clock,
    logger,
    readPolicyFile: (f) => {
      if (f !== FILE) throw new Error(`unexpected file ${f}`);
      if (file.text === null) throw new Error(`ENOENT: no such file or directory, open '${f}'`);
      return file.text;
    },
  });
  const errors = () => lines.filter((l) => l.level === 50);
  return { clock, lease, hb, file, lines, errors };
}

describe('heartbeat policy file', () => {
  it('starts with the built-in defaults and an error naming the file and field when the file is invalid', async () => {
    const { clock, lease, hb, errors } = setup(BAD);
    await clock.advance(3 * BUILTIN_INTERVAL_MS);
    expect(hb.policy()).toMatchObject({ origin: 'defaults', intervalMs: BUILTIN_INTERVAL_MS });
    expect(hb.policy().problem).toContain(FILE);
    expect(hb.policy().problem).toContain('defaults.interval');
    // Still beating, at the built-in interval.
    expect(lease.beats.length).toBeGreaterThanOrEqual(3);
    expect(lease.beats[1]!.at - lease.beats[0]!.at).toBe(BUILTIN_INTERVAL_MS);
    // One loud error, not one per re-read.
    expect(errors()).toHaveLength(1);
    expect(String(errors()[0]!.msg)).toContain(FILE);
    expect(String(errors()[0]!.msg)).toContain('defaults.interval');
    expect(String(errors()[0]!.msg)).toContain('built-in defaults');
    await hb.stop();
  });

  it('starts with the built-in defaults when the file is missing, and says so', async () => {
    const { hb, errors } = setup(null);
    expect(hb.policy()).toMatchObject({ origin: 'defaults', intervalMs: BUILTIN_INTERVAL_MS });
    expect(String(errors()[0]!.msg)).toContain(`cannot read ${FILE}`);
    await hb.stop();
  });

  it('keeps the last good policy when the file turns invalid', async () => {
    const { clock, lease, hb, file, errors } = setup(GOOD);
    expect(hb.policy()).toMatchObject({ origin: 'file', problem: null, intervalMs: 1_000, windowMs: 4_000 });
    await clock.advance(2_000);
    file.text = BAD;
    await clock.advance(POLICY_RELOAD_MS + 2_000);
    expect(hb.policy()).toMatchObject({ origin: 'last-good', intervalMs: 1_000, windowMs: 4_000 });
    expect(hb.policy().problem).toContain('defaults.interval');
    expect(String(errors()[0]!.msg)).toContain('last good policy');
    const before = lease.beats.length;
    await clock.advance(3_000);
    expect(lease.beats.length - before).toBe(3);
    await hb.stop();
  });

  it('picks up a fixed file without a restart', async () => {
    const { clock, lease, hb, file, lines } = setup(BAD);
    expect(hb.policy().origin).toBe('defaults');
    await clock.advance(BUILTIN_INTERVAL_MS);
    file.text = FIXED;
    // The next re-read is at most one reload period (here one built-in interval) away.
    await clock.advance(POLICY_RELOAD_MS + BUILTIN_INTERVAL_MS);
    expect(hb.policy()).toEqual({ origin: 'file', problem: null, intervalMs: 2_000, windowMs: 8_000, channels: ['lease', 'local'] });
    expect(lines.some((l) => l.msg === 'policy file valid again: using it')).toBe(true);
    const n = lease.beats.length;
    await clock.advance(4_000);
    await settle();
    expect(lease.beats[n]!.at - lease.beats[n - 1]!.at).toBe(2_000);
    await hb.stop();
  });

  it('shows the problem on the Lease and removes it once the file is fine', () => {
    const target = {
      namespace: 'kube-system',
      key: 'kube-apiserver',
      node: 'n1',
      role: 'parent' as const,
      windowMs: 4_000,
      policyProblem: 'invalid policy x: defaults.interval: bad' as string | null,
    };
    const beat: Beat = {
      channel: 'lease',
      holder: 'api-1',
      holderUid: 'u-1',
      role: 'parent',
      phase: 'Ready',
      sequence: 1,
      renewTime: '2026-12-02T10:00:00.000000Z',
    };
    const withProblem = leaseWithBeat(null, target, beat);
    expect(withProblem.metadata?.annotations?.[ANNOTATION_POLICY_PROBLEM]).toBe('invalid policy x: defaults.interval: bad');
    target.policyProblem = null;
    const fixed = leaseWithBeat(withProblem, target, { ...beat, sequence: 2 });
    expect(fixed.metadata?.annotations).not.toHaveProperty(ANNOTATION_POLICY_PROBLEM);
  });
});
