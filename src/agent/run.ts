// `lastseen agent`: wires the observers, the loop, the actuators, status, metrics and health into
// one process, and owns its lifetime, in named steps: health, the node lock (run-lock.ts), the
// node's folders and client, the loop with its actuators and reports, the policy (run-policy.ts),
// recovery from the state folder (run-recover.ts), the observers (run-observers.ts), periodic work.
// SIGTERM (stop(), or the AbortSignal, also while still starting) stops observing and waits for
// actions in flight, but never retires a checkpoint (a running copy of the api-server must survive
// the agent's restart).
import { mkdir } from 'node:fs/promises';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { DEFAULT_HEARTBEAT_DIR } from '../channels/local.js';
import { ManifestDir } from '../checkpoint/manifests.js';
import { Store } from '../checkpoint/store.js';
import { parentId } from '../core/names.js';
import { every } from '../core/time.js';
import { type KubeClient, loadKubeConfig, makeKubeClient } from '../kube/client.js';
import type { Condition } from '../kube/nodecheckpoint-types.js';
import { formatDuration } from '../policy/duration.js';
import { kubeResolver, makeActuators, specHashOf } from './actuators.js';
import { Agent, type Clock, monotonicClock, realTimers, type Timers } from './agent.js';
import { checkBoot } from './boot.js';
import { CoverageWatch } from './coverage.js';
import { HandoverFile } from './handovers.js';
import { serveHealth } from './health.js';
import { limitConcurrency } from './limit.js';
import type { AgentRole } from './lock.js';
import { AgentMetrics } from './metrics.js';
import { API_PROBE_TIMEOUT_MS, getReadyz } from './observe/api-probe.js';
import { bootStartedAt, getNodeLease, watchKubeletLease } from './observe/kubelet-lease.js';
import { watchManifestFolder } from './observe/manifests.js';
import type { PolicySource } from './observe/policy-source.js';
import { v1PodInfo } from './parents.js';
import { NftRedirector, RedirectTable } from './redirect.js';
import { type HeldLock, holdNodeLock, LockTurns, type StateProblem } from './run-lock.js';
import { type Observers, startObservers } from './run-observers.js';
import { startPolicy } from './run-policy.js';
import { nodeCheckpointDisk, recoverFromDisk } from './run-recover.js';
import { COPY_ENV, SelfCheckpoint } from './self.js';
import { STATUS_REFRESH_MS, StatusWriter } from './status.js';
import { startTokenRefresh, TokenRefresher } from './token-refresh.js';

export const DEFAULT_STATE_DIR = '/var/lib/lastseen';
export const DEFAULT_MANIFEST_DIR = '/etc/kubernetes/manifests';
export const DEFAULT_HEALTH_PORT = 9870;
/** Api requests of the agent (live reads, captures, Events) give up after this long. */
export const AGENT_REQUEST_TIMEOUT_MS = 5_000;
export { FIRST_POLICY_WAIT_MS } from './run-policy.js';
/**
 * How often a Healthy parent's copied secrets and tokens are refreshed. Projected tokens default to
 * an hour; a third of that leaves two refreshes' margin before the copy's token expires.
 */
export const COPY_REFRESH_MS = 20 * 60_000;
/** How often per-parent gauges (beat age) are refreshed between decisions. */
export const METRICS_REFRESH_MS = 5_000;

export interface AgentRunOptions {
  node: string;
  /** This agent pod's name and namespace (the namespace holds the policy ConfigMap). */
  podName: string;
  namespace: string;
  kubeconfig?: string;
  manifestDir?: string;
  stateDir?: string;
  heartbeatDir?: string;
  /** Where the node's boot id is read (default /proc/sys/kernel/random/boot_id): a changed id means a reboot. */
  bootIdFile?: string;
  /** A mounted policy file; when absent, the `lastseen-policy` ConfigMap in `namespace` is watched. */
  policyFile?: string;
  healthPort?: number;
  healthHost?: string;
  /** Watch silence after which a watch is re-opened (default: the informer's). */
  watchdogMs?: number;
  localPollMs?: number;
  apiProbeMs?: number;
  /**
   * Probe period while the pod and Lease watches are open and the api-server answers (calm probing):
   * default API_PROBE_CALM_FACTOR x the probe period; 0 probes at the probe period always.
   */
  apiProbeCalmMs?: number;
  logger: Logger;
  clock?: Clock;
  timers?: Timers;
  /** The DaemonSet pod's agent or its static copy (default: the copy when COPY_ENV is "true", see self.ts). */
  role?: AgentRole;
  /**
   * Aborting it ends the agent: during startup (standing by for the lock, waiting for the first
   * policy) runAgent rejects with the signal's reason after undoing what it started; once running,
   * it stops as stop() does.
   */
  signal?: AbortSignal;
}

