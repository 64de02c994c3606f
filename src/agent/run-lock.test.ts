// Which agent acts on a node: its DaemonSet's pod whenever it runs, the static copy only while it
// does not (run-lock.ts). Real locks and signs (abstract sockets) in temporary folders; the timers
// and the clock are driven by hand, so each retry and each check happens when the test says and the
// tests hold on a loaded machine. The DaemonSet pod that crash-loops is a real second process.
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Clock, Timers } from '../core/time.js';
import { LOCK_RENEW_MS, LOCK_RETRY_MS, readStandbySign, StandbySign } from './lock.js';
import { agentSpec, DEFER_MAX_MS, DISTRUST_MS, type HeldLock, holdNodeLock, KEEP_MS, LockTurns } from './run-lock.js';

const HELPER = fileURLToPath(new URL('./lock-holder.test-helpers.ts', import.meta.url));
const SPEC = 'spec-1';

/** Timers fired by the test: `tick(ms)` runs every timer of that period once and waits for what it started. */
class HandTimers implements Timers {
  private next = 0;
  private readonly due = new Map<number, { fn: () => void; ms: number }>();
  /** Every period ever asked for, in order. */
  readonly asked: number[] = [];
  set(fn: () => void, ms: number): unknown {
    this.asked.push(ms);
    const h = ++this.next;
    this.due.set(h, { fn, ms });
    return h;
  }
  clear(h: unknown): void {
    this.due.delete(h as number);
  }
  pending(ms: number): number {
    return [...this.due.values()].filter((t) => t.ms === ms).length;
  }
  /** Fire the timers of period `ms` and wait until each has set its next one (the run is over) or `done` says so. */
  async tick(ms: number, done: () => boolean = () => false): Promise<void> {
    const firing = [...this.due].filter(([, t]) => t.ms === ms);
    if (firing.length === 0) throw new Error(`no timer of ${ms} ms pending`);
    for (const [h, t] of firing) {
      this.due.delete(h);
      t.fn();
    }
    await until(() => done() || this.pending(ms) >= firing.length, `the ${ms} ms timer's run to finish`);
  }
}

const handClock = (): Clock & { t: number } => {
  const c = { t: 1_000_000, now: () => c.t };
  return c;
};

async function until(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 45_000): Promise<void> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Whether `p` has settled, after the callbacks already due ran. */
async function settled<T>(p: Promise<T>): Promise<{ value: T } | null> {
  const probe = {};
  const v = await Promise.race([p.then((value) => ({ value })), new Promise<typeof probe>((r) => setImmediate(() => r(probe)))]);
  return v === probe ? null : (v as { value: T });
}

function logs() {
  const lines: Record<string, unknown>[] = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { log: pino({ level: 'info' }, dest), lines, said: (msg: RegExp) => lines.some((l) => msg.test(String(l.msg))) };
}

const dir = () => mkdtemp(join(tmpdir(), 'lastseen-run-lock-'));

const releases: HeldLock[] = [];
const signs: StandbySign[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(releases.splice(0).map((h) => h.release()));
  await Promise.all(signs.splice(0).map((s) => s.lower()));
});

type Agent = { held: Promise<HeldLock>; timers: HandTimers };

/** An agent at the node lock (holdNodeLock, as runAgent calls it); its timers are the test's. */
function agent(
  stateDir: string,
  o: { role: 'copy' | 'daemonset'; pod: string; spec?: string; clock?: Clock; turns?: LockTurns; mayHandOver?: () => boolean; log?: pino.Logger },
): Agent {
  const timers = new HandTimers();
  const held = holdNodeLock({
    stateDir,
    holder: `${o.pod}-1`,
    role: o.role,
    pod: o.pod,
    spec: o.spec ?? SPEC,
    timers,
    log: o.log ?? pino({ level: 'silent' }),
    ...(o.clock ? { clock: o.clock } : {}),
    ...(o.turns ? { turns: o.turns } : {}),
    ...(o.mayHandOver ? { mayHandOver: o.mayHandOver } : {}),
  });
  void held.then((h) => releases.push(h));
  return { held, timers };
}

