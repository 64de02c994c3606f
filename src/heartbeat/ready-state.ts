// The sidecar's last Ready proof as a file, so the kubelet can make the pod's Ready condition follow
// it: an exec readiness probe on the sidecar runs `ready --ready-file FILE` (src/cli/ready.ts),
// which exits 0 only when the last proof said Ready and is fresh.
//
// Why a file and an exec probe (docs/decisions/0009-ready-from-the-sidecar.md): a parent on the
// host network shares its port with its checkpoint, so any probe the kubelet sends to a port
// (httpGet, tcpSocket, grpc, even one served by the sidecar) can be answered by another pod's
// process, which is how a bad rollout's pod turned Ready on its copy's answers. An exec probe runs
// inside this very container; the file lives in a volume of this pod alone (an emptyDir), not in
// the node's heartbeat folder, where pods of one parent key share a beat file.
//
// Contract of the file: one JSON object, written whole (temporary file, rename) after every probe
// round and on stop; `phase` is the phase that round's beat carries, `at` the writer's wall clock
// (the reader runs in the same container, on the same clock), `intervalMs` the interval it beat at.
// It says nothing of the channels: a Lease write that fails does not make the process less Ready.
import { readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Phase } from '../core/types.js';

export const READY_STATE_VERSION = 1;
/** A state file larger than this is not ours. */
export const MAX_READY_STATE_BYTES = 4096;
/**
 * A proof counts for this many of its writer's intervals. One round late is a slow probe (the
 * every-listener proof may take most of a round); three means the sidecar stopped proving.
 */
export const READY_FRESH_INTERVALS = 3;

export interface ReadyState {
  v: typeof READY_STATE_VERSION;
  phase: Phase;
  /** Wall-clock ms of the round. */
  at: number;
  intervalMs: number;
  /** Ready only because nothing is probed (`--probe none`): the sidecar claims nothing of the process. */
  unprobed?: true;
  /** Why the proof failed (the probe's error), for the kubelet's Event. */
  why?: string;
}

export type ReadyVerdict = { ready: boolean; message: string };

/** Why the sidecar cannot call its pod Ready yet when it starts (no round has run). */
export const NO_PROOF_YET = 'the sidecar started and has not finished its first proof';

/** The verdict on a state file's text (null: no such file) at wall time `nowMs`. Pure. */
export function judgeReadyState(text: string | null, nowMs: number, file: string): ReadyVerdict {
  const bad = (what: string): ReadyVerdict => ({
    ready: false,
    message: `not ready: ${file} ${what}; the heartbeat sidecar writes it after each probe round (is --ready-file the same in its args and in this probe?)`,
  });
  if (text === null) return bad('does not exist');
  if (text.length > MAX_READY_STATE_BYTES) return bad(`is ${text.length} bytes, more than the ${MAX_READY_STATE_BYTES} a proof takes`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return bad(`is not JSON (${(e as Error).message})`);
  }
  const problem = stateProblem(raw);
  if (problem) return bad(`is not a proof: ${problem}`);
  const s = raw as ReadyState;
  const ageMs = nowMs - s.at;
  const maxAgeMs = READY_FRESH_INTERVALS * s.intervalMs;
  const when = `${(ageMs / 1000).toFixed(1)}s ago`;
  if (ageMs > maxAgeMs)
    return {
      ready: false,
      message: `not ready: the last proof (${s.phase}) is from ${when}, older than ${READY_FRESH_INTERVALS} intervals of ${s.intervalMs}ms: the heartbeat sidecar is not proving`,
    };
  if (ageMs < -maxAgeMs)
    return {
      ready: false,
      message: `not ready: the last proof is dated ${(-ageMs / 1000).toFixed(1)}s in the future (the clock stepped back); waiting for the next`,
    };
  if (s.phase === 'Ready')
    return {
      ready: true,
      message: s.unprobed ? `ready (unprobed: the sidecar probes nothing; ${when})` : `ready: this pod's own process holds its port and answers (${when})`,
    };
  if (s.phase === 'Stopping') return { ready: false, message: `not ready: the heartbeat sidecar is stopping (${when})` };
  return { ready: false, message: `not ready (Starting, ${when}): ${s.why ?? 'no reason recorded'}` };
}

function stateProblem(raw: unknown): string | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return 'not an object';
  const o = raw as Record<string, unknown>;
  if (o.v !== READY_STATE_VERSION) return `version ${JSON.stringify(o.v)}, expected ${READY_STATE_VERSION}`;
  if (o.phase !== 'Ready' && o.phase !== 'Starting' && o.phase !== 'Stopping') return `phase ${JSON.stringify(o.phase)}`;
  if (typeof o.at !== 'number' || !Number.isFinite(o.at)) return `at ${JSON.stringify(o.at)}`;
  if (typeof o.intervalMs !== 'number' || !(o.intervalMs > 0)) return `intervalMs ${JSON.stringify(o.intervalMs)}`;
  if (o.why !== undefined && typeof o.why !== 'string') return 'why is not a string';
  return null;
}

/** The verdict on the file as it is now. */
export function readReadyVerdict(file: string, nowMs = Date.now()): ReadyVerdict {
  let text: string | null;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') return { ready: false, message: `not ready: cannot read ${file}: ${(e as Error).message}` };
    text = null;
  }
  return judgeReadyState(text, nowMs, file);
}

/**
 * Replace the file with `state`: a dot-prefixed temporary in the same folder, renamed over it, so
 * the probe reads the old proof or the new one, never half of one. No fsync: the file lives in a
 * tmpfs or an emptyDir and means nothing after a reboot. Throws on failure (the caller logs it).
 */
export function writeReadyState(file: string, state: ReadyState): void {
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(state)}\n`, { mode: 0o644 });
  try {
    renameSync(tmp, file);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      // best effort: the rename's error is the one to report
    }
    throw e;
  }
}
