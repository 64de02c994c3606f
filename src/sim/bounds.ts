// Liveness bounds derived from the policy and the model's timings. Each term says what it waits
// for; the sums are what the invariants hold the lastseen agent to after a fault ends.
import { CONFIRM_TIMEOUT_MS } from '../core/decide.js';
import { T } from './model.js';
import type { ParentDef } from './schema.js';

/**
 * From the end of a fault (node up again, partition healed, pod deleted, ...) until the parent key
 * is served again, by the parent or its checkpoint:
 *   kubelet start + pod start + agent start   the agent runs again after a reboot
 * + startupGrace                               fresh start: nobody is judged before it ends
 * + window                                     a parent seen once after the start must then be silent a whole window
 * + confirm timeout + probe period             the live read (or noticing the api-server is gone)
 * + file poll + actuator                       the agent sees the last beat, writes the manifest
 * + kubelet file-check period                  the kubelet notices the manifest
 * + pod start + parent start                   the copy starts and becomes Ready
 * + termination + 10s + 20s + 40s backoff      ports still held by a terminating or crash-looping
 *                                              parent: the copy may lose three binds in a row
 * + controller delay + interval                a deleted pod is re-created; one heartbeat period of phase
 * + startTimeout (only when the desired spec cannot become Ready): a crash-looping bad build keeps
 *   beating Starting, and Starting counts as alive until startTimeout.
 */
export function serveBoundMs(def: ParentDef, fileCheckMs: number, desiredHealthy = true): number {
  const p = def.policy;
  return (
    (desiredHealthy ? 0 : p.startTimeoutMs) +
    T.kubeletStartMs + T.podStartMs + T.agentStartMs +
    p.startupGraceMs +
    p.windowMs +
    CONFIRM_TIMEOUT_MS + T.agentProbeMs +
    T.agentFilePollMs + T.actuatorMs +
    fileCheckMs +
    T.podStartMs + def.startMs +
    T.terminationMs + T.backoffInitialMs * (1 + 2 + 4) +
    T.controllerMs + p.intervalMs
  );
}

/** Hand-overs counted in the parent bound before the parent must have won. */
const HANDOVER_ROUNDS = 4;

/**
 * From the end of a fault until the parent itself serves with its checkpoint retired, when its
 * spec can become Ready: the key is served (above), then hand-overs. The parent may sit in the
 * kubelet's crash-loop backoff (up to 5 min) from binds lost to the checkpoint, so a hand-over can
 * fail; each failed round costs handoverTimeout plus the growing hand-over backoff:
 *   serve bound
 * + sum over HANDOVER_ROUNDS of (handoverTimeout + min(initial * 2^k, max))
 * + kubelet max backoff + file check + termination + parent start + interval   the winning round
 */
export function parentBoundMs(def: ParentDef, fileCheckMs: number): number {
  const p = def.policy;
  let rounds = 0;
  for (let k = 0; k < HANDOVER_ROUNDS; k++) rounds += p.handoverTimeoutMs + Math.min(p.handoverBackoff.initialMs * 2 ** k, p.handoverBackoff.maxMs);
  return serveBoundMs(def, fileCheckMs) + rounds + T.backoffMaxMs + fileCheckMs + T.terminationMs + def.startMs + p.intervalMs;
}
