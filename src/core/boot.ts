// A reboot ends every process, and a boot voids deadlines.
//
// - The reboot rule: after a reboot, with no api-server answering, a parent whose absence is the
//   failure (`whenApiUnreachable: activate`) is covered at once: beats from the last boot prove
//   nothing, and waiting out startupGrace only lengthens the outage. Only once the agent knows no
//   api-server answers (its first probe's verdict): an agent that starts late in the boot
//   (restarted, or slow) may find parents the kubelet already started in this boot with an
//   api-server's word, and their beats must get their window.
// - A boot voids deadlines: a hand-over record written under an earlier boot id describes processes
//   that no longer exist, so its deadline, attempts and back-off do not carry over (the hand-over is
//   not resumed: the parent is judged afresh, and the reboot rule covers it); a known-bad verdict
//   keeps its strikes but starts a full probation (probation.ts `recovered`).
//
// Owns `ParentState.graceEndsIfUnreachable`. Pure.
import { R } from './transitions.js';
import type { ParentPolicy, ParentState, Reason } from './types.js';

export interface BootFacts {
  policy: ParentPolicy;
  /** The node rebooted since the agent last ran (its recorded boot id differs). */
  rebooted?: boolean;
  /** Whether an api-server answers the agent; undefined: not heard yet (its first probe is out). */
  apiReachable?: boolean;
  /** The hand-over record was written under an earlier boot id. */
  recordFromEarlierBoot?: boolean;
}

/**
 * How the reboot rule starts a parent: `noGrace`, covered as soon as it is silent (no api-server
 * answers); `untilHeard`, the grace ends at once if the agent's first verdict is "unreachable".
 */
export function bootGrace(a: BootFacts): { noGrace: boolean; untilHeard: boolean } {
  const rebootRule = a.rebooted === true && a.policy.whenApiUnreachable === 'activate' && a.apiReachable !== true;
  const noGrace = rebootRule && a.apiReachable === false;
  return { noGrace, untilHeard: rebootRule && !noGrace };
}

/** A hand-over record carries its deadline over only within the boot that wrote it. */
export function recordCarriesOver(a: BootFacts): boolean {
  return a.recordFromEarlierBoot !== true;
}

export function noGraceReason(): Reason {
  return R('AgentStarted', 'the node rebooted and no api-server answers; no grace (whenApiUnreachable: activate)');
}

/** The agent's first verdict on the api-server: "unreachable" is the reboot rule's evidence. */
export function observeFirstVerdict(s: ParentState, reachable: boolean, now: number): void {
  if (!s.graceEndsIfUnreachable) return;
  delete s.graceEndsIfUnreachable;
  if (!reachable && s.state === 'Pending' && s.lastChangeAt === null) {
    s.graceUntil = Math.min(s.graceUntil, now);
    s.reason = noGraceReason();
  }
}
