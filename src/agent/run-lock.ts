// One acting agent per node (a piece of `runAgent`): stand by until the node lock is ours, then
// keep checking it; report a loss (another agent took it) so the process can stop. The standby
// wait ends early, with an AbortError, when `signal` aborts (SIGTERM while standing by).
//
// A state folder that takes no writes (read-only, full) does not stop the agent: the socket is the
// lock (lock.ts), the checkpoints already stored still cover. The problem is said once per errno
// (and when it clears) and handed to `onStateProblem` (metric, Event, /readyz "degraded").
//
// The DaemonSet's pod acts whenever it can, the copy only while it cannot (lock.ts, the standby
// sign): a rollout waits for the DaemonSet pod's Ready, which only the acting agent reports. So
//  - a DaemonSet pod's agent raises its standby sign while it stands by;
//  - a copy standing by leaves a free lock to a DaemonSet pod standing by that runs what the copy
//    runs (it binds within one retry), for at most DEFER_MAX_MS: one that does not take it then is
//    stuck, and the copy takes it. With no sign raised (a reboot: no DaemonSet pod yet), the copy
//    takes the lock at its first try, as before: the sign is read locally, never waited for;
//  - a copy holding the lock hands it over (`handOver`: its caller stops acting, releases, and
//    stands by again) once such a DaemonSet pod stands by, on a calm node (`mayHandOver`, run.ts:
//    the api-server answers and no parent is silent, covered or being handed back): its successor
//    starts afresh, with a startup grace, so never in an outage;
//  - a DaemonSet pod the copy gave way to that did not keep the lock for KEEP_MS (it died holding
//    it, or before it took it: a crash loop) is not given way to again for a while that doubles
//    (DISTRUST_MS up to DISTRUST_MAX_MS): the copy keeps the lock meanwhile.
// Two agents never act at once: the lock is one socket, and a copy releases it only after it has
// stopped acting (run.ts).

import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type Clock, every, sleep, type Timers } from '../core/time.js';
import { bakedCommit, VERSION } from '../version.js';
import { type AgentRole, LOCK_RENEW_MS, LOCK_RETRY_MS, NodeLock, readStandbySign, type StandbyInfo, StandbySign } from './lock.js';

/** How long a copy standing by leaves the lock to a DaemonSet pod standing by before it takes it itself. */
export const DEFER_MAX_MS = 3_000;
/** A DaemonSet pod the copy gave way to must keep the lock this long, or it is distrusted. */
export const KEEP_MS = 60_000;
/** How long a DaemonSet pod that did not keep the lock is not given way to, first; doubles per failure. */
export const DISTRUST_MS = 60_000;
export const DISTRUST_MAX_MS = 60 * 60_000;

/**
 * What this agent runs, as far as its process can tell: the release, the commit a bundle was built
 * from, and its arguments but the health port (the copy's is the next one, self.ts). The copy and
 * its DaemonSet pod on the same spec say the same; an upgrade says something else.
 */
export function agentSpec(argv: readonly string[] = process.argv.slice(2), build = `${VERSION} ${bakedCommit() ?? ''}`): string {
  const args = argv.filter((a, i) => !a.startsWith('--health-port') && argv[i - 1] !== '--health-port');
  return createHash('sha256').update(JSON.stringify({ build, args })).digest('hex').slice(0, 16);
}

/**
 * What a copy remembers across its turns at the lock (one per process: `runAgent` stands by again
 * after a hand-over): the DaemonSet pods it gave way to, and those that did not keep the lock.
 */
export class LockTurns {
  private readonly offers = new Map<string, number>();
  private readonly distrust = new Map<string, { failures: number; until: number }>();

  constructor(private readonly clock: Clock) {}

  /** Whether the copy gives way to `w`: it runs what the copy runs, and has not failed to keep the lock lately. */
  trusts(w: StandbyInfo, spec: string): boolean {
    return w.spec === spec && (this.distrust.get(w.pod)?.until ?? 0) <= this.clock.now();
  }

  /** The copy gives way to `pod` now (defers to it, or hands it the lock). */
  offered(pod: string): void {
    this.offers.set(pod, this.clock.now());
  }

