// What "Ready" proves: the pod's OWN main process is up, holds the probed port and answers.
//
// A probe of 127.0.0.1:PORT alone proves only that *somebody* answers. On the host network that can
// be the parent's checkpoint: one still holding the port while the parent's process failed with
// EADDRINUSE, or one sharing it (SO_REUSEPORT, the overlap hand-over) while the parent's process is
// bound but not ready (seen on a real kubelet). So a Ready beat needs both:
//
//  (a) ownership: a listening socket on the port whose inode is an open file of a process this
//      sidecar can see. With `shareProcessNamespace: true` those are exactly its own pod's
//      processes; the checkpoint is another pod, so its sockets are never among them;
//  (b) answers: the probe succeeds on `probesNeeded()` fresh connections in a row. With k
//      listeners in a SO_REUSEPORT group the kernel spreads new connections over them by a hash
//      of the connection's addresses and ports, each about 1/k. If our process is bound but not
//      ready, a round of N successes all reached the other listeners with probability
//      ((k - ours) / k)^N; N is chosen to keep that at or below FALSE_READY_PER_ROUND.
//      Alone on its port (the usual case), one success is enough. A TCP probe needs one accepted
//      connection: the kernel accepts for a listening socket whatever its process is doing, so
//      for `tcp://` the proof is (a).
//  (c) on a shared port, each http(s) answer is attributed when it can be: the connection's
//      accepted end is an open file of exactly one process (ownership.ts, acceptedBy). One answer
//      from our own process decides the round either way; one from another listener is passed
//      over, so a co-listener that is not Ready (a kube-apiserver copy that lost its service
//      repair answers 500 for a minute, docs/real-node.md) cannot hold a Ready parent back. Only
//      answers that cannot be attributed still count towards the N in a row of (b).
//
// (a) is checked again after the answers: a socket of ours that closed during the round (the
// process exited) means the answers came from the other listeners.
//
// Anything short of that is Starting, with a reason that names the proof that failed.
import type { ProbeResult } from './beat.js';
import { runQueueWaitNs, starvedOver } from './cpu-wait.js';
import { type Ownership, type OwnershipOptions, portOwnership } from './ownership.js';

/**
 * Chance, per round, that a bound-but-not-ready parent sharing its port is reported Ready. With the
 * default 5 s interval that is one false Ready in about 58 days of a parent stuck beside its
 * checkpoint; with two listeners it costs 20 requests per round, only while the port is shared.
 */
export const FALSE_READY_PER_ROUND = 1e-6;
/** More probes than this in one round (five or more other listeners) is not a proof worth its cost. */
export const MAX_PROBES_PER_ROUND = 64;

/** Consecutive successes needed with `ours` of `listeners` sockets ours; null: cannot be proved in one round. */
export function probesNeeded(ours: number, listeners: number): number | null {
  if (ours <= 0) return null;
  const others = listeners - ours;
  if (others <= 0) return 1;
  const n = Math.ceil(Math.log(FALSE_READY_PER_ROUND) / Math.log(others / listeners));
  return n <= MAX_PROBES_PER_ROUND ? n : null;
}

/** Why ownership (a) fails, or null when the pod's own process holds the port. */
export function ownershipProblem(o: Ownership): string | null {
  if (o.listeners.length === 0) return `nothing listens on port ${o.port}`;
  if (o.ours.length > 0) return null;
  const held = `port ${o.port} is held by ${o.listeners.length} listening socket(s) (inode ${o.listeners.map((l) => l.inode).join(', ')})`;
  if (o.unreadable.length > 0) {
    const pids = o.unreadable.map((u) => `${u.pid} (${u.code})`).join(', ');
    return `${held}, but the open files of process(es) ${pids} cannot be read: give the heartbeat container the capabilities SYS_PTRACE and DAC_READ_SEARCH`;
  }
  if (o.visibleProcesses === 0) return `${held}, and this sidecar sees no other process of its pod: set shareProcessNamespace: true on the pod`;
  return `${held} of no process of this pod (another pod on this network, such as its checkpoint, holds it)`;
}

/** A probe's result, and whose process answered it when that was asked and could be told. */
export type AttributedResult = ProbeResult & { owner?: 'ours' | 'theirs' };

export interface ProofDeps {
  /**
   * One probe on a fresh connection, within `timeoutMs`. Given `attributeTo` (the pids of this
   * pod's processes holding the port), it also says whose process accepted the connection.
   */
  once: (timeoutMs: number, attributeTo?: readonly number[]) => Promise<AttributedResult>;
  port: number;
  /** http(s) needs N answers; tcp one accepted connection (see the header). */
  kind: 'http' | 'tcp';
  timeoutMs: number;
  now?: () => number;
  ownership?: (port: number) => Ownership;
  ownershipOptions?: OwnershipOptions;
  /** The port holders' summed wait for a CPU, ns (runQueueWaitNs; tests: a stand-in). */
  cpuWait?: (pids: number[]) => number | null;
}