export interface RunningAgent {
  agent: Agent;
  metrics: AgentMetrics;
  healthPort: number;
  stop(): Promise<void>;
  /** Resolves when the agent stops by itself (lost its lock); the CLI exits with code 1 then. */
  lost: Promise<void>;
}

/** Gauges and coverage after a decision are refreshed at most this late (decisions in a burst share one pass). */
export const OBSERVE_COALESCE_MS = 200;
/**
 * Captures in flight at once; the others wait their turn (limit.ts). At start, or when a node's
 * parents all come Ready together, the core asks for every capture in the same second: 200
 * parents were 200 captures at once, each with its reads and TokenRequests queued behind the
 * client's 8 sockets while their 5 s request timeouts ran, and all their responses, copies and
 * files alive together (the agent's memory peak, which the allocator then kept). One per socket.
 */
export const MAX_CAPTURES_AT_ONCE = 8;

/** One turn at the node lock: stand by, act, until stopped, the lock lost or (a copy) handed over. */
interface AgentTurn extends RunningAgent {
  /** Resolves when a copy is to hand the node lock to its DaemonSet's pod (run-lock.ts). */
  handedOver: Promise<void>;
}

async function runAgentTurn(o: AgentRunOptions, turns: LockTurns): Promise<AgentTurn> {
  const log = o.logger;
  const clock = o.clock ?? monotonicClock;
  const timers = o.timers ?? realTimers;
  const stateDir = o.stateDir ?? DEFAULT_STATE_DIR;
  const metrics = new AgentMetrics();
  // Undone in reverse order by stop(), or at once when startup is aborted.
  const stops: Array<() => Promise<void> | void> = [];
  const unwind = async () => {
    for (const s of stops.splice(0).reverse()) await Promise.resolve(s()).catch(() => {});
  };
  let lock: HeldLock | null = null;
  // A copy hands the node lock over only on a calm node (run-lock.ts): its successor starts afresh.
  let calm = (): boolean => false;
  // A state folder that takes no writes (run-lock.ts): /readyz says so, and an Event once the actuators exist.
  let stateProblem: StateProblem | null = null;
  let reportStateProblem: (p: StateProblem | null) => void = () => {};
  let observers: Observers | null = null;
  let stopping: Promise<void> | null = null;

  try {
    // 1. Health and metrics: /healthz, /readyz (the lock held and both watches listed), /metrics.
    const listenHealth = async () => {
      const h = await serveHealth(o.healthPort ?? DEFAULT_HEALTH_PORT, o.healthHost ?? '0.0.0.0', {
        live: () => ({ ok: true, reason: '' }),
        ready: () =>
          !lock?.isHeld()
            ? { ok: false, reason: 'standby: another agent holds the node lock' }
            : observers?.synced() && !stopping
              ? { ok: true, reason: stateProblem ? `the state folder takes no writes (${stateProblem.code}): ${stateProblem.message}` : '' }
              : { ok: false, reason: 'observers not synced yet' },
        registry: metrics.registry,
      });
      stops.push(() => h.close());
      log.info({ port: h.port }, 'health endpoints listening');
      return h;
    };
    // Both copies of the agent run with hostNetwork and the same flags: the health port is the
    // node's, and the acting agent's. A standby that finds it taken serves it once the lock is its
    // own (the kernel frees both when the holder dies); until then the holder answers the probes.
    const early = await listenHealth().catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EADDRINUSE') throw e;
      log.info({ port: o.healthPort ?? DEFAULT_HEALTH_PORT }, 'health port in use, by the agent holding the node lock if any; served once the lock is ours');
      return null;
    });

    // 2. One acting agent per node: stand by until the lock is ours.
    const held = await holdNodeLock({
      stateDir,
      holder: `${o.podName}-${process.pid}`,
      timers,
      log,
      role: o.role ?? (process.env[COPY_ENV] === 'true' ? 'copy' : 'daemonset'),
      pod: o.podName,
      turns,
      clock,
      mayHandOver: () => calm(),
      ...(o.signal ? { signal: o.signal } : {}),
      onStateProblem: (p) => {
        stateProblem = p;
        metrics.stateFolderWritable.set(p ? 0 : 1);
        reportStateProblem(p);
      },
    });
    lock = held;
    stops.push(() => held.release());
    const health = early ?? (await listenHealth());

    // 3. The node's folders and the api-server client.
    const store = new Store({ stateDir });
    const manifests = new ManifestDir({ dir: o.manifestDir ?? DEFAULT_MANIFEST_DIR });
    // The kubelet's folder normally exists; creating it (and the heartbeat folder) costs nothing
    // and lets the agent run against fresh folders in tests and on a node set up in another order.
    await mkdir(manifests.dir, { recursive: true });
    await mkdir(o.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR, { recursive: true });
    const strays = await manifests.removeStrays();
    if (strays.length > 0) log.info({ strays }, 'removed half-written manifests left by a crash');
    const kc = loadKubeConfig(o.kubeconfig);
    let kube: KubeClient = makeKubeClient(kc, { requestTimeoutMs: AGENT_REQUEST_TIMEOUT_MS });
    stops.push(() => kube.close());

    // 4. The loop (`Agent`, around the core), its actuators and its reports (status, metrics).
    let policySource: PolicySource | null = null;
    let agent: Agent<V1Pod> | null = null;
    const views = () => agent?.views() ?? [];
    let observeQueued = false;
    const conditions = (): Condition[] => {
      const now = new Date().toISOString();
      return [
        policySource?.isMissing()
          ? {
              type: 'PolicyValid',
              status: 'False',
              reason: 'Missing',
              message: 'no policy file or ConfigMap: the last good policy (else the built-in defaults) is in force',
              lastTransitionTime: now,
            }
          : {
              type: 'PolicyValid',
              status: policySource?.isValid() === false ? 'False' : 'True',
              reason: policySource?.isValid() === false ? 'Refused' : 'Valid',
              message: 'the policy in force',
              lastTransitionTime: now,
            },
        {
          type: 'ApiReachable',
          status: agent?.isApiReachable() ? 'True' : 'False',
          reason: agent?.isApiReachable() ? 'Reachable' : 'Unreachable',
          message: 'the agent reaches the api-server',
          lastTransitionTime: now,
        },
      ];
    };
    // Tokens of running checkpoints, renewed in place whatever their parents' state (see token-refresh.ts).
    const tokens = new TokenRefresher({ store, manifests, resolver: () => kubeResolver(kube, o.node), wallNow: Date.now, logger: log });
    // Coverage per parent and failing actions, for the metrics, the status and `status --covered`.
    const coverage = new CoverageWatch({
      metrics,
      log,
      onChange: () => status.poke(),
      lockHeld: () => lock?.isHeld() ?? false,
      loadTokenExpiry: async (id) => {
        const tokens = (await store.load(id))?.tokens ?? [];
        return tokens.length === 0 ? null : Math.min(...tokens.map((t) => Date.parse(t.expiresAt)));
      },
    });
    const status = new StatusWriter({
      coverage,
      node: o.node,
      kubeConfig: kc,
      // The shared pool: one kept-alive connection, not a TLS handshake per status request.
      kube: () => kube,
      views,
      conditions,
      clock,
      timers,
      logger: log,
      tokensExpireAt: (id) => tokens.expiries().get(id),
    });
    stops.push(() => status.stop());
    const handovers = new HandoverFile(stateDir);
    const disk = nodeCheckpointDisk(store, manifests);
    // The node's redirects (handover: redirect): what an earlier run left is read back; without nft
    // (or its rights) no parent can use the redirect, and its actions fail saying why.
    const redirects = new RedirectTable(new NftRedirector());
    await redirects.load().then(
      (got) => got.length > 0 && log.info({ redirects: got }, 'redirects found on the node'),
      (e: unknown) => log.info({ err: (e as Error).message }, 'no redirect table read (handover: redirect needs nft and CAP_NET_ADMIN)'),
    );
    const unwatched = makeActuators({
      redirects,
      node: o.node,
      instance: o.podName,
      store,
      manifests,
      kube: () => kube,
      // Live reads on their own connections: a stalled pooled socket must not answer for the api-server.
      freshKube: () => makeKubeClient(kc, { requestTimeoutMs: AGENT_REQUEST_TIMEOUT_MS }),
      logger: log,
      heartbeatDir: o.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR,
      onManifestWritten: (id, manifest) => disk.written(id, manifest),
      timers,
    });
    stops.push(() => unwatched.stopEvents());
    // Captures run at most MAX_CAPTURES_AT_ONCE at a time; see there.
    const actuators = coverage.wrap({
      ...unwatched,
      capture: limitConcurrency(MAX_CAPTURES_AT_ONCE, unwatched.capture),
      // The pod watch is started below; until then its first list is on its way anyway.
      listPods: () => observers?.listPods(),
    });
    const boot = await checkBoot(stateDir, log, o.bootIdFile);
    if (boot.rebooted) log.info({ bootId: boot.bootId, previous: boot.previous }, 'the node rebooted since the agent last ran');
    agent = new Agent<V1Pod>({
      rebooted: boot.rebooted,
      // Kept on disk so a restart keeps a hand-over's deadline; the agent waits for it before a retire.
      handovers,
      node: o.node,
      clock,
      timers,
      logger: log,
      actuators,
      // The parent key comes with the pod, worked out once by the pod observer (parentsOnNode).
      podInfo: (pod: V1Pod, p) => v1PodInfo(pod, specHashOf({ node: o.node, store }, parentId(p.namespace, p.key), p.key, pod)),
      hooks: {
        onBeatRefused: (_p, a) => {
          metrics.refusedBeats.inc({ channel: a.channel, why: a.why });
          metrics.badInputs.inc({ source: a.channel });
        },
        // Activations and collections are counted once done (a failed write or a refused
        // collection is none); a rewrite of a running copy, or of a manifest lost from outside, is no activation.
        onResult: (p, a, error) => {
          if (error !== null) return;
          if (a.type === 'activate' && !p.state.checkpoint.active && !p.state.manifestLost) metrics.activations.inc({ reason: a.reason.code });
          if (a.type === 'collect') metrics.collections.inc();
        },
        onTransition: (_p, a) => {
          if (a.to === 'HandingOver') metrics.handovers.inc({ result: 'started' });
          if (a.from === 'HandingOver' && a.to === 'Healthy') metrics.handovers.inc({ result: 'succeeded' });
          if (a.from === 'HandingOver' && a.to === 'Active') metrics.handovers.inc({ result: 'failed' });
          if (a.from === 'Active' && a.to === 'Healthy') metrics.retirements.inc();
          coverage.onTransition(_p, a, clock.now());
          status.poke();
        },
        onNote: (p, a) => {
          if (a.reason.code === 'ParentFenced') metrics.fences.inc({ namespace: p.namespace, parent: p.key });
          status.poke();
        },
        // A pass over every parent per decision was O(parents) each time: at 200 parents beating
        // every second, 200 x 200 view copies and 600 x 200 gauge sets a second (the agent's CPU and
        // its RSS sawtooth). Decisions in a burst share one pass, at most OBSERVE_COALESCE_MS late.
        onDecision: () => {
          if (observeQueued) return;
          observeQueued = true;
          timers.set(() => {
            observeQueued = false;
            metrics.observe(views(), clock.now());
            coverage.observe(views());
          }, OBSERVE_COALESCE_MS);
        },
        onForget: (id) => {
          metrics.forget(id);
          coverage.forget(id, ...(id.split('/') as [string, string]));
          status.poke();
        },
      },
    });
    const a = agent;
    calm = () => a.isApiReachable() && a.views().every((v) => !v.state.checkpoint.active && !['Silent', 'Active', 'HandingOver'].includes(v.state.state));

    // After a reboot the loop's first question is whether an api-server answers (the reboot rule,
    // src/core/boot.ts): ask it once now, beside the policy's first read, so the
    // checkpoints restored below are judged on the answer at once instead of after the observers'
    // first probe (about 0.5 s later on the real node). Never slower: that probe has the same timeout.
    const firstLook = boot.rebooted ? firstReadyz(kc) : null;

    reportStateProblem = (p) => {
      const message = p
        ? `the state folder ${stateDir} takes no writes (${p.code}: ${p.message}): the stored checkpoints still cover their parents; no new copy or hand-over record is kept until it does`
        : null;
      if (message) void actuators.nodeEvent({ type: 'event', eventType: 'Warning', reason: 'StateFolderNotWritable', message });
    };
    reportStateProblem(stateProblem);

    // 5. The policy (waits briefly for its first read; see run-policy.ts).
    const policy = await startPolicy({
      agent: a,
      metrics,
      pokeStatus: () => status.poke(),
      nodeEvent: (e, about) => actuators.nodeEvent(e, about),
      kubeConfig: kc,
      stateDir,
      namespace: o.namespace,
      podName: o.podName,
      log,
      clock,
      timers,
      ...(o.policyFile ? { policyFile: o.policyFile } : {}),
      ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
    });
    policySource = policy;
    stops.push(() => policy.stop());

    // 6. Recovery at start: stored and active checkpoints, hand-overs and verdicts on disk.
    if (firstLook) {
      const ok = await firstLook;
      log.info({ reachable: ok }, 'first look at the api-server after the reboot');
      a.api(ok);
    }
    await recoverFromDisk({ agent: a, disk, handovers, log });

    // 7. The observers (reachability, pods, Leases, the local folder) feed the loop.
    const self = new SelfCheckpoint({ node: o.node, podName: o.podName, namespace: o.namespace, store, manifests, kube: () => kube, logger: log });
    const obs = startObservers({
      node: o.node,
      agent: a,
      self,
      metrics,
      kubeConfig: kc,
      onUnreachable: () => {
        // A connection pool stuck to a dead endpoint is dropped, as the kubelet does.
        kube.close();
        kube = makeKubeClient(kc, { requestTimeoutMs: AGENT_REQUEST_TIMEOUT_MS });
      },
      // Events decided while the api-server did not answer (an activation at boot) go out now.
      onReachable: () => void unwatched.flushEvents(),
      pokeStatus: () => status.poke(),
      log,
      clock,
      timers,
      manifests: { manifests: (checks) => disk.manifests(checks), watch: watchManifestFolder(manifests.dir) },
      ...(o.heartbeatDir ? { heartbeatDir: o.heartbeatDir } : {}),
      ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}),
      ...(o.localPollMs ? { localPollMs: o.localPollMs } : {}),
      ...(o.apiProbeMs ? { apiProbeMs: o.apiProbeMs } : {}),
      ...(o.apiProbeCalmMs !== undefined ? { apiProbeCalmMs: o.apiProbeCalmMs } : {}),
    });
    observers = obs;
    stops.push(() => obs.stop());
    // After a reboot: has the node's kubelet reached an api-server in this boot? (src/core/boot.ts)
    if (boot.rebooted) {
      const kubelet = watchKubeletLease({
        node: o.node,
        log,
        timers,
        bootWallMs: await bootStartedAt(o.bootIdFile),
        read: (signal) => getNodeLease(kc, o.node, signal),
        onVerdict: (reached) => a.kubelet(reached),
      });
      kubelet.start();
      stops.push(() => kubelet.stop());
    }

    // 8. Periodic work: gauges between decisions; copies of a Healthy parent's secrets and tokens
    // (they go stale: tokens expire, secrets rotate; the store writes only what changed; a running
    // checkpoint is never re-captured this way, its tokens are renewed in place by `tokens`).
    const gauges = every(timers, METRICS_REFRESH_MS, () => {
      metrics.observe(views(), clock.now());
      coverage.observe(views());
    });
    stops.push(() => gauges.stop());
    // LAST SEEN in the status stays current, and a reader can tell a live report from a stale one.
    const reports = every(timers, STATUS_REFRESH_MS, () => status.poke());
    stops.push(() => reports.stop());
    const copies = every(timers, COPY_REFRESH_MS, () => {
      for (const v of a.views()) {
        const info = v.state.pod;
        if (v.state.state !== 'Healthy' || !info || !v.pod || v.state.checkpoint.specHash !== info.specHash) continue;
        actuators
          .capture(v, info, { code: 'RefreshCopies', message: 'refreshing the copied secrets and tokens' })
          .catch((e: Error) => log.warn({ parent: v.id, err: e.message }, 'refreshing the checkpoint copy failed; the previous copy stays'));
      }
    });
    stops.push(() => copies.stop());
    let expiriesSeen = '';
    stops.push(
      startTokenRefresh(tokens, timers, () => {
        const now = JSON.stringify([...tokens.expiries()]);
        if (now !== expiriesSeen) status.poke();
        expiriesSeen = now;
      }),
    );

    obs.start();
    log.info(
      {
        stateDir,
        manifestDir: manifests.dir,
        heartbeatDir: o.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR,
        policyValid: policy.isValid(),
        interval: formatDuration(policy.current().defaults.intervalMs),
      },
      'agent started',
    );

    const stop = () => {
      stopping ??= (async () => {
        log.info('stopping: observers first, then actions in flight; checkpoints stay as they are');
        await Promise.allSettled([obs.stop(), policy.stop()]);
        await a.stop();
        await status.flush().catch(() => {});
        await unwind();
        log.info('stopped');
      })();
      return stopping;
    };
    o.signal?.addEventListener('abort', () => void stop(), { once: true });
    return { agent: a, metrics, healthPort: health.port, stop, lost: held.lost, handedOver: held.handOver.then(() => undefined) };
  } catch (e) {
    // Startup failed or was aborted (o.signal): undo what was started, then report it.
    await unwind();
    throw e;
  }
}

