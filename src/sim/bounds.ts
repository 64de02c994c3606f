// Liveness bounds derived from the policy and the model's timings. Each term says what it waits
// for; the sums are what the invariants hold the lastseen agent to after a fault ends.
import { CONFIRM_TIMEOUT_MS, handoverWindowMs, WINDOW_INTERVALS } from '../core/decide.js';
import { type KubeletModel, noticeBoundMs, relistBoundMs } from './kubelet-model.js';
import { T } from './model.js';
import type { ParentDef } from './schema.js';

/**
 * The longest a restart can come after its crash-loop back-off: the pod worker re-syncs a backing-off
 * pod every 10s stretched by up to 50%, and restarts it at the first sync after the back-off expires.
 */
export const RESTART_LATE_MS = T.podWorkerBackoffSyncMs * (1 + T.podWorkerJitter);

/**
 * From the end of a fault (node up again, partition healed, pod deleted, ...) until the parent key
 * is served again, by the parent or its checkpoint, the larger of two paths.
 *
 * Recovery from the fault:
 *   kubelet start + pod start + agent start   the agent runs again after a reboot
 * + startupGrace                               fresh start: nobody is judged before it ends
 * + window                                     a parent seen once after the start must then be silent a whole window
 * + confirm timeout + probe period             the live read (or noticing the api-server is gone)
 * + file poll + actuator                       the agent sees the last beat, writes the manifest
 * + kubelet file-check period                  the kubelet notices the manifest
 * + pod start + parent start                   the copy starts and becomes Ready
 * + stop time + 10s + 20s + 40s backoff       ports still held by a terminating or crash-looping
 *   + 3 x RESTART_LATE                         parent: the copy may lose three binds in a row, each
 *                                              restart up to one pod-worker sync late
 * + controller delay + interval                a deleted pod is re-created; one heartbeat period of phase
 * + startTimeout (only when the desired spec cannot become Ready): a crash-looping bad build keeps
 *   beating Starting, and Starting counts as alive until startTimeout.
 *
 * Only when the parent's container exited unnoticed during the unserved stretch (kubelet v1.5 status
 * cache, kubelet.ts: it failed to bind inside the copy's stop time while no api-server existed, and
 * is not restarted until one exists again), two more paths, because the parent's sidecar goes on
 * beating Starting for a container that will not come back on its own:
 *
 * A lost hand-over: the checkpoint is retired, so from the moment the kubelet's file check removes
 * it nobody serves, and the parent never becomes Ready in this round. The key is unserved until the
 * agent's deadline re-activates the copy:
 *   handoverTimeout                            from the retire (the file check comes later: the
 *                                              unserved stretch starts no earlier than the retire)
 * + actuator + kubelet file-check period       the manifest is written and noticed
 * + pod start + bind delay + parent start      the copy starts; the ports are free (the parent's
 *                                              container is dead and, unnoticed, not restarted)
 * + probe period                               slack for the agent noticing the api-server went away
 *
 * No deadline running: the agent retired the copy at once on a Ready beat (then the parent's next
 * start lost its bind to the copy's stop time), or the agent restarted mid-hand-over and forgot the
 * deadline. A parent beating Starting counts as alive until startTimeout (docs/architecture.md), then it is
 * judged down and covered:
 *   agent restart (back-off + pod-worker sync) + agent start + startupGrace + interval
 *                                              a restarted agent needs a changed beat after its baseline
 * + startTimeout                               Starting counts as alive this long
 * + confirm timeout + probe period             the live read / the api-server is gone
 * + actuator + kubelet file-check period       the manifest is written and noticed
 * + pod start + bind delay + parent start      the copy starts on free ports
 */
export function serveBoundMs(def: ParentDef, kubelet: KubeletModel, desiredHealthy = true, parentUnnoticed = false): number {
  const p = def.policy;
  const { windowMs, intervalMs } = judged(def);
  // The kubelet model's slowest notice (the file-check period, or inotify's worst case) and pod start.
  const fileCheckMs = noticeBoundMs(kubelet);
  const podStartMs = Math.max(kubelet.staticPodStartMs, kubelet.apiPodStartMs);
  const copyStarts = T.actuatorMs + fileCheckMs + podStartMs + T.bindDelayMs + def.startMs;
  // The lost hand-over may be a later attempt, whose window has grown (handoverWindowMs): take the cap.
  const lostHandover = handoverWindowMs(p, Number.MAX_SAFE_INTEGER) + copyStarts + T.agentProbeMs;
  const noDeadline =
    T.backoffInitialMs +
    RESTART_LATE_MS +
    T.agentStartMs.max +
    p.startupGraceMs +
    intervalMs +
    p.startTimeoutMs +
    CONFIRM_TIMEOUT_MS +
    T.agentProbeMs +
    copyStarts;
  const fromFault =
    (desiredHealthy ? 0 : p.startTimeoutMs) +
    T.kubeletStartMs +
    kubelet.startupMs +
    podStartMs +
    T.agentStartMs.max +
    p.startupGraceMs +
    windowMs +
    CONFIRM_TIMEOUT_MS +
    T.agentProbeMs +
    T.agentFilePollMs +
    T.actuatorMs +
    fileCheckMs +
    podStartMs +
    def.startMs +
    def.stopMs +
    T.backoffInitialMs * (1 + 2 + 4) +
    3 * RESTART_LATE_MS +
    T.controllerMs +
    intervalMs;
  return parentUnnoticed ? Math.max(fromFault, lostHandover, noDeadline) : fromFault;
}