/** One round of the Ready proof: (a), then (b) within the round's timeout. */
export async function proveReady(d: ProofDeps): Promise<ProbeResult> {
  const now = d.now ?? (() => performance.now());
  const deadline = now() + d.timeoutMs;
  const scan = d.ownership ?? ((p: number) => portOwnership(p, d.ownershipOptions));
  let o: Ownership;
  try {
    o = scan(d.port);
  } catch (e) {
    return { ok: false, error: `cannot tell who holds port ${d.port}: ${(e as Error).message}` };
  }
  const problem = ownershipProblem(o);
  if (problem) return { ok: false, error: problem };
  const needed = d.kind === 'tcp' ? 1 : probesNeeded(o.ours.length, o.listeners.length);
  if (needed === null)
    return {
      ok: false,
      error: `port ${d.port} has ${o.listeners.length} listeners, ${o.ours.length} of them this pod's: too many others to prove in one round`,
    };
  // How long the port's holders wait for a CPU through the answers: an unanswered probe of a
  // process kept off the CPU is a starved one, not a hung one (cpu-wait.ts).
  const cpuWait = d.cpuWait ?? ((pids: number[]) => runQueueWaitNs(pids, d.ownershipOptions?.procRoot));
  const holders = [...new Set(o.ours.map((x) => x.pid))];
  const waitBefore = cpuWait(holders);
  const startedAt = now();
  const unanswered = (r: Extract<ProbeResult, { ok: false }>): ProbeResult => {
    const elapsed = now() - startedAt;
    const s = starvedOver(waitBefore, cpuWait(holders), elapsed);
    if (!s.starved) return r;
    return {
      ...r,
      error: `${r.error}; its process waited ${Math.round(s.waitedMs ?? 0)}ms of ${Math.round(elapsed)}ms for a CPU: starved, not hung`,
      starved: true,
    };
  };
  // A shared port: each answer is attributed when it can be (the accepted socket's owner). One
  // from our own listener decides the round; one from another listener says nothing of ours and
  // is passed over (a copy not yet Ready, or stalled, beside a Ready parent must not hold the
  // parent back); an answer that cannot be attributed counts towards the `needed` in a row.
  const attributeTo = needed > 1 ? holders : undefined;
  let inRow = 0;
  let others = 0;
  for (let i = 1; inRow < needed; i++) {
    const left = Math.floor(deadline - now());
    if (left <= 0 || i > MAX_PROBES_PER_ROUND + needed)
      return {
        ok: false,
        // Not `unanswered`: the round's time went on the scan or on slow answers, which is no hang.
        error:
          others > 0
            ? `${inRow} of ${needed} probes answered within ${d.timeoutMs}ms, ${others} more by the port's other listeners (port ${d.port} is shared by ${o.listeners.length} listeners)`
            : `${inRow} of ${needed} probes answered within ${d.timeoutMs}ms (port ${d.port} is shared by ${o.listeners.length} listeners)`,
      };
    const { owner, ...r } = await d.once(left, attributeTo);
    if (owner === 'theirs') {
      others++;
      continue;
    }
    if (!r.ok) {
      const failed: Extract<ProbeResult, { ok: false }> =
        needed === 1
          ? r
          : {
              ok: false,
              error: `${r.error} (probe ${i}${owner === 'ours' ? ', answered by this pod' : ` of ${needed}`}: port ${d.port} is shared by ${o.listeners.length} listeners, ${o.ours.length} of them this pod's)`,
              ...(r.unanswered ? { unanswered: true } : {}),
            };
      return failed.unanswered ? unanswered(failed) : failed;
    }
    if (owner === 'ours') break;
    inRow++;
  }
  // (a) again: the answers prove something only if our sockets listened through all of them. A
  // process that exits during the round (a bad api-server giving up on its storage, seen on a
  // real kubelet) leaves the rest of the probes to the checkpoint, which answers them all.
  if (needed > 1 || d.kind === 'tcp') {
    let after: Ownership;
    try {
      after = scan(d.port);
    } catch (e) {
      return { ok: false, error: `cannot tell who holds port ${d.port} after the probes: ${(e as Error).message}` };
    }
    const still = new Set(after.ours.map((x) => x.inode));
    const gone = o.ours.filter((x) => !still.has(x.inode));
    if (gone.length > 0)
      return {
        ok: false,
        error: `this pod's listening socket(s) on port ${d.port} (inode ${gone.map((x) => x.inode).join(', ')}) closed during the proof: the answers came from others`,
      };
  }
  return { ok: true };
}
