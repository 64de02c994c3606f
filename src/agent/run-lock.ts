// One acting agent per node (a piece of `runAgent`): stand by until the node lock is ours, then
// keep checking it; report a loss (another agent took it) so the process can stop. The standby
// wait ends early, with an AbortError, when `signal` aborts (SIGTERM while standing by).
//
// A state folder that takes no writes (read-only, full) does not stop the agent: the socket is the
// lock (lock.ts), the checkpoints already stored still cover. The problem is said once per errno
// (and when it clears) and handed to `onStateProblem` (metric, Event, /readyz "degraded").
import { constants } from 'node:fs';
import { access, statfs } from 'node:fs/promises';
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
}): Promise<HeldLock> {
  const path = join(o.stateDir, 'agent.lock');
  const lock = new NodeLock({ path, holder: o.holder });
  for (let standby = false; !(await lock.tryAcquire()); standby = true) {
    if (!standby) o.log.info({ lock: path, holder: (await lock.readHolder())?.holder }, 'another agent holds the node lock; standing by');
    await sleep(o.timers, LOCK_RETRY_MS, o.signal);
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
  const renew = every(o.timers, LOCK_RENEW_MS, async () => {
    try {
      const ok = await lock.tryAcquire();
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
    isHeld: () => held,
    stateProblem: current,
    async release() {
      stopped = true;
      await renew.stop();
      await lock.release();
    },
  };
}
