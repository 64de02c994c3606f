// `lastseen agent`: wires the observers, the loop, the actuators, status, metrics and health into
// one process, and owns its lifetime: the node lock first, then recovery from the state folder,
// then the api-server observers; SIGTERM stops observing and waits for actions in flight, but
// never retires a checkpoint (a running copy of the api-server must survive the agent's restart).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ManifestDir } from '../checkpoint/manifests.js';
import { Store } from '../checkpoint/store.js';
import { beatFromFile, DEFAULT_HEARTBEAT_DIR } from '../channels/local.js';
import { beatFromPod } from '../channels/annotation.js';
import { type KubeClient, loadKubeConfig, makeKubeClient } from '../kube/client.js';
import { makeInformer } from '../kube/informer.js';
import { beatFromLease } from '../channels/lease.js';
import type { Condition } from '../kube/nodecheckpoint-types.js';
import { formatDuration } from '../policy/duration.js';
import { type EventTarget, kubeResolver, makeActuators, specHashOf } from './actuators.js';
import { Agent, type Clock, monotonicClock, realTimers, type Timers } from './agent.js';
import { serveHealth } from './health.js';
import { LOCK_RENEW_MS, LOCK_RETRY_MS, NodeLock } from './lock.js';
import { AgentMetrics } from './metrics.js';
import { API_PROBE_CALM_FACTOR, API_PROBE_INTERVAL_MS, API_PROBE_TIMEOUT_MS, probeApiServer } from './observe/api-probe.js';
import { watchLocalBeats } from './observe/local-beats.js';
import { configMapPolicySource, filePolicySource, POLICY_CONFIGMAP_NAME, type PolicySource } from './observe/policy-source.js';
import { leaseParent, localFileParent, parentsOnNode } from './parents.js';
import { isAgentCopy, SelfCheckpoint } from './self.js';
import { StatusWriter } from './status.js';
import { HandoverFile } from './handovers.js';
import { checkBoot } from './boot.js';
import { LastGoodPolicyFile } from './last-good-policy.js';
import { startTokenRefresh, TokenRefresher } from './token-refresh.js';

export const DEFAULT_STATE_DIR = '/var/lib/lastseen';
export const DEFAULT_MANIFEST_DIR = '/etc/kubernetes/manifests';
export const DEFAULT_HEALTH_PORT = 9870;
/** Api requests of the agent (live reads, captures, Events) give up after this long. */
export const AGENT_REQUEST_TIMEOUT_MS = 5_000;
/** Longest wait for the first policy read before starting with what is known (built-in defaults). */
export const FIRST_POLICY_WAIT_MS = 5_000;
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
   * Probe period while the pod and Lease watches are open and the api-server answers (issue 14):
   * default API_PROBE_CALM_FACTOR x the probe period; 0 probes at the probe period always.
   */
  apiProbeCalmMs?: number;
  logger: Logger;
  clock?: Clock;
  timers?: Timers;
}

export interface RunningAgent {
  agent: Agent;
  metrics: AgentMetrics;
  healthPort: number;
  stop(): Promise<void>;
  /** Resolves when the agent stops by itself (lost its lock); the CLI exits with code 1 then. */
  lost: Promise<void>;
}

