import { describe, expect, it } from 'vitest';
import { localBeatText } from '../channels/local.js';
import type { Beat } from '../core/types.js';
import { GATE_POLL_MS, type GateReading, judgeGate, waitAtGate } from './checkpoint-gate.js';

const target = { node: 'm1', namespace: 'kube-system', key: 'kube-apiserver' };
const NOW = 1_000_000;

function copyBeat(phase: Beat['phase'], o: Partial<Beat> = {}): string {
  const beat: Beat = {
    channel: 'local',
    holder: 'kube-apiserver-checkpoint-m1',
    holderUid: '',
    role: 'checkpoint',
    phase,
    sequence: 4,
    renewTime: '2026-12-06T22:00:00.000000Z',
    intervalMs: 1000,
    ...o,
  };
  return localBeatText({ ...target, role: beat.role }, beat);
}
const read = (text: string, ageMs = 0): GateReading => ({ text, mtimeMs: NOW - ageMs });

describe('judgeGate', () => {
  it('holds the parent while its copy on this node beats Starting', () => {
    expect(judgeGate(read(copyBeat('Starting')), target, NOW)).toEqual({ open: false, why: 'the checkpoint kube-apiserver-checkpoint-m1 is starting' });
  });

  it('opens when no copy runs, the copy is Ready or stopping', () => {
    expect(judgeGate(null, target, NOW).open).toBe(true);
    expect(judgeGate(read(copyBeat('Ready')), target, NOW)).toMatchObject({ open: true, why: 'the checkpoint kube-apiserver-checkpoint-m1 is Ready' });
    expect(judgeGate(read(copyBeat('Stopping')), target, NOW)).toMatchObject({ open: true, why: 'the checkpoint kube-apiserver-checkpoint-m1 is Stopping' });
  });

  it('opens on a Starting beat older than three of its intervals: that copy is not running', () => {
    expect(judgeGate(read(copyBeat('Starting'), 2_900), target, NOW).open).toBe(false);
    const stale = judgeGate(read(copyBeat('Starting'), 3_100), target, NOW);
    expect(stale).toEqual({ open: true, why: "the checkpoint's last beat is 3.1s old (Starting): it is not running" });
    // A beat that does not say its interval is judged by the default 5 s.
    expect(judgeGate(read(copyBeat('Starting', { intervalMs: undefined }), 14_000), target, NOW).open).toBe(false);
  });

  it('never waits on what is not a beat of this copy: corrupt, another node, the parent itself', () => {
    const corrupt = judgeGate(read('{"version":1,"no'), target, NOW);
    expect(corrupt.open).toBe(true);
    expect(corrupt.why).toMatch(/beat file is not a beat \(not JSON/);
    expect(judgeGate(read(copyBeat('Starting')), { ...target, node: 'm2' }, NOW)).toMatchObject({ open: true });
    const parentsOwn = localBeatText({ ...target, role: 'parent' }, { ...JSON.parse(copyBeat('Starting')), role: 'parent', channel: 'local' });
    expect(judgeGate(read(parentsOwn), target, NOW)).toMatchObject({ open: true, why: expect.stringContaining('role is parent') });
  });
});

describe('waitAtGate', () => {
  function world(script: Array<GateReading | null>) {
    let t = 0;
    let i = 0;
    const said: string[] = [];
    return {
      said,
      deps: {
        read: () => {
          const r = script[Math.min(i, script.length - 1)] ?? null;
          i += 1;
          return r && { ...r, mtimeMs: t + (r.mtimeMs - NOW) };
        },
        now: () => t,
        sleep: async (ms: number) => {
          t += ms;
        },
        say: (l: string) => said.push(l),
      },
      elapsed: () => t,
    };
  }

  it('returns at once when nothing is starting, without a word while it waits', async () => {
    const w = world([null]);
    await expect(waitAtGate(target, 60_000, w.deps)).resolves.toBe('no checkpoint of this parent runs on this node; starting at once');
    expect(w.said).toEqual([]);
    expect(w.elapsed()).toBe(0);
  });

  it('waits for the copy to be Ready, saying once why it waits', async () => {
    const starting = read(copyBeat('Starting'));
    const w = world([starting, starting, starting, starting, read(copyBeat('Ready'))]);
    const outcome = await waitAtGate(target, 60_000, w.deps);
    expect(outcome).toBe('the checkpoint kube-apiserver-checkpoint-m1 is Ready; starting after 1.0s');
    expect(w.elapsed()).toBe(4 * GATE_POLL_MS);
    expect(w.said).toEqual(["the checkpoint kube-apiserver-checkpoint-m1 is starting: the parent's containers wait (at most 60s)"]);
  });

  it('gives up at --max and lets the parent start', async () => {
    const w = world([read(copyBeat('Starting'))]);
    const outcome = await waitAtGate(target, 2_000, w.deps);
    expect(outcome).toBe('the checkpoint kube-apiserver-checkpoint-m1 is starting still after 2.0s: starting anyway (--max 2s)');
    expect(w.elapsed()).toBe(2_000);
  });
});
