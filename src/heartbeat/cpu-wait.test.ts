// The port holders' wait for a CPU, from the kernel's per-thread schedstat: over a fixture /proc,
// and on this machine's own kernel with real processes (a stopped one, and two busy ones sharing
// one CPU), which is what tells a starved process from a hung one (cpu-wait.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runQueueWaitNs, STARVED_WAIT_FRACTION, starvedOver } from './cpu-wait.js';

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

function fakeProc(threads: Record<number, Record<number, string>>): string {
  const root = mkdtempSync(join(tmpdir(), 'lastseen-schedstat-'));
  dirs.push(root);
  for (const [pid, tids] of Object.entries(threads)) {
    for (const [tid, text] of Object.entries(tids)) {
      mkdirSync(join(root, pid, 'task', tid), { recursive: true });
      writeFileSync(join(root, pid, 'task', tid, 'schedstat'), text);
    }
  }
  return root;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('runQueueWaitNs over a fixture /proc', () => {
  it('sums the second field of every thread of every process; skips what does not parse', () => {
    const root = fakeProc({ 10: { 10: '500 2000 7\n', 11: '100 3000 2\n' }, 20: { 20: '1 5 1\n', 21: 'garbage\n' } });
    expect(runQueueWaitNs([10, 20], root)).toBe(5005);
    expect(runQueueWaitNs([10], root)).toBe(5000);
  });

  it('no readable thread (a process gone, a kernel without schedstat): null, never 0', () => {
    const root = fakeProc({ 10: { 10: 'x y z\n' } });
    expect(runQueueWaitNs([10], root)).toBeNull();
    expect(runQueueWaitNs([99], root)).toBeNull();
    expect(runQueueWaitNs([], root)).toBeNull();
  });
});

describe('starvedOver', () => {
  it(`starved from ${STARVED_WAIT_FRACTION * 100}% of the probe's time spent waiting`, () => {
    expect(starvedOver(0, 500e6, 2000)).toEqual({ starved: true, waitedMs: 500 });
    expect(starvedOver(0, 499e6, 2000)).toEqual({ starved: false, waitedMs: 499 });
    expect(starvedOver(null, 5e9, 2000)).toEqual({ starved: false, waitedMs: null });
    expect(starvedOver(1e9, 0, 2000)).toEqual({ starved: false, waitedMs: 0 }); // a thread gone: never negative
  });
});

describe('runQueueWaitNs on this kernel', () => {
  const busy = (cpu: string) => {
    const c = spawn('taskset', ['-c', cpu, 'sh', '-c', 'while :; do :; done'], { stdio: 'ignore' });
    children.push(c);
    return c.pid!;
  };

  it('a stopped process waits for no CPU; two busy ones pinned to one CPU each wait about half the time', async () => {
    const stopped = busy('0');
    process.kill(stopped, 'SIGSTOP');
    await sleep(100);
    const a = busy('0');
    const b = busy('0');
    await sleep(200); // both running
    const before = { stopped: runQueueWaitNs([stopped]), a: runQueueWaitNs([a]), b: runQueueWaitNs([b]) };
    const t0 = performance.now();
    await sleep(1000);
    const elapsed = performance.now() - t0;
    const after = { stopped: runQueueWaitNs([stopped]), a: runQueueWaitNs([a]), b: runQueueWaitNs([b]) };
    expect(before.stopped, 'schedstat readable (CONFIG_SCHED_INFO)').not.toBeNull();
    const stoppedWait = starvedOver(before.stopped, after.stopped, elapsed);
    expect(stoppedWait.starved).toBe(false);
    expect(stoppedWait.waitedMs).toBeLessThan(1);
    // Each busy loop runs about half the time and waits the other half (the machine's other load adds to it).
    expect(starvedOver(before.a, after.a, elapsed).starved).toBe(true);
    expect(starvedOver(before.b, after.b, elapsed).starved).toBe(true);
  });
});
