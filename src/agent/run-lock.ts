// One acting agent per node (a piece of `runAgent`): stand by until the node lock is ours, then
// keep checking it; report a loss (another agent took it) so the process can stop. The standby
// wait ends early, with an AbortError, when `signal` aborts (SIGTERM while standing by).
import { join } from 'node:path';
import type { Logger } from 'pino';
import { every, sleep, type Timers } from '../core/time.js';
import { LOCK_RENEW_MS, LOCK_RETRY_MS, NodeLock } from './lock.js';

export interface HeldLock {
  /** Resolves when another agent holds the lock (this one must stop). */
  lost: Promise<void>;
  isHeld(): boolean;
  /** Stop checking and give the lock up. */
  release(): Promise<void>;
}

export async function holdNodeLock(o: { stateDir: string; holder: string; timers: Timers; log: Logger; signal?: AbortSignal }): Promise<HeldLock> {
  const path = join(o.stateDir, 'agent.lock');
  const lock = new NodeLock({ path, holder: o.holder });
  for (let standby = false; !(await lock.tryAcquire()); standby = true) {
    if (!standby) o.log.info({ lock: path, holder: (await lock.readHolder())?.holder }, 'another agent holds the node lock; standing by');
    await sleep(o.timers, LOCK_RETRY_MS, o.signal);
  }
  let held = true;
  let stopped = false; // a check still in flight at release must not report a loss
  let loseLock: () => void = () => {};
  const lost = new Promise<void>((r) => {
    loseLock = r;
  });
  const renew = every(o.timers, LOCK_RENEW_MS, async () => {
    try {
      if (!(await lock.tryAcquire()) && !stopped) {
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
    isHeld: () => held,
    async release() {
      stopped = true;
      await renew.stop();
      await lock.release();
    },
  };
}