/** A DaemonSet pod's agent in a process of its own (killable): stands by with its sign up, then holds the lock. */
function daemonSetProcess(stateDir: string, pod: string, spec = SPEC): { child: ChildProcess; held: Promise<void>; gone: Promise<void> } {
  const child = fork(HELPER, [stateDir, `${pod}-proc`, 'daemonset', pod, spec], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  children.push(child);
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  const held = new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    void gone.then(() => reject(new Error(`${pod} exited before it held the lock`)));
  });
  held.catch(() => {});
  return { child, held, gone };
}

const signOf = async (d: string) => (await readStandbySign(d))?.pod ?? null;

describe('the copy and its DaemonSet pod at the node lock', () => {
  it('a copy starting beside its DaemonSet pod standing by on its spec (the copy restarted on a new spec) leaves it the free lock', async () => {
    const d = await dir();
    const old = agent(d, { role: 'daemonset', pod: 'lastseen-agent-old' });
    const oldHeld = await old.held;
    // The DaemonSet's new pod stands by: its sign is up.
    const next = agent(d, { role: 'daemonset', pod: 'lastseen-agent-new' });
    await until(async () => (await signOf(d)) === 'lastseen-agent-new', "the new pod's standby sign");
    // The copy the new pod replaced stops (the kubelet restarts it on the new spec) ...
    await oldHeld.release();
    // ... and starts again before the new pod's next retry.
    const c = logs();
    const copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1', log: c.log });
    await until(() => copy.timers.pending(LOCK_RETRY_MS) === 1, 'the copy to stand by');
    expect(await settled(copy.held), 'the copy took the lock its DaemonSet pod stands by for').toBeNull();
    expect(c.said(/leaving the node lock to it/)).toBe(true);
    // The new pod's retry takes it; the copy stands by behind it.
    await next.timers.tick(LOCK_RETRY_MS, () => next.timers.pending(LOCK_RENEW_MS) > 0);
    const nextHeld = await next.held;
    expect(nextHeld.isHeld()).toBe(true);
    expect(await signOf(d), 'the sign is down once the pod holds the lock').toBeNull();
    await copy.timers.tick(LOCK_RETRY_MS);
    expect(await settled(copy.held)).toBeNull();
    // When the pod goes, the copy takes over at its next retry.
    await nextHeld.release();
    await copy.timers.tick(LOCK_RETRY_MS, () => copy.timers.pending(LOCK_RENEW_MS) > 0);
    expect((await copy.held).isHeld()).toBe(true);
  });

  it('a copy with no DaemonSet pod standing by (a reboot: no api-server, no pod) takes a free lock at its first try, waiting for nothing', async () => {
    const d = await dir();
    const copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1' });
    let held: HeldLock | undefined;
    void copy.held.then((h) => {
      held = h;
    });
    await until(() => held !== undefined, 'the copy to take the lock (no timer fired)');
    expect(held?.isHeld()).toBe(true);
    expect(
      copy.timers.asked.filter((ms) => ms === LOCK_RETRY_MS),
      'retry sleeps before taking the lock',
    ).toEqual([]);
  });

  it('a copy holding the lock hands it to its DaemonSet pod standing by on its spec; the pod takes it only once the copy released it', async () => {
    const d = await dir();
    const c = logs();
    const copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1', log: c.log });
    const copyHeld = await copy.held;
    const pod = agent(d, { role: 'daemonset', pod: 'lastseen-agent-x' });
    await until(async () => (await signOf(d)) === 'lastseen-agent-x', "the pod's standby sign");
    expect(await settled(copyHeld.handOver)).toBeNull();
    await copy.timers.tick(LOCK_RENEW_MS);
    expect((await settled(copyHeld.handOver))?.value).toMatchObject({ pod: 'lastseen-agent-x', spec: SPEC });
    expect(c.said(/handing it the node lock/)).toBe(true);
    // Until the copy has stopped acting and released the lock, it holds it and the pod stands by.
    expect(copyHeld.isHeld()).toBe(true);
    await pod.timers.tick(LOCK_RETRY_MS);
    expect(await settled(pod.held)).toBeNull();
    await copyHeld.release();
    await pod.timers.tick(LOCK_RETRY_MS, () => pod.timers.pending(LOCK_RENEW_MS) > 0);
    expect((await pod.held).isHeld()).toBe(true);
    expect(copyHeld.isHeld()).toBe(false);
  });

  it('no hand-over while the api-server does not answer; once it does, the lock is handed over', async () => {
    const d = await dir();
    let reachable = false;
    const copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1', mayHandOver: () => reachable });
    const copyHeld = await copy.held;
    agent(d, { role: 'daemonset', pod: 'lastseen-agent-x' });
    await until(async () => (await signOf(d)) === 'lastseen-agent-x', "the pod's standby sign");
    for (let i = 0; i < 3; i++) await copy.timers.tick(LOCK_RENEW_MS);
    expect(await settled(copyHeld.handOver)).toBeNull();
    reachable = true;
    await copy.timers.tick(LOCK_RENEW_MS);
    expect((await settled(copyHeld.handOver))?.value).toMatchObject({ pod: 'lastseen-agent-x' });
  });

  it('never to a DaemonSet pod on another spec (the copy follows its spec first, self.ts); a DaemonSet pod never gives way', async () => {
    const d = await dir();
    const copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1' });
    const copyHeld = await copy.held;
    const other = new StandbySign(d, { pod: 'lastseen-agent-y', holder: 'lastseen-agent-y-1', spec: 'spec-2' });
    signs.push(other);
    expect(await other.raise()).toBe(true);
    for (let i = 0; i < 3; i++) await copy.timers.tick(LOCK_RENEW_MS);
    expect(await settled(copyHeld.handOver)).toBeNull();
    // Nor does a copy standing by leave the free lock to it.
    await copyHeld.release();
    const copy2 = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1' });
    const copy2Held = await copy2.held;
    await copy2Held.release();
    // A DaemonSet pod holding the lock keeps it, whoever stands by.
    const ds = agent(d, { role: 'daemonset', pod: 'lastseen-agent-z' });
    const dsHeld = await ds.held;
    await other.lower();
    const same = new StandbySign(d, { pod: 'lastseen-agent-w', holder: 'lastseen-agent-w-1', spec: SPEC });
    signs.push(same);
    expect(await same.raise()).toBe(true);
    for (let i = 0; i < 3; i++) await ds.timers.tick(LOCK_RENEW_MS);
    expect(await settled(dsHeld.handOver)).toBeNull();
    expect(dsHeld.isHeld()).toBe(true);
  });

  it('a DaemonSet pod whose sign is up but that never takes the free lock (stuck) gets it for DEFER_MAX_MS, then the copy takes it and keeps it', async () => {
    const d = await dir();
    const clock = handClock();
    const turns = new LockTurns(clock);
    const stuck = new StandbySign(d, { pod: 'lastseen-agent-stuck', holder: 'lastseen-agent-stuck-1', spec: SPEC });
    signs.push(stuck);
    expect(await stuck.raise()).toBe(true);
    const c = logs();
    const copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1', clock, turns, log: c.log });
    await until(() => copy.timers.pending(LOCK_RETRY_MS) === 1, 'the copy to leave the lock to the pod');
    for (let i = 0; i < 3; i++) {
      clock.t += LOCK_RETRY_MS;
      await copy.timers.tick(LOCK_RETRY_MS);
    }
    expect(await settled(copy.held)).toBeNull();
    clock.t += DEFER_MAX_MS;
    await copy.timers.tick(LOCK_RETRY_MS, () => copy.timers.pending(LOCK_RENEW_MS) > 0);
    const copyHeld = await copy.held;
    expect(copyHeld.isHeld()).toBe(true);
    expect(c.lines.find((l) => /did not keep the node lock/.test(String(l.msg)))).toMatchObject({ pod: 'lastseen-agent-stuck', distrustedFor: '60s' });
    // Still standing by with its sign up: the copy does not hand it the lock, until the distrust ends.
    await copy.timers.tick(LOCK_RENEW_MS);
    expect(await settled(copyHeld.handOver)).toBeNull();
    clock.t += DISTRUST_MS;
    await copy.timers.tick(LOCK_RENEW_MS);
    expect((await settled(copyHeld.handOver))?.value).toMatchObject({ pod: 'lastseen-agent-stuck' });
  });

  it('a crash-looping DaemonSet pod (dies soon after it took the lock) is not handed the lock again for a while that doubles: the copy keeps it', async () => {
    const d = await dir();
    const clock = handClock();
    const turns = new LockTurns(clock);
    const c = logs();
    const POD = 'lastseen-agent-crashy';
    // The copy acts (after a reboot); the DaemonSet's pod starts and stands by.
    let copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1', clock, turns, log: c.log });
    let copyHeld = await copy.held;
    let ds = daemonSetProcess(d, POD);
    await until(async () => (await signOf(d)) === POD, "the pod's standby sign");
    await copy.timers.tick(LOCK_RENEW_MS);
    expect((await settled(copyHeld.handOver))?.value).toMatchObject({ pod: POD });
    // runAgent stops the copy (releasing the lock) and stands by again with the same memory.
    await copyHeld.release();
    copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1', clock, turns, log: c.log });
    await ds.held;
    // The pod dies holding the lock, 10 s after it took it: the copy takes it back at its next retry.
    clock.t += 10_000;
    ds.child.kill('SIGKILL');
    await ds.gone;
    await until(() => copy.timers.pending(LOCK_RETRY_MS) === 1, 'the copy to stand by');
    await copy.timers.tick(LOCK_RETRY_MS, () => copy.timers.pending(LOCK_RENEW_MS) > 0);
    copyHeld = await copy.held;
    expect(c.lines.filter((l) => /did not keep the node lock/.test(String(l.msg))).map((l) => [l.pod, l.distrustedFor])).toEqual([[POD, '60s']]);
    // The kubelet restarts its container (same pod): it stands by again; the copy keeps the lock.
    ds = daemonSetProcess(d, POD);
    await until(async () => (await signOf(d)) === POD, "the restarted pod's standby sign");
    for (let i = 0; i < 3; i++) await copy.timers.tick(LOCK_RENEW_MS);
    expect(await settled(copyHeld.handOver)).toBeNull();
    expect(copyHeld.isHeld()).toBe(true);
    // A minute on it is trusted again; failing again, it waits twice as long.
    clock.t += DISTRUST_MS;
    await copy.timers.tick(LOCK_RENEW_MS);
    expect((await settled(copyHeld.handOver))?.value).toMatchObject({ pod: POD });
    await copyHeld.release();
    copy = agent(d, { role: 'copy', pod: 'lastseen-agent-copy-n1', clock, turns, log: c.log });
    await ds.held;
    ds.child.kill('SIGKILL');
    await ds.gone;
    await until(() => copy.timers.pending(LOCK_RETRY_MS) === 1, 'the copy to stand by');
    await copy.timers.tick(LOCK_RETRY_MS, () => copy.timers.pending(LOCK_RENEW_MS) > 0);
    await copy.held;
    expect(c.lines.filter((l) => /did not keep the node lock/.test(String(l.msg))).map((l) => l.distrustedFor)).toEqual(['60s', '120s']);
  });

  it('a DaemonSet pod that kept the lock for KEEP_MS and then went (a restart) is trusted: the copy covers, then hands the lock back', async () => {
    const clock = handClock();
    const turns = new LockTurns(clock);
    turns.offered('lastseen-agent-a');
    clock.t += KEEP_MS;
    expect(turns.took()).toEqual([]);
    expect(turns.trusts({ pod: 'lastseen-agent-a', holder: 'h', spec: SPEC }, SPEC)).toBe(true);
    turns.offered('lastseen-agent-a');
    clock.t += KEEP_MS - 1;
    expect(turns.took()).toEqual([{ pod: 'lastseen-agent-a', distrustedForMs: DISTRUST_MS }]);
    expect(turns.trusts({ pod: 'lastseen-agent-a', holder: 'h', spec: SPEC }, SPEC)).toBe(false);
  });

  it("what an agent runs: its release, build and arguments, but not its health port (the copy's is the next one)", () => {
    const ds = agentSpec(['agent', '--health-port=9870', '--policy-file=/etc/lastseen/policy.yaml'], '0.1.0 abc');
    expect(agentSpec(['agent', '--health-port=9871', '--policy-file=/etc/lastseen/policy.yaml'], '0.1.0 abc')).toBe(ds);
    expect(agentSpec(['agent', '--health-port', '0', '--policy-file=/etc/lastseen/policy.yaml'], '0.1.0 abc')).toBe(ds);
    expect(agentSpec(['agent', '--health-port=9870', '--policy-file=/etc/lastseen/other.yaml'], '0.1.0 abc')).not.toBe(ds);
    expect(agentSpec(['agent', '--health-port=9870', '--policy-file=/etc/lastseen/policy.yaml'], '0.1.1 def')).not.toBe(ds);
  });
});
