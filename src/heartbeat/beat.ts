// The heartbeat's own logic, shared by the real sidecar and the simulator: choose the phase from
// the probe, number the beat, stamp it. Pure: the caller supplies the probe result and the time.
import { type Beat, beatFlags, type Channel, type Phase, type Role } from '../core/types.js';

export interface HeartbeatIdentity {
  namespace: string;
  podName: string;
  podUid: string;
  /** The parent key (see parentKey in ../core/names.ts). */
  key: string;
  node: string;
  role: Role;
}

export interface BeatCounter {
  sequence: number;
}

/**
 * A probe's verdict. `unprobed`: Ready only because nothing was probed (`--probe none`); the beat
 * says so, and the agent wants the pod's own Ready condition before calling it last known good.
 */
export type ProbeResult = { ok: true; unprobed?: boolean } | { ok: false; error: string; unanswered?: boolean; starved?: boolean };
// `unanswered`: no answer at all within the probe's timeout (the process holds the port and hangs);
// a refused connection or an error status is an answer. Beats say so (Beat.unanswered).
// `starved` (only with unanswered): the process that holds the port waited for a CPU through much
// of the probe (cpu-wait.ts): slow on a node short of CPU, not hung (Beat.starved).

/** Phase for this beat: a stopping writer says so; otherwise the probe decides. */
export function choosePhase(probe: ProbeResult, stopping: boolean): Phase {
  if (stopping) return 'Stopping';
  return probe.ok ? 'Ready' : 'Starting';
}

/** MicroTime as the api-server wants it: RFC 3339 with exactly six fractional digits, UTC. */
export function microTime(wallMs: number, extraMicros = 0): string {
  const iso = new Date(wallMs).toISOString(); // 2026-12-02T10:00:00.123Z
  const micros = String(extraMicros % 1000).padStart(3, '0');
  return `${iso.slice(0, 23)}${micros}Z`;
}

/**
 * The next beat: one more than the last sequence, the phase the probe chose, now on the writer's
 * clock, and the interval the writer beats at now (declared, so the agent can judge it by it).
 */
export function nextBeat(
  counter: BeatCounter,
  id: HeartbeatIdentity,
  channel: Channel,
  phase: Phase,
  wallMs: number,
  intervalMs: number,
  unprobed = false,
  unanswered = false,
  afterReady?: boolean,
  starved?: boolean,
): Beat {
  return {
    ...beatFlags(phase, unprobed, unanswered, afterReady, starved),
    channel,
    holder: id.podName,
    holderUid: id.podUid,
    role: id.role,
    phase,
    sequence: counter.sequence,
    renewTime: microTime(wallMs),
    intervalMs,
  };
}

/** Advance the counter once per round of writes (all channels of one round carry one sequence). */
export function advance(counter: BeatCounter): BeatCounter {
  return { sequence: counter.sequence + 1 };
}