/**
 * The agent: one turn at the node lock after another. A copy that hands the lock to its DaemonSet's
 * pod (run-lock.ts) stops acting, which releases the lock, and stands by again in the same process:
 * exiting instead would put the kubelet's crash-loop back-off between it and its next take-over
 * (when that pod goes). `agent`, `metrics` and `healthPort` are the current turn's; `lost` resolves
 * when a turn loses the lock or cannot start again.
 */
export async function runAgent(o: AgentRunOptions): Promise<RunningAgent> {
  const turns = new LockTurns(o.clock ?? monotonicClock);
  // Ends a turn still standing by when the agent is stopped.
  const ended = new AbortController();
  const signal = o.signal ? AbortSignal.any([o.signal, ended.signal]) : ended.signal;
  let current = await runAgentTurn({ ...o, signal }, turns);
  let stopped = false;
  let next: Promise<void> = Promise.resolve();
  let lose: () => void = () => {};
  const lost = new Promise<void>((r) => {
    lose = r;
  });
  const follow = (t: AgentTurn) => {
    void t.lost.then(() => {
      if (t === current) lose();
    });
    void t.handedOver.then(() => {
      if (stopped || t !== current) return;
      next = (async () => {
        o.logger.info('stopping to hand the node lock over; standing by again after');
        await t.stop();
        if (stopped) return;
        try {
          current = await runAgentTurn({ ...o, signal }, turns);
          follow(current);
        } catch (e) {
          if (stopped || signal.aborted) return; // stopped while standing by again (SIGTERM): not a failure
          o.logger.error({ err: (e as Error).message }, 'could not stand by again after handing the node lock over');
          lose();
        }
      })();
    });
  };
  follow(current);
  return {
    get agent() {
      return current.agent;
    },
    get metrics() {
      return current.metrics;
    },
    get healthPort() {
      return current.healthPort;
    },
    lost,
    async stop() {
      stopped = true;
      ended.abort(new Error('stopped'));
      await next;
      await current.stop();
    },
  };
}

/** One GET /readyz with the probe's timeout: true for a 200, false for anything else or no answer. */
function firstReadyz(kc: KubeConfig): Promise<boolean> {
  return getReadyz(kc, AbortSignal.timeout(API_PROBE_TIMEOUT_MS)).catch(() => false);
}
