// How long a process waited for a CPU: what tells a starved process from a hung one.
//
// An unanswered probe means either that the process hangs (stopped, deadlocked, stuck on a disk:
// its threads are not runnable) or that it is runnable but the node has no CPU for it (measured
// on the three-node test bed: at load 45-70 on two cores, healthy api-servers let two probes in a
// row time out, and were fenced as hung). The kernel counts, per thread, the time it spent
// runnable but waiting on a run queue (`/proc/<pid>/task/<tid>/schedstat`, second field, ns;
// present whenever the kernel has CONFIG_SCHED_INFO, which every distribution kernel sets). A
// stopped or blocked thread adds nothing; a starved one adds about the time it was kept waiting.
//
// Pure over a `procRoot` folder, so tests run on fixture folders.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * An unanswered probe is called starved when the port holders' threads together waited for a CPU
 * for at least this share of the probe's time. A stopped process waits 0; a deadlocked one only
 * for the wake-ups of whatever threads it has left (timers), a healthy one kept off the CPU for
 * about all of it, per runnable thread.
 */
export const STARVED_WAIT_FRACTION = 0.25;

/**
 * The nanoseconds that the threads of processes `pids` spent waiting for a CPU since they started,
 * summed; null when none of them could be read (gone, or no schedstat in this kernel). Threads that
 * exit between two readings take their share with them: a difference of two sums may undercount,
 * never overcount by more than a new thread's own wait.
 */
export function runQueueWaitNs(pids: readonly number[], procRoot = '/proc'): number | null {
  let total = 0;
  let read = false;
  for (const pid of pids) {
    let tids: string[];
    try {
      tids = readdirSync(join(procRoot, String(pid), 'task'));
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const f = readFileSync(join(procRoot, String(pid), 'task', tid, 'schedstat'), 'utf8')
          .trim()
          .split(/\s+/);
        const wait = Number(f[1]);
        if (f.length >= 3 && Number.isFinite(wait) && wait >= 0) {
          total += wait;
          read = true;
        }
      } catch {
        // the thread exited meanwhile
      }
    }
  }
  return read ? total : null;
}

/**
 * Whether the processes were starved over a probe of `elapsedMs`: their wait grew from `before` to
 * `after` (runQueueWaitNs) by at least STARVED_WAIT_FRACTION of it. Unknown (null) readings: not starved.
 */
export function starvedOver(before: number | null, after: number | null, elapsedMs: number): { starved: boolean; waitedMs: number | null } {
  if (before === null || after === null || elapsedMs <= 0) return { starved: false, waitedMs: null };
  const waitedMs = Math.max(0, (after - before) / 1e6);
  return { starved: waitedMs >= STARVED_WAIT_FRACTION * elapsedMs, waitedMs };
}