export async function runAgent(o: AgentRunOptions): Promise<RunningAgent> {
  const log = o.logger;
  const clock = o.clock ?? monotonicClock;
  const timers = o.timers ?? realTimers;
  const stateDir = o.stateDir ?? DEFAULT_STATE_DIR;
  const metrics = new AgentMetrics();
  const stops: Array<() => Promise<void> | void> = [];
  let ready = false;
  let lockHeld = false;

  const listenHealth = async () => {
    const h = await serveHealth(o.healthPort ?? DEFAULT_HEALTH_PORT, o.healthHost ?? '0.0.0.0', {
      live: () => ({ ok: true, reason: '' }),
      ready: () =>
        lockHeld
          ? ready
            ? { ok: true, reason: '' }
            : { ok: false, reason: 'observers not synced yet' }
          : { ok: false, reason: 'standby: another agent holds the node lock' },
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

  // One acting agent per node: wait as a standby until the lock is ours.
  const lock = new NodeLock({ path: join(stateDir, 'agent.lock'), holder: `${o.podName}-${process.pid}` });
  for (let standby = false; !(await lock.tryAcquire()); standby = true) {
    if (!standby) log.info({ lock: join(stateDir, 'agent.lock'), holder: (await lock.readHolder())?.holder }, 'another agent holds the node lock; standing by');
    await new Promise((r) => timers.set(() => r(undefined), LOCK_RETRY_MS));
  }
  lockHeld = true;
  const health = early ?? (await listenHealth());
  let loseLock: () => void = () => {};
  const lost = new Promise<void>((r) => {
    loseLock = r;
  });
  let lockStopped = false; // a check still in flight at shutdown must not report a loss
  const renew = () => {
    lockTimer = timers.set(async () => {
      try {
        if (!(await lock.tryAcquire()) && !lockStopped) {
          log.error({ holder: (await lock.readHolder())?.holder }, 'lost the node lock to another agent; stopping');
          lockHeld = false;
          loseLock();
          return;
        }
      } catch (e) {
        log.warn({ err: (e as Error).message }, 'could not renew the node lock');
      }
      if (!lockStopped) renew();
    }, LOCK_RENEW_MS);
  };
  let lockTimer: unknown = null;
  renew();
  stops.push(async () => {
    lockStopped = true;
    timers.clear(lockTimer);
    await lock.release();
  });

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

  let policySource: PolicySource | null = null;
  let agent: Agent | null = null;
  const views = () => agent?.views() ?? [];
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
  const status = new StatusWriter({
    node: o.node,
    kubeConfig: kc,
    views,
    conditions,
    clock,
    timers,
    logger: log,
    tokensExpireAt: (id) => tokens.expiries().get(id),
  });
  stops.push(() => status.stop());

  const handovers = new HandoverFile(stateDir);
  const actuators = makeActuators({
    node: o.node,
    instance: o.podName,
    store,
    manifests,
    kube: () => kube,
    // Live reads on their own connections: a stalled pooled socket must not answer for the api-server.
    freshKube: () => makeKubeClient(kc, { requestTimeoutMs: AGENT_REQUEST_TIMEOUT_MS }),
    logger: log,
    heartbeatDir: o.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR,
  });
  const boot = await checkBoot(stateDir, log, o.bootIdFile);
  if (boot.rebooted) log.info({ bootId: boot.bootId, previous: boot.previous }, 'the node rebooted since the agent last ran');
  agent = new Agent({
    rebooted: boot.rebooted,
    // Kept on disk so a restart keeps a hand-over's deadline; the agent waits for it before a retire.
    handovers,
    node: o.node,
    clock,
    timers,
    logger: log,
    actuators,
    specHash: (pod) => {
      const md = (pod as V1Pod).metadata ?? {};
      const p = parentsOnNode([pod as V1Pod], o.node)
        .values()
        .next().value;
      return specHashOf({ node: o.node, store }, `${md.namespace}/${p?.key ?? md.name}`, p?.key ?? md.name ?? '', pod);
    },
    hooks: {
      onTransition: (_p, a) => {
        if (a.to === 'Active' && a.from !== 'Active') metrics.activations.inc({ reason: a.reason.code });
        if (a.to === 'HandingOver') metrics.handovers.inc({ result: 'started' });
        if (a.from === 'HandingOver' && a.to === 'Healthy') metrics.handovers.inc({ result: 'succeeded' });
        if (a.from === 'HandingOver' && a.to === 'Active') metrics.handovers.inc({ result: 'failed' });
        if (a.from === 'Active' && a.to === 'Healthy') metrics.retirements.inc();
        if (a.to === 'Orphaned') metrics.collections.inc();
        status.poke();
      },
      onNote: () => status.poke(),
      onDecision: () => metrics.observe(views(), clock.now()),
      onForget: (id) => {
        metrics.forget(id);
        status.poke();
      },
    },
  });
  const a = agent;

  // Policy: a mounted file, or the ConfigMap. The last good one is kept in the state folder, so a
  // missing policy (or a restart without an api-server) keeps it instead of the built-in defaults.
  const lastGoodFile = new LastGoodPolicyFile(stateDir);
  const persisted = await lastGoodFile.load();
  if (persisted && !persisted.ok) log.warn({ file: lastGoodFile.path, reason: persisted.reason }, 'persisted last good policy not usable; ignoring it');
  else if (persisted) log.info({ file: lastGoodFile.path }, 'read the persisted last good policy');
  const lastGood = persisted?.ok ? { policy: persisted.policy, origin: `persisted ${lastGoodFile.path}` } : null;
  let firstPolicy: () => void = () => {};
  // Policy Events go where an operator looks for the policy: on the ConfigMap it came from, or on
  // the agent's own pod when it reads a file.
  const policyEventTarget: EventTarget = o.policyFile
    ? { apiVersion: 'v1', kind: 'Pod', name: o.podName, namespace: o.namespace }
    : { apiVersion: 'v1', kind: 'ConfigMap', name: POLICY_CONFIGMAP_NAME, namespace: o.namespace };
  const onPolicy = (policy: Parameters<Agent['setPolicy']>[0], origin: string, text?: string) => {
    firstPolicy();
    metrics.policyValid.set(1);
    log.info({ origin }, 'policy applied');
    a.setPolicy(policy);
    if (text === undefined) return;
    metrics.policyMissing.set(0);
    status.poke();
    lastGoodFile
      .save(text)
      .catch((e: Error) =>
        log.warn(
          { file: lastGoodFile.path, err: e.message },
          'could not persist the last good policy; a restart while the policy is missing would use an older one',
        ),
      );
  };
  const onMissing = (origin: string, using: 'last-good' | 'defaults') => {
    firstPolicy();
    metrics.policyMissing.set(1);
    const message =
      using === 'last-good'
        ? `no policy at ${origin}: keeping the last good policy (persisted in ${lastGoodFile.path}), not the built-in defaults; restore the policy to change it`
        : `no policy at ${origin} and no last good one: using the built-in defaults; create the policy to change them`;
    void actuators.nodeEvent({ type: 'event', eventType: 'Warning', reason: 'PolicyMissing', message }, policyEventTarget);
    status.poke();
  };
  const onInvalid = (errors: Array<{ path: string; message: string }>, origin: string) => {
    firstPolicy();
    metrics.policyValid.set(0);
    log.warn({ origin, errors }, 'policy refused; the last valid policy stays in force');
    const message = `policy from ${origin} refused (${errors.length} error(s)): ${errors
      .slice(0, 5)
      .map((e) => `${e.path}: ${e.message}`)
      .join('; ')}`;
    void actuators.nodeEvent({ type: 'event', eventType: 'Warning', reason: 'PolicyRefused', message }, policyEventTarget);
    status.poke();
  };
  policySource = o.policyFile
    ? filePolicySource({ path: o.policyFile, log, timers, onPolicy, onInvalid, onMissing, lastGood })
    : configMapPolicySource({
        kubeConfig: kc,
        namespace: o.namespace,
        log,
        clock,
        timers,
        onPolicy,
        onInvalid,
        onMissing,
        lastGood,
        ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}),
      });
  policySource.start();
  // Parents are judged with the policy they will live under: wait (briefly) for its first read, so
  // a parent is not given the built-in grace because the ConfigMap answered a moment late.
  await new Promise<void>((resolve) => {
    const timer = timers.set(resolve, FIRST_POLICY_WAIT_MS);
    firstPolicy = () => {
      timers.clear(timer); // or a prompt SIGTERM would wait out this timer
      resolve();
    };
  });
  firstPolicy = () => {};
  a.setPolicy(policySource.current());
  stops.push(() => policySource?.stop());

  // Recover what is on disk: stored checkpoints, and which of them are active right now.
  const handoverProblem = await handovers.load();
  if (handoverProblem) log.warn({ reason: handoverProblem }, 'hand-over file unreadable');
  const listed = await store.list();
  for (const p of listed.problems) log.warn({ checkpoint: p.id, reason: p.reason }, 'checkpoint on disk is not usable');
  const active = new Set(await manifests.active());
  for (const c of listed.checkpoints) {
    // The agent's own copy is kept by SelfCheckpoint, always active, never judged by the core.
    if (isAgentCopy(c.capture.manifest.metadata?.labels)) continue;
    const [namespace, key] = c.id.split('/') as [string, string];
    a.restore(
      namespace,
      key,
      { stored: true, active: active.has(c.id), specHash: c.capture.specHash },
      c.capture.manifest.metadata?.labels ?? {},
      handovers.recovered(c.id),
    );
  }
  log.info({ checkpoints: listed.checkpoints.length, active: [...active] }, 'recovered from the state folder');

  // The api-server's reachability, by its own /readyz: every probe period, or every calm period
  // while the watches below are open (their health is evidence too; a broken one nudges the probe).
  let watchesOpen = (): boolean => false;
  const probeMs = o.apiProbeMs || API_PROBE_INTERVAL_MS;
  const calmMs = o.apiProbeCalmMs ?? probeMs * API_PROBE_CALM_FACTOR;
  const probe = probeApiServer({
    kubeConfig: kc,
    log,
    timers,
    ...(o.apiProbeMs ? { intervalMs: o.apiProbeMs, timeoutMs: Math.min(API_PROBE_TIMEOUT_MS, Math.floor(o.apiProbeMs * 0.8)) } : {}),
    ...(calmMs > probeMs ? { calmIntervalMs: calmMs, calm: () => watchesOpen() } : {}),
    onReachable: (ok: boolean) => {
      metrics.apiReachable.set(ok ? 1 : 0);
      if (!ok) {
        // A connection pool stuck to a dead endpoint is dropped, as the kubelet does.
        kube.close();
        kube = makeKubeClient(kc, { requestTimeoutMs: AGENT_REQUEST_TIMEOUT_MS });
      }
      a.api(ok);
      if (ok) publishPods();
      status.poke();
    },
  });
  probe.start();
  stops.push(() => probe.stop());

  // Pods of this node: who the parents are (and their annotation beats).
  let podsSynced = false;
  const pods = makeInformer<V1Pod>({
    name: `pods of ${o.node}`,
    kubeConfig: kc,
    path: '/api/v1/pods',
    fieldSelector: `spec.nodeName=${o.node}`,
    log,
    clock,
    timers,
    ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}),
    onAdd: (pod) => podChanged(pod),
    onUpdate: (pod) => podChanged(pod),
    onDelete: () => publishPods(),
    onSynced: () => {
      podsSynced = true;
      publishPods();
      ready = podsSynced && leasesSynced;
    },
    // Collections rest on this watch's word that no pod is scheduled here: after any failure the
    // agent stops counting towards GC at once, and the watch comes back with a fresh list.
    relistAfterFailure: true,
    onHealth: (ok, reason) => {
      metrics.watchHealthy.set({ resource: 'pods' }, ok ? 1 : 0);
      if (!ok) probe.nudge();
      if (!ok) agent?.schedulingUnknown(`pod watch failed: ${reason}`);
    },
  });
  const podChanged = (pod: V1Pod) => {
    const ann = pod.metadata?.annotations ?? {};
    if (ann['lastseen.dev/last-seen'] !== undefined) {
      const r = beatFromPod(pod, o.node);
      const parent = parentsOnNode([pod], o.node).values().next().value;
      if (r.ok && parent) a.beat(parent.namespace, parent.key, r.beat);
      else if (!r.ok) badInput('annotation', r.reason);
    }
    publishPods();
  };
  const self = new SelfCheckpoint({ node: o.node, podName: o.podName, namespace: o.namespace, store, manifests, kube: () => kube, logger: log });
  const publishPods = () => {
    if (!podsSynced || !a.isApiReachable()) return;
    const own = pods.list().find((p) => self.isOwnDaemonSetPod(p));
    if (own) void self.refresh(own);
    a.podsObserved(parentsOnNode(pods.list(), o.node));
  };
  stops.push(() => pods.stop());

  // Leases of this node: the lease channel.
  let leasesSynced = false;
  const leases = makeInformer<V1Lease>({
    name: `leases of ${o.node}`,
    kubeConfig: kc,
    path: '/apis/coordination.k8s.io/v1/leases',
    labelSelector: `lastseen.dev/node=${o.node}`,
    log,
    clock,
    timers,
    ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}),
    onAdd: (l) => leaseChanged(l),
    onUpdate: (l) => leaseChanged(l),
    onSynced: () => {
      leasesSynced = true;
      ready = podsSynced && leasesSynced;
    },
    onHealth: (ok) => {
      metrics.watchHealthy.set({ resource: 'leases' }, ok ? 1 : 0);
      if (!ok) probe.nudge();
    },
  });
  watchesOpen = () => pods.isHealthy() && leases.isHealthy();
  const leaseChanged = (l: V1Lease) => {
    const parent = leaseParent(l as never, o.node);
    const r = beatFromLease(l, o.node);
    if (!r.ok || !parent) return badInput('lease', r.ok ? `Lease ${l.metadata?.namespace}/${l.metadata?.name} has no parent label` : r.reason);
    a.beat(parent.namespace, parent.key, r.beat);
  };
  stops.push(() => leases.stop());

  // The local heartbeat folder: the channel that works without an api-server.
  const local = watchLocalBeats({
    dir: o.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR,
    ...(o.localPollMs ? { pollMs: o.localPollMs } : {}),
    log,
    timers,
    onFile: (name, text) => {
      const parent = localFileParent(name);
      if (!parent) return badInput('local', `${name}: not a heartbeat file name (<namespace>_<key>.json)`);
      const r = beatFromFile(text, { node: o.node, namespace: parent.namespace, key: parent.key, role: parent.role });
      if (!r.ok) return badInput('local', `${name}: ${r.reason}`);
      a.beat(parent.namespace, parent.key, r.beat);
    },
    onRemoved: () => {},
  });
  stops.push(() => local.stop());

  const badLogged = new Map<string, number>();
  function badInput(source: 'lease' | 'annotation' | 'local', reason: string): void {
    metrics.badInputs.inc({ source });
    const last = badLogged.get(reason);
    if (last !== undefined && clock.now() - last < 60_000) return; // once a minute per reason
    badLogged.set(reason, clock.now());
    log.warn({ source, reason }, 'ignored a malformed or foreign heartbeat');
  }

  const refresh = () => {
    metricsTimer = timers.set(() => {
      metrics.observe(views(), clock.now());
      refresh();
    }, METRICS_REFRESH_MS);
  };
  let metricsTimer: unknown = null;
  refresh();
  stops.push(() => timers.clear(metricsTimer));

  // Copies of secrets and service-account tokens go stale (tokens expire, secrets rotate): while
  // the parent is Healthy, re-capture its checkpoint on a timer. The store writes only what changed.
  // A running checkpoint is never re-captured this way (its parent is not Healthy, and a swapped
  // folder would not reach its mounts): its tokens are renewed in place by `tokens` below.
  const refreshCopies = () => {
    copiesTimer = timers.set(() => {
      for (const v of a.views()) {
        const info = v.state.pod;
        if (v.state.state !== 'Healthy' || !info || !v.pod || v.state.checkpoint.specHash !== info.specHash) continue;
        actuators
          .capture(v, info, { code: 'RefreshCopies', message: 'refreshing the copied secrets and tokens' })
          .catch((e: Error) => log.warn({ parent: v.id, err: e.message }, 'refreshing the checkpoint copy failed; the previous copy stays'));
      }
      refreshCopies();
    }, COPY_REFRESH_MS);
  };
  let copiesTimer: unknown = null;
  refreshCopies();
  stops.push(() => timers.clear(copiesTimer));
  let expiriesSeen = '';
  stops.push(
    startTokenRefresh(tokens, timers, () => {
      const now = JSON.stringify([...tokens.expiries()]);
      if (now !== expiriesSeen) status.poke();
      expiriesSeen = now;
    }),
  );

  pods.start();
  leases.start();
  local.start();
  log.info(
    {
      stateDir,
      manifestDir: manifests.dir,
      heartbeatDir: o.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR,
      policyValid: policySource.isValid(),
      interval: formatDuration(policySource.current().defaults.intervalMs),
    },
    'agent started',
  );

  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      log.info('stopping: observers first, then actions in flight; checkpoints stay as they are');
      ready = false;
      await Promise.allSettled([pods.stop(), leases.stop(), local.stop(), probe.stop(), policySource?.stop()]);
      await a.stop();
      await status.flush().catch(() => {});
      for (const s of stops.reverse()) await Promise.resolve(s()).catch(() => {});
      log.info('stopped');
    })();
    return stopping;
  };
  return { agent: a, metrics, healthPort: health.port, stop, lost };
}
