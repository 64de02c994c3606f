// Observer of the api-server's reachability: GET /readyz every `intervalMs` through the KubeConfig
// (its CA, client certificate or token, proxy), on a fresh connection each time.
//
// Promises: `onReachable(r)` is called only when the verdict changes. The first verdict comes from
// the first probe, whatever it says: before it the agent already treats the api-server as
// unreachable, so a first failure changes nothing but says that the api-server did not answer the
// agent's first look (the evidence the reboot rule waits for, src/core/boot.ts).
// Reachable -> unreachable needs `failureThreshold` consecutive failures; unreachable -> reachable
// needs one success (an api-server answering /readyz 200 is proof enough; doubting it would only
// delay the hand-back).
// Each probe is aborted after `timeoutMs` (< intervalMs, checked), so probes never pile up.
// `probeNow()` runs one at once and feeds the same counting. Nothing throws into the agent.
//
// Calm periods (fewer idle requests to the api-server): with `calmIntervalMs` and `calm()`, the next probe waits
// `calmIntervalMs` instead while the api-server is reachable, the last probe succeeded and
// `calm()` says the agent's watches are open (the agent passes its informers' health). A watch
// that breaks is immediate evidence: the agent calls `nudge()`, which probes at once and goes back
// to `intervalMs`. What calm costs: an api-server that hangs with its watch connections still open
// is first probed up to `calmIntervalMs` later than without it, and the fast period restarts
// from that first failure, so "unreachable" comes after at most calmIntervalMs + timeoutMs +
// (failureThreshold - 1) x intervalMs + timeoutMs (44 s with 30 s, 2 s, 3, 5 s) instead of
// failureThreshold x intervalMs + timeoutMs (17 s) (the informers' own watchdog, 90 s of
// silence, is slower still). A closed connection or a refused one ends the watches, so the agent
// nudges and that case is as quick as without calm.
//
// Assumes: /readyz is readable by the agent (the default RBAC lets anyone, even anonymous, read
// it via system:public-info-viewer). A 200 means "ready"; anything else, including a 500 from a
// starting api-server, counts as a failure. A fresh connection per probe (client-node's per-request
// agent, no keep-alive) is deliberate: a kept-alive socket could answer for a server whose new
// connections fail.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { kubeGet, readBody } from '../../kube/http.js';
import type { Timers } from '../agent.js';

/** Default period. A quarter of the default window: an outage is seen well before parents are judged. */
export const API_PROBE_INTERVAL_MS = 5_000;
/**
 * The agent's calm period is this many probe periods (30 s at the default): the agent's idle
 * api-server traffic is mostly /readyz, and open watches already show the api-server alive.
 */
export const API_PROBE_CALM_FACTOR = 6;
/** Default per-probe timeout: a healthy api-server answers /readyz in milliseconds; 2 s forgives a loaded one. */
export const API_PROBE_TIMEOUT_MS = 2_000;
/**
 * Consecutive failures before "unreachable". One lost probe (a GC pause, an api-server restarting
 * behind a load balancer) must not flip every parent's policy to `whenApiUnreachable`; three (about
 * 15 s at the default period) is the kubelet's own default failureThreshold for probes.
 */
export const API_FAILURE_THRESHOLD = 3;
/** /readyz answers "ok" or a list of checks; we only need the status. */
const MAX_READYZ_BYTES = 64 * 1024;

export interface ApiProbeOptions {
  kubeConfig: KubeConfig;
  log: Logger;
  timers: Timers;
  onReachable(reachable: boolean): void;
  /** Default API_PROBE_INTERVAL_MS. */
  intervalMs?: number;
  /** Default API_PROBE_TIMEOUT_MS; must be shorter than intervalMs. */
  timeoutMs?: number;
  /** Default API_FAILURE_THRESHOLD. */
  failureThreshold?: number;
  /** Period while calm (see the header); unset: always intervalMs. Must be >= intervalMs. */
  calmIntervalMs?: number;
  /** True while other evidence says the api-server is alive (the agent's watches are open). */
  calm?: () => boolean;
  /** Replaces the HTTP GET (tests); resolves true for ready. */
  probe?: (signal: AbortSignal) => Promise<boolean>;
}

export interface ApiProbe {
  /** Probe at once, then every intervalMs. Idempotent. */
  start(): void;
  /** Stop probing; aborts a probe in flight. No callback runs after this resolves. */
  stop(): Promise<void>;
  /** Probe now (joins a probe already in flight); resolves with this probe's result. */
  probeNow(): Promise<boolean>;
  /** Evidence against the api-server (a watch broke): probe at once unless one is in flight, then every intervalMs until calm again. */
  nudge(): void;
  /** The current verdict; null until the first one. */
  isReachable(): boolean | null;
}

