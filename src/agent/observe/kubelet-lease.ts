// Observer of the node's kubelet after a reboot: has it reached an api-server in this boot?
//
// The kubelet renews its node's Lease (`kube-node-lease/<node>`, holder the node's name) every
// 10 s while it reaches an api-server, and at once when it starts and can. A renewal before this
// boot began is the last boot's: the kubelet has not reached an api-server since, so it knows
// none of its api-assigned pods and starts none of them (src/core/boot.ts observeKubelet says what
// the core makes of it).
//
// Promises: runs only when told to start (the agent starts it after a reboot). The first read is
// `settleMs` after start, so a kubelet that reaches an api-server has had time to renew; then one
// read every `intervalMs` until the kubelet is seen to have renewed since the boot, or until
// `giveUpMs` after start. Each read's verdict goes to `onVerdict` (true: renewed since the boot;
// false: not yet). A read that fails (no answer, a refusal, no Lease, a Lease of another holder,
// a body that is not a Lease) gives no verdict: the usual startupGrace applies. Each kind of bad
// answer is logged once, naming what was wrong. Nothing throws into the agent.
//
// Costs the api-server one GET of one Lease per `intervalMs`, for at most `giveUpMs` after a boot.
// Assumes the node's clock is the kubelet's (renewTime is written with the kubelet's clock and
// compared with this boot's start on the same machine's clock); a clock stepped back at boot by
// more than the power-off makes the last boot's renewal look recent, which only means the usual
// startupGrace applies.
import { stat } from 'node:fs/promises';
import { uptime } from 'node:os';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { z } from 'zod';
import { kubeGet, readBody } from '../../kube/http.js';
import type { Timers } from '../agent.js';

/**
 * From the agent's start to its first read. The kubelet started before the agent (it runs the
 * agent) and renews at once when it reaches an api-server (within about a second on the real node),
 * so by then a kubelet that can has renewed. Each second here is a second the node's own port stays
 * dark in a rolling reboot; a kubelet slower than this gets a copy it did not need, which costs a
 * hand-over (docs/decisions/0011-blind-kubelet.md).
 */
export const KUBELET_SETTLE_MS = 2_000;
export const KUBELET_LEASE_INTERVAL_MS = 5_000;
/** After this long the question is left to startupGrace and the ordinary rules. */
export const KUBELET_GIVE_UP_MS = 120_000;
const READ_TIMEOUT_MS = 3_000;
const MAX_LEASE_BYTES = 64 * 1024;

/** What a read of the node's Lease says: who holds it and when it was last renewed (wall-clock ms), or why it says nothing. */
export type NodeLeaseRead = { holder: string; renewedAtMs: number } | { unusable: string };

export interface KubeletLeaseOptions {
  node: string;
  log: Logger;
  timers: Timers;
  /** Wall-clock ms (`Date.now()`'s clock) at which this boot began. */
  bootWallMs: number;
  /** One read of the node's Lease; rejects when the api-server gave no usable answer. */
  read(signal: AbortSignal): Promise<NodeLeaseRead>;
  onVerdict(reachedApi: boolean): void;
  settleMs?: number;
  intervalMs?: number;
  giveUpMs?: number;
}

export interface KubeletLeaseWatch {
  start(): void;
  stop(): void;
}

/** This boot's start on the wall clock: now minus the kernel's uptime. */
export function bootWallMs(now = Date.now()): number {
  return now - uptime() * 1000;
}

/**
 * When this boot began: the kernel's uptime, or, when the agent is given a boot id file in place of
 * the kernel's (a test bed's power cycle, which is no kernel boot), the time that file was written.
 */
export async function bootStartedAt(bootIdFile?: string): Promise<number> {
  if (bootIdFile === undefined) return bootWallMs();
  try {
    return (await stat(bootIdFile)).mtimeMs;
  } catch {
    return bootWallMs();
  }
}

const leaseBody = z.object({
  kind: z.literal('Lease'),
  spec: z.object({
    holderIdentity: z.string().min(1),
    renewTime: z.iso.datetime({ offset: true }).optional(),
  }),
});