/**
 * The window the agent judges the parent by and the period its beats come at: a sidecar beating
 * slower than the policy's interval (`beatInterval`) declares it, and the core then judges by
 * max(window, WINDOW_INTERVALS x that interval) (src/core/freshness.ts judgingWindowMs).
 */
export function judged(def: ParentDef): { windowMs: number; intervalMs: number } {
  const intervalMs = Math.max(def.policy.intervalMs, def.beatIntervalMs);
  return { windowMs: Math.max(def.policy.windowMs, WINDOW_INTERVALS * def.beatIntervalMs), intervalMs };
}

/** Hand-overs counted in the parent bound before the parent must have won. */
const HANDOVER_ROUNDS = 4;

/**
 * From the end of a fault until the parent itself serves with its checkpoint retired, when its
 * spec can become Ready: the key is served (above), then hand-overs. The parent may sit in the
 * kubelet's crash-loop backoff (up to 5 min) from binds lost to the checkpoint, so a hand-over can
 * fail; each failed round costs its hand-over window (handoverWindowMs) plus the growing backoff:
 *   serve bound
 * + sum over HANDOVER_ROUNDS of (window(k + 1) + min(initial * 2^k, max) * 1.25 spread)
 * + kubelet max backoff + file check + termination + parent start + interval   the winning round
 */
export function parentBoundMs(def: ParentDef, kubelet: KubeletModel): number {
  const p = def.policy;
  const fileCheckMs = noticeBoundMs(kubelet);
  let rounds = 0;
  for (let k = 0; k < HANDOVER_ROUNDS; k++)
    rounds += handoverWindowMs(p, k + 1) + 1.25 * Math.min(p.handoverBackoff.initialMs * 2 ** k, p.handoverBackoff.maxMs);
  return (
    serveBoundMs(def, kubelet) +
    rounds +
    relistBoundMs(kubelet) +
    T.backoffMaxMs +
    RESTART_LATE_MS +
    fileCheckMs +
    def.stopMs +
    def.startMs +
    judged(def).intervalMs
  );
}

/**
 * The total time a parent key may go unserved on a node over a whole run (not per stretch), while
 * it is servable (node up; a healthy spec desired or a checkpoint stored). Independent of the run's
 * length: recovery ends, so the unserved time must stop growing. Each fault opens a recovery window
 * from its start:
 * - a rollout to a spec that cannot become Ready: its length, then until the checkpoint covers
 *   (the serve bound, unnoticed exits included), then one lost hand-over to the new spec (its first
 *   window, the copy's restart and the parent's stop time), and no more: the spec is then known bad
 *   (core: no hand-over to a known-bad spec);
 * - any other fault: its length, then until the parent itself serves again (the parent bound, which
 *   covers the serve bound and every hand-over round).
 * The budget is the length of the union of these windows: overlapping faults share one recovery.
 */
export function unservedBudgetMs(
  def: ParentDef,
  kubelet: KubeletModel,
  faults: ReadonlyArray<{ type: string; at: number; end: number; healthy?: boolean; key?: string }>,
): number {
  const p = def.policy;
  const copyStarts = T.actuatorMs + noticeBoundMs(kubelet) + Math.max(kubelet.staticPodStartMs, kubelet.apiPodStartMs) + T.bindDelayMs + def.startMs;
  const windows = faults
    .map((f) => {
      const badRollout = f.type === 'rollout' && f.key === def.key && f.healthy === false;
      const recovery = badRollout ? serveBoundMs(def, kubelet, false, true) + handoverWindowMs(p, 1) + copyStarts + def.stopMs : parentBoundMs(def, kubelet);
      return { from: f.at, to: f.end + recovery };
    })
    .sort((x, y) => x.from - y.from);
  let total = 0;
  let open: { from: number; to: number } | null = null;
  for (const win of windows) {
    if (open && win.from <= open.to) open.to = Math.max(open.to, win.to);
    else {
      if (open) total += open.to - open.from;
      open = { ...win };
    }
  }
  if (open) total += open.to - open.from;
  return total;
}
