// The observers (a piece of `runAgent`): everything the agent learns comes in here and goes to the
// loop (`Agent`): the api-server's reachability (/readyz, slower while the watches are open), the
// pods of this node (who the parents are, their annotation beats), the Leases of this node (the
// lease channel), and the local heartbeat folder (the channel that works without an api-server).
// Malformed or foreign beats are counted and logged once a minute per reason, never acted on.
import type { KubeConfig, V1Lease, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { beatFromPod } from '../channels/annotation.js';
import { beatFromLease } from '../channels/lease.js';
import { beatFromFile, DEFAULT_HEARTBEAT_DIR } from '../channels/local.js';
import type { Clock, Timers } from '../core/time.js';
import type { Beat, PodRef } from '../core/types.js';
import { type Informer, makeInformer } from '../kube/informer.js';
import type { Agent, ObservedParent } from './agent.js';
import type { AgentMetrics } from './metrics.js';
import { API_PROBE_CALM_FACTOR, API_PROBE_INTERVAL_MS, API_PROBE_TIMEOUT_MS, probeApiServer } from './observe/api-probe.js';
import { watchLocalBeats } from './observe/local-beats.js';
import { type ManifestReader, watchManifests } from './observe/manifests.js';
import { deletingOnNode, leaseParent, localFileParent, type ParentPod, parentsOnNode } from './parents.js';
import type { SelfCheckpoint } from './self.js';

/** After the api-server returns, how long the loop waits for the watches to list again before it hears so anyway. */
export const RESYNC_WAIT_MS = 15_000;

export interface ObserverWiring {
  node: string;
  agent: Agent<V1Pod>;
  self: SelfCheckpoint;
  metrics: AgentMetrics;
  kubeConfig: KubeConfig;
  /** Called when the api-server is judged unreachable (the caller drops its connection pool). */
  onUnreachable(): void;
  /** Called when the api-server is judged reachable again (the caller sends the Events it kept). */
  onReachable?(): void;
  pokeStatus(): void;
  heartbeatDir?: string;
  /** The kubelet's folder as the manifest observer reads it (src/agent/observe/manifests.ts). */
  manifests: ManifestReader;
  manifestPollMs?: number;
  watchdogMs?: number;
  localPollMs?: number;
  apiProbeMs?: number;
  apiProbeCalmMs?: number;
  log: Logger;
  clock: Clock;
  timers: Timers;
}

export interface Observers {
  start(): void;
  stop(): Promise<void>;
  /** Both watches have listed once (the agent's readiness). */
  synced(): boolean;
  /** List the node's pods afresh (the pod watch re-opened, whatever it was doing): Actuators.listPods. */
  listPods(): void;
}

/** A beat decoded at the edge, with the parent it is for; or why it was refused, and what it came from. */
export type ObservedBeat = { ok: true; namespace: string; key: string; beat: Beat } | { ok: false; reason: string; subject: string };

export interface ObserverFeedWiring<P> {
  agent: Agent<P>;
  node: string;
  /** This node's parents as the pod watch last listed them, by parent id (the key worked out once). */
  parents(): Map<string, ObservedParent<P>>;
  /** Of the keys with no live pod listed here, the pod being deleted (deletingOnNode), by parent id. */
  deleting?(): ReadonlyMap<string, PodRef>;
  /** A malformed or foreign beat: counted and logged by the caller, never acted on. */
  badInput(source: 'lease' | 'annotation' | 'local', reason: string, subject: string): void;
  /** A reachability verdict, before the loop hears it (production drops its connection pool here). */
  onVerdict?(reachable: boolean): void;
  /** Before the pods are handed to the loop (production refreshes its own copy from its DaemonSet pod). */
  beforePublish?(): void;
  /** After the loop heard a verdict (production writes its status). */
  afterVerdict?(): void;
}

/**
 * What the observers tell the loop, and in which order: production's informers, probe and folder
 * watch call it, and so do the simulator's model watches (src/sim/lastseen.ts), so the random
 * sweeps run this ordering and gating. Pods reach the loop only once their watch has listed. While
 * the api-server is judged unreachable they say only which pods may beat for a key (a surge's new
 * pod, heard by a watch that outlasts a probe too impatient for a slow api-server), nothing about
 * what is scheduled now; a reachable verdict hands the pods over again at once, in full.
 */
export interface ObserverFeed {
  reachable(ok: boolean): void;
  /** The pod watch listed (or listed again after a failure). */
  podsListed(): void;
  /** A pod was added, changed or deleted; `annotation`: the beat it carries, decoded. */
  podsChanged(annotation?: ObservedBeat): void;
  /** The pod watch failed: nothing is collected on its word until it lists again. */
  podsFailed(reason: string): void;
  leaseBeat(r: ObservedBeat): void;
  /** A local heartbeat file's new text (the folder observer dedups unchanged files). */
  localFile(name: string, text: string): void;
  /** The pod watch has listed. */
  podsSynced(): boolean;
}

export function observerFeed<P>(f: ObserverFeedWiring<P>): ObserverFeed {
  const a = f.agent;
  let podsSynced = false;
  const publishPods = () => {
    if (!podsSynced) return;
    // While the api-server is judged unreachable the loop takes the list as identity only
    // (Agent.podsObserved): a surge's new pod beating beside the old one is the parent's.
    if (a.isApiReachable()) f.beforePublish?.();
    a.podsObserved(f.parents(), f.deleting?.());
  };
  const beat = (source: 'lease' | 'annotation', r: ObservedBeat) => {
    if (r.ok) a.beat(r.namespace, r.key, r.beat);
    else f.badInput(source, r.reason, r.subject);
  };
  return {
    reachable(ok) {
      f.onVerdict?.(ok);
      a.api(ok);
      if (ok) publishPods();
      f.afterVerdict?.();
    },
    podsListed() {
      podsSynced = true;
      publishPods();
    },
    podsChanged(annotation) {
      if (annotation) beat('annotation', annotation);
      publishPods();
    },
    podsFailed(reason) {
      a.schedulingUnknown(`pod watch failed: ${reason}`);
    },
    leaseBeat: (r) => beat('lease', r),
    localFile(name, text) {
      const parent = localFileParent(name);
      if (!parent) return f.badInput('local', `${name}: not a heartbeat file name (<namespace>_<key>.json)`, name);
      const r = beatFromFile(text, { node: f.node, namespace: parent.namespace, key: parent.key, role: parent.role });
      if (!r.ok) return f.badInput('local', `${name}: ${r.reason}`, name);
      a.beat(parent.namespace, parent.key, r.beat);
    },
    podsSynced: () => podsSynced,
  };
}

export function startObservers(w: ObserverWiring): Observers {
  const { agent: a, metrics, log, clock, timers, node } = w;
  const watch = w.watchdogMs ? { watchdogMs: w.watchdogMs } : {};

  const badLogged = new Map<string, number>();
  // Once a minute per object (Lease, pod, file), not per reason: a bad writer's every write differs.
  const badInput = (source: 'lease' | 'annotation' | 'local', reason: string, subject: string): void => {
    metrics.badInputs.inc({ source });
    const key = `${source}:${subject}`;
    const last = badLogged.get(key);
    if (last !== undefined && clock.now() - last < 60_000) return;
    if (badLogged.size >= 1000) badLogged.clear();
    badLogged.set(key, clock.now());
    log.warn({ source, reason }, 'ignored a malformed or foreign heartbeat');
  };

  // The api-server's reachability, by its own /readyz: every probe period, or every calm period
  // while the watches below are open (their health is evidence too; a broken one nudges the probe).
  let watchesOpen = (): boolean => false;
  const probeMs = w.apiProbeMs || API_PROBE_INTERVAL_MS;
  const calmMs = w.apiProbeCalmMs ?? probeMs * API_PROBE_CALM_FACTOR;
  const probe = probeApiServer({
    kubeConfig: w.kubeConfig,
    log,
    timers,
    ...(w.apiProbeMs ? { intervalMs: w.apiProbeMs, timeoutMs: Math.min(API_PROBE_TIMEOUT_MS, Math.floor(w.apiProbeMs * 0.8)) } : {}),
    ...(calmMs > probeMs ? { calmIntervalMs: calmMs, calm: () => watchesOpen() } : {}),
    onReachable: (ok: boolean) => verdict(ok),
  });

  // After an outage a watch opened before it may be dead without knowing it (its 410 can come
  // seconds later), and the loop would judge parents from a stale cache once their startupGrace
  // ends. So both watches list afresh before the loop hears that the api-server is back (its grace
  // starts then); if they cannot within RESYNC_WAIT_MS, it hears anyway.
  let told: boolean | null = null;
  let returning: { pods: boolean; leases: boolean; timer: unknown } | null = null;
  const tell = (ok: boolean) => {
    if (returning) timers.clear(returning.timer);
    returning = null;
    told = ok;
    feed.reachable(ok);
  };
  const verdict = (ok: boolean) => {
    if (!ok || told !== false) return tell(ok);
    if (returning) return;
    returning = {
      pods: false,
      leases: false,
      timer: timers.set(() => {
        log.warn({ waitedMs: RESYNC_WAIT_MS }, 'the watches did not list again after the api-server returned; going on without');
        tell(true);
      }, RESYNC_WAIT_MS),
    };
    log.info('api-server back: the watches list afresh before any parent is judged from them');
    pods.resync();
    leases.resync();
  };
  const relisted = (which: 'pods' | 'leases') => {
    if (!returning) return;
    returning[which] = true;
    if (returning.pods && returning.leases) tell(true);
  };

  // Pods of this node: who the parents are (and their annotation beats). Each parent's key is
  // worked out once per change of the list (parentsOnNode), for the loop and for the beats alike.
  let leasesSynced = false;
  let listing: Map<string, ParentPod> | null = null;
  const listed = (): Map<string, ParentPod> => (listing ??= parentsOnNode(pods.list(), node));
  const pods: Informer<V1Pod> = makeInformer<V1Pod>({
    name: `pods of ${node}`,
    kubeConfig: w.kubeConfig,
    path: '/api/v1/pods',
    fieldSelector: `spec.nodeName=${node}`,
    log,
    clock,
    timers,
    ...watch,
    onAdd: (pod) => podChanged(pod),
    onUpdate: (pod) => podChanged(pod),
    onDelete: () => {
      listing = null;
      feed.podsChanged();
    },
    onSynced: () => {
      listing = null;
      feed.podsListed();
      relisted('pods');
    },
    // Collections rest on this watch's word that no pod is scheduled here: after any failure the
    // agent stops counting towards GC at once, and the watch comes back with a fresh list.
    relistAfterFailure: true,
    onHealth: (ok, reason) => {
      metrics.watchHealthy.set({ resource: 'pods' }, ok ? 1 : 0);
      if (!ok) probe.nudge();
      if (!ok) feed.podsFailed(reason);
    },
  });
  const podChanged = (pod: V1Pod): void => {
    listing = null;
    const ann = pod.metadata?.annotations ?? {};
    if (ann['lastseen.dev/last-seen'] === undefined) {
      feed.podsChanged();
      return;
    }
    const r = beatFromPod(pod, node);
    // The parent this pod is listed under (itself, or beside a newer pod of its key).
    const uid = pod.metadata?.uid;
    const parent = [...listed().values()].find((p) => p.pod.metadata?.uid === uid || p.alsoListed?.some((o) => o.uid === uid));
    if (r.ok && parent) feed.podsChanged({ ok: true, namespace: parent.namespace, key: parent.key, beat: r.beat });
    else if (!r.ok) feed.podsChanged({ ok: false, reason: r.reason, subject: `${pod.metadata?.namespace}/${pod.metadata?.name}` });
    else feed.podsChanged();
  };
  const feed: ObserverFeed = observerFeed<V1Pod>({
    agent: a,
    node,
    parents: listed,
    deleting: () => deletingOnNode(pods.list(), node, listed()),
    badInput,
    onVerdict: (ok) => {
      metrics.apiReachable.set(ok ? 1 : 0);
      if (!ok) w.onUnreachable();
      else w.onReachable?.();
    },
    beforePublish: () => {
      const own = pods.list().find((p) => w.self.isOwnDaemonSetPod(p));
      if (own) void w.self.refresh(own);
    },
    afterVerdict: () => w.pokeStatus(),
  });

  // Leases of this node: the lease channel.
  const leases = makeInformer<V1Lease>({
    name: `leases of ${node}`,
    kubeConfig: w.kubeConfig,
    path: '/apis/coordination.k8s.io/v1/leases',
    labelSelector: `lastseen.dev/node=${node}`,
    log,
    clock,
    timers,
    ...watch,
    onAdd: (l) => leaseChanged(l),
    onUpdate: (l) => leaseChanged(l),
    onSynced: () => {
      leasesSynced = true;
      relisted('leases');
    },
    onHealth: (ok) => {
      metrics.watchHealthy.set({ resource: 'leases' }, ok ? 1 : 0);
      if (!ok) probe.nudge();
    },
  });
  watchesOpen = () => pods.isHealthy() && leases.isHealthy();
  const leaseChanged = (l: V1Lease) => {
    const parent = leaseParent(l, node);
    const r = beatFromLease(l, node);
    const subject = `${l.metadata?.namespace}/${l.metadata?.name}`;
    if (!r.ok || !parent) return feed.leaseBeat({ ok: false, reason: r.ok ? `Lease ${subject} has no parent label` : r.reason, subject });
    feed.leaseBeat({ ok: true, namespace: parent.namespace, key: parent.key, beat: r.beat });
  };

  // The local heartbeat folder: the channel that works without an api-server.
  const local = watchLocalBeats({
    dir: w.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR,
    ...(w.localPollMs ? { pollMs: w.localPollMs } : {}),
    log,
    timers,
    onFile: (name, text) => feed.localFile(name, text),
    onRemoved: () => {},
  });

  // The kubelet's folder: an active checkpoint's manifest removed or changed from outside is written again.
  const manifests = watchManifests({
    subject: a,
    reader: w.manifests,
    ...(w.manifestPollMs ? { pollMs: w.manifestPollMs } : {}),
    log,
    timers,
  });

  return {
    start() {
      probe.start();
      pods.start();
      leases.start();
      local.start();
      manifests.start();
    },
    async stop() {
      await Promise.allSettled([pods.stop(), leases.stop(), local.stop(), probe.stop(), manifests.stop()]);
    },
    synced: () => feed.podsSynced() && leasesSynced,
    listPods: () => pods.resync(),
  };
}