/** Reads a Lease's JSON body; what it says, or why it cannot be used. */
export function parseNodeLease(text: string): NodeLeaseRead {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { unusable: 'the answer is not JSON' };
  }
  const r = leaseBody.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0]!;
    return { unusable: `not a Lease: ${i.path.join('.') || '(root)'}: ${i.message}` };
  }
  if (r.data.spec.renewTime === undefined) return { unusable: 'the Lease has no spec.renewTime' };
  return { holder: r.data.spec.holderIdentity, renewedAtMs: Date.parse(r.data.spec.renewTime) };
}

/** GET the node's Lease through the kubeconfig (a fresh connection, as every other plain GET of the agent). */
export async function getNodeLease(kc: KubeConfig, node: string, signal: AbortSignal): Promise<NodeLeaseRead> {
  const res = await kubeGet(kc, `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${encodeURIComponent(node)}`, signal);
  const text = await readBody(res, MAX_LEASE_BYTES);
  if (res.statusCode === 404) return { unusable: 'no Lease kube-node-lease/' + node };
  if (res.statusCode !== 200) return { unusable: `HTTP ${res.statusCode} for kube-node-lease/${node}` };
  return parseNodeLease(text);
}

export function watchKubeletLease(o: KubeletLeaseOptions): KubeletLeaseWatch {
  const settleMs = o.settleMs ?? KUBELET_SETTLE_MS;
  const intervalMs = o.intervalMs ?? KUBELET_LEASE_INTERVAL_MS;
  const giveUpMs = o.giveUpMs ?? KUBELET_GIVE_UP_MS;
  const log = o.log.child({ observer: 'kubelet-lease' });
  const said = new Set<string>();
  let timer: unknown = null;
  let stopped = false;
  let started = false;
  let elapsed = 0;
  /** The read in flight: stop() aborts it. */
  let inflight: AbortController | null = null;

  const once = (what: string, detail: Record<string, unknown>) => {
    if (said.has(what)) return;
    said.add(what);
    log.warn(detail, what);
  };

  /** The renewal time of a Lease that says something of this node's kubelet; else null, said once per kind. */
  const usable = (r: NodeLeaseRead): number | null => {
    const lease = `kube-node-lease/${o.node}`;
    if ('unusable' in r) once(`the node's Lease says nothing of the kubelet: ${r.unusable}`, { lease });
    else if (r.holder !== o.node) once("the node's Lease is held by another name than the node's", { lease, holder: r.holder });
    else if (!Number.isFinite(r.renewedAtMs)) once("the node's Lease has a renewTime that is not a time", { lease });
    else return r.renewedAtMs;
    return null;
  };

  const next = (ms: number) => {
    elapsed += ms;
    if (stopped || elapsed > giveUpMs) return;
    timer = o.timers.set(() => void read(), ms);
  };

  async function read(): Promise<void> {
    timer = null;
    if (stopped) return;
    const ac = new AbortController();
    inflight = ac;
    const t = o.timers.set(() => ac.abort(), READ_TIMEOUT_MS);
    let r: NodeLeaseRead | null = null;
    try {
      r = await o.read(ac.signal);
    } catch (e) {
      log.debug({ error: (e as Error)?.message ?? String(e) }, "could not read the node's Lease");
    } finally {
      o.timers.clear(t);
      inflight = null;
    }
    if (stopped) return;
    const renewedAtMs = r === null ? null : usable(r);
    if (renewedAtMs !== null) {
      const reached = renewedAtMs >= o.bootWallMs;
      try {
        o.onVerdict(reached);
      } catch (e) {
        log.error({ error: (e as Error)?.message ?? String(e) }, 'kubelet verdict callback threw; carrying on');
      }
      if (reached) return stop();
    }
    next(intervalMs);
  }

  function stop(): void {
    stopped = true;
    inflight?.abort();
    if (timer !== null) o.timers.clear(timer);
    timer = null;
  }

  return {
    start() {
      if (started) return;
      started = true;
      next(settleMs);
    },
    stop,
  };
}