  /** The copy took the lock: every pod it gave way to less than KEEP_MS ago did not keep it. Returns those, now distrusted. */
  took(): { pod: string; distrustedForMs: number }[] {
    const now = this.clock.now();
    const failed: { pod: string; distrustedForMs: number }[] = [];
    for (const [pod, at] of this.offers) {
      this.offers.delete(pod);
      if (now - at >= KEEP_MS) continue;
      failed.push({ pod, distrustedForMs: this.fail(pod) });
    }
    return failed;
  }

  /** `pod` failed to take or keep the lock: distrusted for a while that doubles per failure. */
  fail(pod: string): number {
    const failures = (this.distrust.get(pod)?.failures ?? 0) + 1;
    const ms = Math.min(DISTRUST_MS * 2 ** (failures - 1), DISTRUST_MAX_MS);
    this.distrust.set(pod, { failures, until: this.clock.now() + ms });
    return ms;
  }
}

export interface HeldLock {
  /** Resolves when another agent holds the lock (this one must stop). */
  lost: Promise<void>;
  /**
   * A copy's only: resolves when a DaemonSet pod of its spec stands by for the lock. The caller then
   * stops acting, releases the lock and stands by again (the pod takes it within one retry).
   */
  handOver: Promise<StandbyInfo>;
  isHeld(): boolean;
  /** Stop checking and give the lock up. */
  release(): Promise<void>;
  /** Why the state folder takes no writes (the errno and a message), null while it does. */
  stateProblem(): StateProblem | null;
}

export interface StateProblem {
  code: string;
  message: string;
}

/** Besides the lock's own writes, the folder is looked at every this many lock checks (about 30 s). */
const FOLDER_CHECK_EVERY = 15;

/** Whether `dir` takes writes: its errno (EROFS: a read-only mount, EACCES) or ENOSPC (no free block), else null. Never throws. */
export async function folderProblem(dir: string): Promise<StateProblem | null> {
  try {
    await access(dir, constants.W_OK);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') return null; // created by the first write
    return { code: err.code ?? 'UNKNOWN', message: `${dir}: ${err.message}` };
  }
  try {
    const st = await statfs(dir);
    if (st.bavail === 0) return { code: 'ENOSPC', message: `${dir}: no space left on device (no free block)` };
  } catch {
    // statfs is a courtesy; access() above is the check
  }
  return null;
}

