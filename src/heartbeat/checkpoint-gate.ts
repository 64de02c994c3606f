// The start gate: a parent pod's main container waits while this node's checkpoint of the same
// parent is starting. The heartbeat sidecar's postStart hook runs `wait-checkpoint`; the kubelet
// starts a pod's containers after its native sidecar has started, and a sidecar has started once
// its postStart hook returns, so the parent's own process starts when the hook ends.
//
// Why: after a power loss every copy and, as soon as a copy serves, every parent start together.
// Two api-servers (the copy and the parent) and their etcd client traffic on one node while the
// node's only api-server is still starting (docs/decisions/0014-parents-wait-for-their-checkpoint.md).
// The gate only ever waits for a copy that is on its way to serving; it never blocks a start:
// no copy, a copy that is Ready or stopping, a stale or unreadable beat, or the time limit, and
// the hook ends with exit 0 (a failed postStart hook would kill the sidecar).
//
// Pure judge (`judgeGate`) plus a loop with its clock and file reads injected, for the tests.
import { beatFromFile, type ExpectedLocal } from '../channels/local.js';

/** How often the hook looks at the copy's beat file while it waits. */
export const GATE_POLL_MS = 250;
/** A copy's beat counts as current for this many of its intervals (the Ready proof's own rule). */
export const GATE_FRESH_INTERVALS = 3;
/** The beat interval assumed for a beat that does not say its own. */
export const GATE_DEFAULT_INTERVAL_MS = 5_000;

/** What the hook read: the copy's beat file's text and its modification time (null: no file). */
export interface GateReading {
  text: string;
  mtimeMs: number;
}

export type GateVerdict = { open: true; why: string } | { open: false; why: string };

/** Whether the parent may start now, from the copy's beat file as read at wall time `nowMs`. */
export function judgeGate(reading: GateReading | null, expected: ExpectedLocal, nowMs: number): GateVerdict {
  if (reading === null) return { open: true, why: 'no checkpoint of this parent runs on this node' };
  const beat = beatFromFile(reading.text, { ...expected, role: 'checkpoint' });
  if (!beat.ok) return { open: true, why: `the checkpoint's beat file is not a beat (${beat.reason}); not waiting on it` };
  const b = beat.beat;
  const intervalMs = b.intervalMs ?? GATE_DEFAULT_INTERVAL_MS;
  const ageMs = nowMs - reading.mtimeMs;
  if (ageMs > GATE_FRESH_INTERVALS * intervalMs) {
    return { open: true, why: `the checkpoint's last beat is ${(ageMs / 1000).toFixed(1)}s old (${b.phase}): it is not running` };
  }
  if (b.phase === 'Ready') return { open: true, why: `the checkpoint ${b.holder} is Ready` };
  if (b.phase !== 'Starting') return { open: true, why: `the checkpoint ${b.holder} is ${b.phase}` };
  return { open: false, why: `the checkpoint ${b.holder} is starting` };
}

export interface GateDeps {
  read: () => GateReading | null;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  say: (line: string) => void;
}

/**
 * Wait until the gate opens or `maxMs` has passed since the call. Resolves with what opened it;
 * never rejects on what it reads.
 */
export async function waitAtGate(expected: ExpectedLocal, maxMs: number, deps: GateDeps): Promise<string> {
  const start = deps.now();
  let said = '';
  for (;;) {
    const now = deps.now();
    const v = judgeGate(deps.read(), expected, now);
    const waited = `${((now - start) / 1000).toFixed(1)}s`;
    if (v.open) return said ? `${v.why}; starting after ${waited}` : `${v.why}; starting at once`;
    if (v.why !== said) {
      deps.say(`${v.why}: the parent's containers wait (at most ${Math.round(maxMs / 1000)}s)`);
      said = v.why;
    }
    if (now - start >= maxMs) return `${v.why} still after ${waited}: starting anyway (--max ${Math.round(maxMs / 1000)}s)`;
    await deps.sleep(Math.min(GATE_POLL_MS, Math.max(1, start + maxMs - now)));
  }
}