/** GET /readyz; true only for HTTP 200. Rejects on no answer. */
export async function getReadyz(kc: KubeConfig, signal: AbortSignal): Promise<boolean> {
  const res = await kubeGet(kc, '/readyz', signal);
  await readBody(res, MAX_READYZ_BYTES).catch(() => '');
  return res.statusCode === 200;
}

export function probeApiServer(opts: ApiProbeOptions): ApiProbe {
  const intervalMs = opts.intervalMs ?? API_PROBE_INTERVAL_MS;
  const timeoutMs = opts.timeoutMs ?? API_PROBE_TIMEOUT_MS;
  const threshold = opts.failureThreshold ?? API_FAILURE_THRESHOLD;
  if (!(intervalMs > 0) || !(timeoutMs > 0) || timeoutMs >= intervalMs) {
    throw new Error(`api probe: need 0 < timeoutMs (${timeoutMs}) < intervalMs (${intervalMs})`);
  }
  const calmMs = opts.calmIntervalMs;
  if (calmMs !== undefined && !(calmMs >= intervalMs)) throw new Error(`api probe: calmIntervalMs (${calmMs}) must be >= intervalMs (${intervalMs})`);
  if (!Number.isInteger(threshold) || threshold < 1) throw new Error(`api probe: failureThreshold must be a positive integer, got ${threshold}`);
  const probe = opts.probe ?? ((signal: AbortSignal) => getReadyz(opts.kubeConfig, signal));
  const log = opts.log.child({ observer: 'api-probe' });
  const stopAc = new AbortController();
  let reachable: boolean | null = null;
  let failures = 0;
  let started = false;
  let stopped = false;
  let timer: unknown = null;
  let inflight: Promise<boolean> | null = null;
  /** Whether the pending timer is a calm (long) wait. */
  let calmNow = false;

  const verdict = (r: boolean, why: string) => {
    if (reachable === r || stopped) return;
    reachable = r;
    // The agent's loop logs "api-server reachability changed" when it hears the verdict (after the
    // watches relist, on a return); one info line per change, this one is the probe's evidence.
    log.debug({ reachable: r, why, failures }, 'api-server probe verdict');
    try {
      opts.onReachable(r);
    } catch (e) {
      log.error({ callback: 'onReachable', error: (e as Error)?.message ?? String(e) }, 'api probe callback threw; carrying on');
    }
  };

  async function once(): Promise<boolean> {
    const ac = new AbortController();
    const onStop = () => ac.abort();
    stopAc.signal.addEventListener('abort', onStop, { once: true });
    const t = opts.timers.set(() => ac.abort(), timeoutMs);
    let ok = false;
    let why: string;
    try {
      ok = await probe(ac.signal);
      why = ok ? 'readyz ok' : 'readyz not ok';
    } catch (e) {
      why = ac.signal.aborted ? `no answer within ${timeoutMs} ms` : ((e as Error)?.message ?? String(e));
    } finally {
      opts.timers.clear(t);
      stopAc.signal.removeEventListener('abort', onStop);
    }
    if (stopped) return ok;
    if (ok) {
      failures = 0;
      verdict(true, why);
    } else {
      failures++;
      log.debug({ failures, threshold, why }, 'api-server probe failed');
      // A failure ends calm at once: the next probes come every intervalMs, as without it.
      if (calmNow && timer !== null) rearm(intervalMs);
      if (failures >= threshold || reachable === null) verdict(false, why);
    }
    return ok;
  }

  const probeNow = (): Promise<boolean> => {
    inflight ??= once().finally(() => {
      inflight = null;
    });
    return inflight;
  };

  const isCalm = (): boolean => {
    if (calmMs === undefined || !opts.calm || reachable !== true || failures > 0) return false;
    try {
      return opts.calm();
    } catch {
      return false;
    }
  };

  /** Replaces a calm wait with `ms` from now. */
  const rearm = (ms: number) => {
    if (timer !== null) opts.timers.clear(timer);
    calmNow = false;
    timer = opts.timers.set(tick, ms);
  };

  const tick = () => {
    timer = null;
    if (stopped) return;
    // Scheduled from the start of a probe: the timeout is shorter than the period, so none overlap.
    calmNow = isCalm();
    timer = opts.timers.set(tick, calmNow && calmMs !== undefined ? calmMs : intervalMs);
    void probeNow();
  };

  return {
    start() {
      if (started || stopped) return;
      started = true;
      tick();
    },
    async stop() {
      stopped = true;
      stopAc.abort();
      if (timer !== null) opts.timers.clear(timer);
      timer = null;
      await inflight?.catch(() => undefined);
    },
    probeNow,
    nudge() {
      if (!started || stopped) return;
      log.debug({ calm: calmNow, inflight: inflight !== null }, 'api probe nudged');
      // A probe in flight answers for now; only the calm wait after it is cut short.
      if (inflight) {
        if (calmNow) rearm(intervalMs);
        return;
      }
      if (timer !== null) opts.timers.clear(timer);
      tick();
    },
    isReachable: () => reachable,
  };
}
