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
// - A blind kubelet starts nothing: after a reboot the kubelet learns its api-assigned pods only
//   from an api-server. A kubelet that asks its own node's api-server (kubeadm's control-plane
//   kubelets do, by default since v1.33) learns nothing until something serves on this node, while
//   the agent, asking the other masters through a load balancer, hears an api-server and would wait
//   out startupGrace for a parent that cannot start. The node's kubelet renews its node Lease
//   whenever it reaches an api-server; when the agent finds it not renewed since the boot, some
//   seconds into the boot (src/agent/observe/kubelet-lease.ts), the grace of a parent whose absence
//   is the failure (`whenApiUnreachable: activate`) and of which nothing was heard ends at once
//   (`KubeletBlind`), and its silence is confirmed by a live read as usual.
//
// Owns `ParentState.graceEndsIfUnreachable`, `graceEndsIfKubeletBlind` and `kubeletBlind`. Pure.
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
  /** The node rebooted and the agent has not yet heard whether its kubelet reached an api-server since. */
  kubeletUnheard?: boolean;
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

/** Whether a new parent waits for the kubelet's verdict (observeKubelet). */
export function kubeletQuestion(a: BootFacts): boolean {
  return a.kubeletUnheard === true && a.policy.whenApiUnreachable === 'activate';
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

export const KUBELET_BLIND_MESSAGE =
  "silent since the boot, and the node's kubelet has not reached an api-server in this boot (its node Lease is not renewed), so it cannot start the parent";

/**
 * The agent's verdict on the node's kubelet after a reboot. "It reached an api-server" closes the
 * question. "It did not" ends the grace of a parent still waiting for its first beat while an
 * api-server answers the agent; while none does, the reboot rule decides, and the question stays
 * open for the next verdict (an api-server that answers later gives a fresh startupGrace).
 */
export function observeKubelet(s: ParentState, reachedApi: boolean, now: number): void {
  if (!s.graceEndsIfKubeletBlind) return;
  if (reachedApi || s.state !== 'Pending' || s.lastChangeAt !== null) {
    delete s.graceEndsIfKubeletBlind;
    return;
  }
  if (!s.apiReachable) return;
  delete s.graceEndsIfKubeletBlind;
  s.kubeletBlind = true;
  s.graceUntil = Math.min(s.graceUntil, now);
  s.reason = R('KubeletBlind', KUBELET_BLIND_MESSAGE);
}

/** A silence confirmed with nothing heard of the parent since its kubelet was found blind. */
export function blindCover(s: ParentState): boolean {
  return s.kubeletBlind === true && s.lastChangeAt === null;
}