export async function holdNodeLock(o: {
  stateDir: string;
  holder: string;
  timers: Timers;
  log: Logger;
  signal?: AbortSignal;
  /** Told when the state folder stops taking writes, or takes them again (null). */
  onStateProblem?: (p: StateProblem | null) => void;
  /** Which agent this is (default: a DaemonSet pod's, which never gives way). */
  role?: AgentRole;
  /** This agent's pod name (for the sign and the holder file). */
  pod?: string;
  /** What this agent runs (default `agentSpec()`): a copy gives way only to a DaemonSet pod that says the same. */
  spec?: string;
  /** A copy's memory across its turns at the lock (default: a new one). */
  turns?: LockTurns;
  /** Monotonic milliseconds, for the copy's deferral and distrust (default the process's). */
  clock?: Clock;
  /** Whether a copy holding the lock may hand it over now (default: always); run.ts: on a calm node. */
  mayHandOver?: () => boolean;
}): Promise<HeldLock> {
  const path = join(o.stateDir, 'agent.lock');
  const role = o.role ?? 'daemonset';
  const pod = o.pod ?? o.holder;
  const spec = o.spec ?? agentSpec();
  const clock = o.clock ?? { now: () => Math.floor(performance.now()) };
  const turns = o.turns ?? new LockTurns(clock);
  const lock = new NodeLock({ path, holder: o.holder, pod, role });
  const sign = role === 'daemonset' ? new StandbySign(o.stateDir, { pod, holder: o.holder, spec }) : null;
  let signRaised = false;
  /** The DaemonSet pod a standing-by copy leaves the lock to, since when. */
  let deferring: { to: StandbyInfo; since: number } | null = null;
  try {
    for (let saidStandby = false; ; ) {
      if (role === 'copy') {
        const w = await readStandbySign(o.stateDir);
        if (w && turns.trusts(w, spec)) {
          if (deferring?.to.holder !== w.holder) {
            deferring = { to: w, since: clock.now() };
            turns.offered(w.pod);
            o.log.info({ lock: path, to: w.pod }, "the agent's DaemonSet pod stands by on this spec: leaving the node lock to it");
          }
          if (clock.now() - deferring.since < DEFER_MAX_MS) {
            await sleep(o.timers, LOCK_RETRY_MS, o.signal);
            continue;
          }
        } else deferring = null;
      }
      if (await lock.tryAcquire()) break;
      if (!saidStandby) {
        saidStandby = true;
        o.log.info({ lock: path, holder: (await lock.readHolder())?.holder }, 'another agent holds the node lock; standing by');
      }
      if (sign && !signRaised) {
        signRaised = await sign.raise().catch((e: Error) => {
          o.log.warn({ err: e.message }, 'could not raise the standby sign; the copy acting here will not hand this agent the node lock');
          return true; // said once
        });
      }
      await sleep(o.timers, LOCK_RETRY_MS, o.signal);
    }
  } finally {
    await sign?.lower();
  }
  if (role === 'copy') {
    // Gave way to a DaemonSet pod that did not keep the lock (or never took it): distrust it a while.
    const failed = turns.took();
    if (deferring && clock.now() - deferring.since >= DEFER_MAX_MS && !failed.some((f) => f.pod === deferring?.to.pod))
      failed.push({ pod: deferring.to.pod, distrustedForMs: turns.fail(deferring.to.pod) });
    for (const f of failed)
      o.log.warn(
        { lock: path, pod: f.pod, distrustedFor: `${Math.round(f.distrustedForMs / 1000)}s`, before: lock.predecessor()?.holder },
        "the agent's DaemonSet pod did not keep the node lock (crashed, or never took it): this copy acts and keeps it",
      );
  }
  let probed = await folderProblem(o.stateDir);
  let checks = 0;
  let said: string | null = null;
  const current = (): StateProblem | null => lock.fileProblem() ?? probed;
  const sayProblem = () => {
    const p = current();
    const key = p ? p.code : null;
    if (key === said) return;
    said = key;
    if (p)
      o.log.error(
        { stateDir: o.stateDir, code: p.code, err: p.message },
        'the state folder takes no writes: covering with the checkpoints already stored; no new copy, hand-over record or lock holder file until it does',
      );
    else o.log.info({ stateDir: o.stateDir }, 'the state folder takes writes again');
    o.onStateProblem?.(p);
  };
  sayProblem();
  let held = true;
  let stopped = false; // a check still in flight at release must not report a loss
  let loseLock: () => void = () => {};
  const lost = new Promise<void>((r) => {
    loseLock = r;
  });
  let handingOver = false;
  let handTo: (w: StandbyInfo) => void = () => {};
  const handOver = new Promise<StandbyInfo>((r) => {
    handTo = r;
  });
  const renew = every(o.timers, LOCK_RENEW_MS, async () => {
    try {
      const ok = await lock.tryAcquire();
      if (ok && role === 'copy' && !handingOver && !stopped && (o.mayHandOver?.() ?? true)) {
        const w = await readStandbySign(o.stateDir);
        if (w && turns.trusts(w, spec) && !stopped) {
          handingOver = true;
          turns.offered(w.pod);
          o.log.info({ lock: path, to: w.pod }, "the agent's DaemonSet pod stands by on this spec: handing it the node lock");
          handTo(w);
        }
      }
      if (++checks % FOLDER_CHECK_EVERY === 0 || current() !== null) probed = await folderProblem(o.stateDir);
      sayProblem();
      if (!ok && !stopped) {
        o.log.error({ holder: (await lock.readHolder())?.holder }, 'lost the node lock to another agent; stopping');
        held = false;
        loseLock();
        void renew.stop(); // not awaited: it waits for this very run
      }
    } catch (e) {
      o.log.warn({ err: (e as Error).message }, 'could not renew the node lock');
    }
  });
  return {
    lost,
    handOver,
    isHeld: () => held,
    stateProblem: current,
    async release() {
      stopped = true;
      await renew.stop();
      await lock.release();
      held = false;
    },
  };
}
