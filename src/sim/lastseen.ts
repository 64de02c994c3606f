// The lastseen strategy: the production agent (`Agent`, src/agent/agent.ts) on one simulated node,
// with production's recovery (recoverFromDisk), hand-over record (HandoverRecords), api-server
// probe (probeApiServer), folder observer (watchLocalBeats) and observer ordering (observerFeed).
// Only adapters are here, each behind the interface production defines:
// - Timers: the node's monotonic clock and the simulator's event queue (a timer fires at the true
//   time its monotonic delay ends on this node, never sooner than 1 ms, like Node's);
// - HandoverStore: the node disk's handovers.json; CheckpointDisk: its checkpoints and manifests;
// - BeatFolder: the node's tmpfs, each beat as the local channel writes it, with the folder's
//   change notification a moment after a write;
// - the probe's GET /readyz: a model answer a round trip later;
// - ObserverFeed's sources: model pod and Lease watches (a round trip late, deaf while the watch is
//   stalled, listing again after a reconnect, as an informer does);
// - Actuators: the node's disk and the model api-server, each taking a small latency.
// A dead process (reboot, restart) runs nothing more: its timers and pending actions check
// `alive()` and are dropped, as the kernel drops a killed process's.
import type { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { type Actuators, Agent, CollectRefusedError, type LiveRead, type ObservedParent, type ParentView, type Timers } from '../agent/agent.js';
import { isReboot } from '../agent/boot.js';
import { fenceThroughSidecar } from '../agent/fence.js';
import { HandoverRecords } from '../agent/handovers.js';
import { probeApiServer } from '../agent/observe/api-probe.js';
import { type NodeLeaseRead, watchKubeletLease } from '../agent/observe/kubelet-lease.js';
import { type BeatFolder, watchLocalBeats } from '../agent/observe/local-beats.js';
import { watchManifests } from '../agent/observe/manifests.js';
import { deletingPodOf, localFileParent, parentPodOf } from '../agent/parents.js';
import { type ObserverFeed, observerFeed } from '../agent/run-observers.js';
import { type CheckpointDisk, recoverFromDisk } from '../agent/run-recover.js';
import { localBeatText } from '../channels/local.js';
import { copyGraceSeconds } from '../checkpoint/sanitize.js';
import type { ManifestFile } from '../core/manifest.js';
import { leaseName, manifestFile, parentId } from '../core/names.js';
import type { Beat, Channel, PodInfo, PodRef } from '../core/types.js';
import { applyPatch, BUILTIN_DEFAULTS, type ParentPolicy, type Policy } from '../policy/policy.js';
import type { PartialParentPolicyRaw } from '../policy/schema.js';
import type { ApiPod, StoredBeat } from './apiserver.js';
import { agentFencePorts } from './fence-folder.js';
import { type Manifest, type SimNode, T } from './model.js';
import { arrivalInOrder } from './network.js';
import type { Scheduled } from './queue.js';
import type { ParentDef } from './schema.js';
import type { AgentProcess } from './strategies.js';
import type { World } from './world.js';

const API_CHANNELS: Channel[] = ['lease', 'annotation'];
/** The hand-over record's file in the state folder (node.disk.handovers). */
export const HANDOVER_FILE = 'handovers.json';

/**
 * The model's probe settings: every T.agentProbeMs, one failed probe says "unreachable", as the
 * simulator has always modelled the agent. Production's defaults (API_PROBE_INTERVAL_MS,
 * API_FAILURE_THRESHOLD: 3 failures 5 s apart) notice an outage about 10 s later; the figures of
 * the named scenarios move with them (master-reboot's parentServedAt p50 too), so changing the
 * model is a decision of its own.
 */
const PROBE_FAILURE_THRESHOLD = 1;
/** Below the period, as the probe requires; the model's /readyz answers within a round trip. */
const PROBE_TIMEOUT_MS = 1_000;

/** The agent's own logs stay out of the timeline: transitions and actions are drawn from the hooks. */
const SILENT = pino({ level: 'silent' });

/** A pod as the agent's observers hand it over (the shape of a V1Pod the agent reads). */
interface PodObject {
  metadata: { uid: string; name: string; namespace: string };
  sim: ApiPod;
}

/**
 * The model pod as the agent's pod reader gives it to the core: no status (the model's pods have
 * none), so nothing is said about the pod's Ready condition.
 */
function simPodInfo(pod: PodObject): PodInfo {
  const { restarts, lastExitUnknown, lastExitRanMs } = pod.sim;
  return {
    uid: pod.metadata.uid,
    name: pod.metadata.name,
    specHash: pod.sim.spec.hash,
    restarts,
    ...(lastExitUnknown ? { lastExitUnknown: true } : {}),
    ...(lastExitRanMs !== null ? { lastExitRanMs } : {}),
  };
}

/** The scenario's per-parent policies as one policy document: defaults plus one override per parent. */
export function scenarioPolicy(defs: ParentDef[]): Policy {
  const patch = (p: ParentPolicy): PartialParentPolicyRaw => ({
    interval: p.intervalMs,
    window: p.windowMs,
    startupGrace: p.startupGraceMs,
    startTimeout: p.startTimeoutMs,
    handoverTimeout: p.handoverTimeoutMs,
    handoverBackoff: { initial: p.handoverBackoff.initialMs, max: p.handoverBackoff.maxMs },
    gcGrace: p.gcGraceMs,
    whenApiUnreachable: p.whenApiUnreachable,
    handover: p.handover,
    ...(p.redirect ? { redirect: { ...p.redirect } } : {}),
    channels: [...p.channels],
  });
  return {
    defaults: applyPatch(BUILTIN_DEFAULTS, {}),
    overrides: defs.map((d) => ({ name: `scenario/${d.key}`, selector: { namespaces: [d.namespace], parentKeys: [d.key] }, patch: patch(d.policy) })),
  };
}

export class SimLastseen implements AgentProcess {
  readonly agent: Agent<PodObject>;
  private readonly handovers: HandoverRecords;
  /** Production's observer logic (src/agent/run-observers.ts); the model watches below feed it. */
  private readonly feed: ObserverFeed;
  /** When the watch's last event reaches this agent (true time). */
  private watchArrivesAt = 0;
  /** A folder scan is queued after a change notification (several writes in a moment share one). */
  private scanQueued = false;
  /** The folder observer's change notification (production's watchLocalBeats over `beatFolder`). */
  private folderChanged: (() => void) | null = null;
  /** A beat file's text, made once per beat the sidecar wrote. */
  private readonly fileText = new WeakMap<Beat, Buffer>();
  /** The manifest this process last wrote per parent id (production's `NodeCheckpointDisk.written`). */
  private readonly wrote = new Map<string, Manifest>();
  /** The manifest observer's change notification (production's watchManifests over the node disk). */
  private manifestsChanged: (() => void) | null = null;

  /** The node rebooted since the last agent ran (production's checkBoot over the model's boot ids). */
  private readonly rebooted: boolean;

  constructor(
    private readonly world: World,
    private readonly node: SimNode,
    private readonly alive: () => boolean,
  ) {
    const w = world;
    const rebooted = isReboot(node.bootId, node.disk.agentBootId);
    this.rebooted = rebooted;
    node.disk.agentBootId = node.bootId;
    const clock = { now: () => node.clock.mono(w.q.now) };
    // The state folder's hand-over record, kept by production's HandoverRecords on the node's disk.
    this.handovers = new HandoverRecords(
      {
        where: `${node.name}:${HANDOVER_FILE}`,
        read: () => this.settled(node.disk.handovers.get(HANDOVER_FILE) ?? null),
        write: (text) => {
          node.disk.handovers.set(HANDOVER_FILE, text);
          return this.settled(undefined);
        },
      },
      () => node.clock.wall(w.q.now),
    );
    const timers: Timers = {
      set: (fn, ms) => w.q.at(Math.max(w.q.now + 1, Math.ceil(node.clock.trueAt(clock.now() + ms))), () => this.enter(fn)),
      clear: (h) => (h as Scheduled | null)?.cancel(),
    };
    this.agent = new Agent<PodObject>({
      node: node.name,
      clock,
      timers,
      logger: SILENT,
      actuators: this.actuators(),
      podInfo: (pod: PodObject) => simPodInfo(pod),
      policy: scenarioPolicy(w.parentsOn(node.name)),
      rebooted,
      handovers: this.handovers,
      hooks: {
        onTransition: (p, a) => w.onTransition(node, p.key, a.from, a.to, a.reason, p.state),
        // A note is a reason change without a state change: the timeline shows it like one.
        onNote: (p, a) => w.onTransition(node, p.key, a.state, a.state, a.reason, p.state),
      },
    });
    this.feed = observerFeed({
      agent: this.agent,
      node: node.name,
      parents: () => this.podsOnNode(),
      deleting: () => this.deletingOnNode(),
      badInput: (source, reason, subject) => w.log(node.name, 'agent', `ignored a ${source} beat of ${subject}: ${reason}`),
      onVerdict: (r) => w.log(node.name, 'agent', r ? 'api-server reachable' : 'api-server unreachable'),
    });
    for (const def of w.parentsOn(node.name)) w.invariants.agentStarted(node, def.key);
    this.world.promised();
    void this.start(timers);
  }

  /** As runAgent: recovery from disk first, then the observers. */
  private async start(timers: Timers): Promise<void> {
    const w = this.world;
    const node = this.node;
    // Recovery at start, production's: every stored checkpoint, whether it is active (and
    // exclusive), and the hand-over in progress when the last agent stopped.
    const restored = await recoverFromDisk({ agent: this.agent, disk: this.checkpointDisk(), handovers: this.handovers, log: SILENT });
    if (!this.alive()) return;
    w.log(node.name, 'agent', `agent started; ${restored} checkpoint(s) on disk`);
    // The production probe (its verdicts and timers) over a model /readyz: answered a round trip
    // later, 200 while the node reaches an api-server. Dead with the process: its timers check alive().
    probeApiServer({
      kubeConfig: {} as KubeConfig, // unused: the probe is the model's
      log: SILENT,
      timers,
      intervalMs: T.agentProbeMs,
      timeoutMs: PROBE_TIMEOUT_MS,
      failureThreshold: PROBE_FAILURE_THRESHOLD,
      probe: (signal) => this.request(signal, () => w.api.reachableFrom(node)),
      onReachable: (r) => this.enter(() => this.probed(r)),
    }).start();
    // Production's kubelet-Lease observer after a reboot, over the model's node Leases: a GET
    // answered a round trip later while the node reaches an api-server.
    if (this.rebooted) {
      watchKubeletLease({
        node: node.name,
        log: SILENT,
        timers,
        bootWallMs: node.clock.wall(node.clock.bootAt),
        read: (signal) =>
          this.request(signal, (): NodeLeaseRead => {
            if (!w.api.reachableFrom(node)) throw new Error('api-server unreachable');
            const renewed = w.api.nodeLeases.get(node.name);
            return renewed === undefined ? { unusable: `no Lease kube-node-lease/${node.name}` } : { holder: node.name, renewedAtMs: renewed };
          }),
        onVerdict: (r) => this.enter(() => this.agent.kubelet(r)),
      }).start();
    }
    // The model's pod watch lists as soon as the api-server answers; until then the feed holds pods back.
    this.feed.podsListed();
    watchLocalBeats({
      pollMs: T.agentFilePollMs,
      log: SILENT,
      timers,
      folder: this.beatFolder(),
      onFile: (name, text) => this.enter(() => this.feed.localFile(name, text)),
      onRemoved: () => {},
    }).start();
    // Production's manifest observer over the node's static-pod folder.
    watchManifests({
      subject: {
        manifestChecks: () => this.agent.manifestChecks(),
        manifestSeen: (c, file) => this.enter(() => this.agent.manifestSeen(c, file)),
      },
      reader: {
        manifests: (checks) => this.checkpointDisk().manifests(checks),
        watch: (changed) => {
          this.manifestsChanged = changed;
          return { close: () => (this.manifestsChanged = null) };
        },
      },
      pollMs: T.agentManifestPollMs,
      log: SILENT,
      timers,
    }).start();
  }

  // ---- the world's notices (AgentProcess) ----

  /**
   * The pod watch's event, a round trip late. While the agent judges the api-server unreachable
   * the watch still hears one that answers too slowly for the probe (added latency), as an
   * informer does: the event goes out if it reaches the node, and the feed takes it as identity only.
   */
  onPodsChanged(): void {
    const w = this.world;
    const heard = () => this.agent.isApiReachable() || (!this.node.net.watchStalled && w.api.deliversTo(this.node));
    if (!heard()) return;
    this.later(T.apiRttMs / 2 + w.net.fromApiMs(this.node), () => {
      if (heard()) this.feed.podsChanged();
    });
  }

  /**
   * A Lease write's watch event, a round trip late. Production's Lease informer keeps its watch
   * while the agent's probe judges the api-server unreachable (a slow one), so the event goes out
   * whenever it reaches the node, as the pod watch's does; only a stalled watch hears nothing.
   */
  onApiBeat(sb: StoredBeat): void {
    const w = this.world;
    const heard = () => !this.node.net.watchStalled && (this.agent.isApiReachable() || w.api.deliversTo(this.node));
    if (!heard()) return;
    // One watch connection: an event never arrives before the one sent before it.
    const at = arrivalInOrder(w.q.now, T.apiRttMs / 2 + w.net.fromApiMs(this.node), this.watchArrivesAt);
    this.watchArrivesAt = at;
    this.later(at - w.q.now, () => {
      // The watch event itself must reach the node (a link may cut answers only: network.ts).
      if (!this.node.net.watchStalled && (w.net.whole || w.api.deliversTo(this.node))) this.watched(sb.namespace, sb.key, sb.beat);
    });
  }

  /** The heartbeat folder's change notification (fs.watch): production's observer scans at once. */
  onLocalBeat(): void {
    if (this.scanQueued) return;
    this.scanQueued = true;
    this.later(T.agentFileNoticeMs, () => {
      this.scanQueued = false;
      this.folderChanged?.();
    });
  }

  /** Something other than this agent changed the static-pod folder (a fault): the folder's inotify notice. */
  onManifestsChanged(): void {
    this.later(T.agentFileNoticeMs, () => this.manifestsChanged?.());
  }

  onWatchResumed(): void {
    this.enter(() => this.relist());
  }

  // ---- the model watches ----

  /**
   * Every way into the agent goes through here (a dead process runs nothing). An action it starts
   * may continue in a promise callback at once (a retire waits for the hand-over record, already
   * written), so when actions were started the world lets those callbacks run before the next
   * event. Results of actions already running come back through `work`, which says so itself.
   */
  private enter(fn: () => void): void {
    if (!this.alive()) return;
    const before = this.agent.actionsInFlight();
    fn();
    if (this.agent.actionsInFlight() > before) this.world.promised();
  }

  private later(ms: number, fn: () => void): void {
    this.world.q.after(ms, () => this.enter(fn));
  }

  /** The probe's verdict changed, or its first one was given. */
  private probed(r: boolean): void {
    this.feed.reachable(r);
    // The model's watches list again once the api-server answers (the informers' relist).
    if (r) this.relistLeases();
  }

  /**
   * After a watch restart: the watches list pods and Leases again. Production's informers list
   * whatever the probe says, so a slow api-server (too slow for the probe, not for a list) is
   * listed too: only answers that do not reach the node leave the watches without a list.
   */
  private relist(): void {
    if (!this.agent.isApiReachable() && !this.world.api.deliversTo(this.node)) return;
    this.onPodsChanged();
    this.relistLeases();
  }

  private relistLeases(): void {
    for (const def of this.world.parentsOn(this.node.name)) {
      for (const role of ['parent', 'checkpoint'] as const) {
        for (const ch of API_CHANNELS) {
          const beat = this.world.api.readBeat(ch, def.namespace, leaseName(def.key, this.node.name, role));
          if (beat) this.watched(def.namespace, def.key, beat);
        }
      }
    }
  }

  /** A beat the api-server showed: a Lease's, or a pod annotation's (which comes with the pod watch's event). */
  private watched(namespace: string, key: string, beat: Beat): void {
    const r = { ok: true as const, namespace, key, beat };
    if (beat.channel === 'annotation') this.feed.podsChanged(r);
    else this.feed.leaseBeat(r);
  }

  /** The pod watch's picture of this node: the parents scheduled here, keyed once. */
  private podsOnNode(): Map<string, ObservedParent<PodObject>> {
    const parents = new Map<string, ObservedParent<PodObject>>();
    for (const def of this.world.parentsOn(this.node.name)) {
      // Production's rule (parentPodOf): the newest pod of the key is the parent's pod, the others
      // (a surge rollout's old pod) are listed beside it. The api-server lists them in creation order.
      const pods = this.world.api.podsFor(this.node.name, def.key).map((p, i) => ({ uid: p.uid, name: p.name, created: i, sim: p }));
      const chosen = parentPodOf(pods);
      if (!chosen) continue;
      const pod = chosen.pod.sim;
      const obj: PodObject = { metadata: { uid: pod.uid, name: pod.name, namespace: def.namespace }, sim: { ...pod } };
      parents.set(parentId(def.namespace, def.key), {
        namespace: def.namespace,
        key: def.key,
        pod: obj,
        labels: {},
        ...(chosen.alsoListed.length ? { alsoListed: chosen.alsoListed } : {}),
      });
    }
    return parents;
  }

  /** The pod watch's pods being deleted, by production's rule (deletingPodOf; deleted in creation order here). */
  private deletingOnNode(): Map<string, PodRef> {
    const out = new Map<string, PodRef>();
    const api = this.world.api;
    for (const def of this.world.parentsOn(this.node.name)) {
      const deleting = api.deletingFor(this.node.name, def.key).map((p, i) => ({ uid: p.uid, name: p.name, created: i }));
      const chosen = deletingPodOf(api.podsFor(this.node.name, def.key).length > 0, deleting);
      if (chosen) out.set(parentId(def.namespace, def.key), chosen);
    }
    return out;
  }

  /** The node's heartbeat folder (tmpfs) as production's folder observer reads it: each beat as the local channel writes it. */
  private beatFolder(): BeatFolder {
    const files = this.node.files;
    return {
      list: () => this.settled([...files.keys()]),
      read: (name) => {
        const beat = files.get(name);
        const parent = localFileParent(name);
        if (!beat || !parent) return this.failed(Object.assign(new Error(`${name}: no such file`), { code: 'ENOENT' }));
        let text = this.fileText.get(beat);
        if (!text) {
          text = Buffer.from(localBeatText({ node: this.node.name, ...parent }, beat));
          this.fileText.set(beat, text);
        }
        return this.settled(text);
      },
      watch: (changed) => {
        this.folderChanged = changed;
        return { close: () => (this.folderChanged = null) };
      },
    };
  }

  // ---- the node's disk ----

  /** The node's checkpoint store and manifest folder, as recovery reads them. */
  private checkpointDisk(): CheckpointDisk {
    const w = this.world;
    const node = this.node;
    return {
      stored: () =>
        this.settled({
          checkpoints: w.parentsOn(node.name).flatMap((def) => {
            const id = parentId(def.namespace, def.key);
            const cp = node.disk.checkpoints.get(id);
            return cp ? [{ id, specHash: cp.spec.hash, labels: {} }] : [];
          }),
          problems: [],
        }),
      active: () => {
        const out = new Map<string, { exclusive: boolean }>();
        for (const def of w.parentsOn(node.name)) {
          const m = node.disk.manifests.get(manifestFile(def.namespace, def.key));
          if (m !== undefined) out.set(parentId(def.namespace, def.key), { exclusive: m.exclusive === true });
        }
        return this.settled(out);
      },
      // As production's: what this process wrote is ours; before its first write (a restarted
      // agent), the stored copy is.
      manifests: (checks) => {
        const out = new Map<string, ManifestFile>();
        for (const c of checks) {
          const [namespace, key] = c.id.split('/') as [string, string];
          const m = node.disk.manifests.get(manifestFile(namespace, key));
          const cp = node.disk.checkpoints.get(c.id);
          if (m === undefined) out.set(c.id, 'absent');
          else out.set(c.id, m === this.wrote.get(c.id) || (m.role === 'checkpoint' && !m.tampered && m.spec?.hash === cp?.spec.hash) ? 'ours' : 'changed');
        }
        return this.settled(out);
      },
    };
  }

  // ---- actuators ----

  /** A promise the world knows is pending, so the event queue lets its callbacks run (World.settle). */
  private settled<V>(v: V): Promise<V> {
    this.world.promised();
    return Promise.resolve(v);
  }

  private failed<V>(e: Error): Promise<V> {
    this.world.promised();
    return Promise.reject(e);
  }

  /**
   * A GET to the api-server from this node: answered a round trip later (with the node's added
   * latency) by `body`, unless the caller aborts it first.
   */
  private request<V>(signal: AbortSignal, body: () => V): Promise<V> {
    const w = this.world;
    const ms = T.apiRttMs + w.net.toApiMs(this.node) + w.net.fromApiMs(this.node);
    const answer = this.work(ms, body);
    // An answer within the shortest caller's timeout needs no abort (the usual case, and the cheap one).
    return ms < PROBE_TIMEOUT_MS ? answer : this.answerOrAbort(answer, signal);
  }

  /**
   * A request the caller aborts (the probe's timeout, as production's request does): an answer
   * slower than the timeout, e.g. under added latency, is a failed probe.
   */
  private answerOrAbort<V>(answer: Promise<V>, signal: AbortSignal): Promise<V> {
    return new Promise<V>((resolve, reject) => {
      const onAbort = () => {
        this.world.promised();
        reject(new Error('aborted'));
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      answer.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  /** Carry out `body` after `ms` of simulated work; its result (or throw) settles the promise. */
  private work<V>(ms: number, body: () => V): Promise<V> {
    this.world.promised();
    return new Promise<V>((resolve, reject) => {
      this.later(ms, () => {
        this.world.promised();
        try {
          resolve(body());
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      });
    });
  }

  private actuators(): Actuators<PodObject> {
    const node = this.node;
    const w = this.world;
    const file = (p: ParentView) => manifestFile(p.namespace, p.key);
    return {
      // A GET of the pod, counted with one way of the added latency, as the model always has.
      capture: (p, info, reason) =>
        this.work(T.actuatorMs + T.apiRttMs + w.net.toApiMs(node), () => {
          const pod = w.api.pods.get(info.uid);
          if (!w.api.reachableFrom(node) || !pod) throw new Error(pod ? 'api-server unreachable' : 'pod gone');
          // The copy's own grace after SIGTERM, as production's sanitize writes it (COPY_GRACE_SECONDS).
          // No preStop hook: production's sanitize drops it (a copy stops as soon as it is retired).
          node.disk.checkpoints.set(p.id, { spec: { ...pod.spec, gracePeriodMs: copyGraceSeconds(pod.spec.gracePeriodMs / 1000) * 1000, preStopMs: 0 } });
          w.invariants.checkpointStored(node, p.key, pod.spec);
          w.log(node.name, 'agent', `captured ${p.id} generation ${pod.spec.generation} (${reason.message})`, p.key);
          return { specHash: pod.spec.hash };
        }),
      activate: (p, reason, exclusive) => {
        w.invariants.activating(node, p.key, reason);
        return this.work(T.actuatorMs, () => {
          const cp = node.disk.checkpoints.get(p.id);
          if (!cp) throw new Error('no stored checkpoint');
          const r = p.state.policy.handover === 'redirect' ? p.state.policy.redirect : undefined;
          if (p.state.policy.handover === 'redirect' && !r) throw new Error('handover "redirect" without redirect ports in its policy');
          const x = exclusive === true && cp.spec.portSharing && !r;
          const before = node.disk.manifests.get(file(p));
          // As ManifestDir.activate: an unchanged manifest is not written again (the kubelet sees nothing).
          if (before && !before.tampered && before.spec?.hash === cp.spec.hash && (before.exclusive === true) === x && before.spec?.copyFor === r?.port) {
            this.wrote.set(p.id, before);
            return;
          }
          // Without port sharing: the same copy with --permit-port-sharing removed. Behind a
          // redirect: the copy on its own port (production's withCopyPort), sharing nothing.
          const m: Manifest = r
            ? {
                role: 'checkpoint',
                spec: { ...cp.spec, ports: cp.spec.ports.map((x) => (x === r.port ? r.copyPort : x)), portSharing: false, copyFor: r.port },
              }
            : x
              ? { role: 'checkpoint', spec: { ...cp.spec, portSharing: false }, exclusive: true }
              : { role: 'checkpoint', spec: cp.spec };
          node.disk.manifests.set(file(p), m);
          this.wrote.set(p.id, m);
          w.log(node.name, 'agent', `wrote manifest ${file(p)} (generation ${cp.spec.generation}${x ? ', without port sharing' : ''})`, p.key);
        });
      },
      retire: (p) =>
        this.work(T.actuatorMs, () => {
          node.disk.manifests.delete(file(p));
          w.log(node.name, 'agent', `removed manifest ${file(p)}`, p.key);
        }),
      // The node's nftables table (src/agent/redirect.ts): one transaction, as fast as a file write.
      redirect: (p, on) =>
        this.work(T.actuatorMs, () => {
          const r = p.state.policy.redirect;
          if (on && !r) throw new Error('its policy names no redirect ports');
          w.touch(node);
          if (on && r) node.redirects.set(p.id, { port: r.port, toPort: r.copyPort });
          else node.redirects.delete(p.id);
          w.log(node.name, 'agent', on && r ? `redirected port ${r.port} to the copy's ${r.copyPort}` : 'removed the redirect to the copy', p.key);
        }),
      redirectStanding: (id) => node.redirects.has(id),
      collect: (p) => {
        w.invariants.collecting(node, p.key);
        // As the production actuator does: a live read first, and nothing removed unless it
        // confirms that no pod for the key is scheduled here.
        const read = this.work(T.apiRttMs + w.net.toApiMs(node) + w.net.fromApiMs(node), () => {
          if (!w.api.reachableFrom(node)) throw new CollectRefusedError('the live read failed: api-server unreachable');
          if (w.api.podFor(node.name, p.key)) throw new CollectRefusedError('the live read found a pod for this parent scheduled here');
        });
        return read.then(() =>
          this.work(T.actuatorMs, () => {
            node.disk.manifests.delete(file(p));
            node.disk.checkpoints.delete(p.id);
            w.log(node.name, 'agent', `collected checkpoint ${p.id}`, p.key);
          }),
        );
      },
      // A LIST of this node's pods, as the informer's resync makes it: a request of its own, heard a
      // round trip later if the api-server answers this node, whatever the watch was doing.
      listPods: () =>
        this.later(T.apiRttMs + w.net.toApiMs(node) + w.net.fromApiMs(node), () => {
          if (!w.api.reachableFrom(node)) return;
          w.log(node.name, 'agent', 'listed the pods afresh (a beat from a holder no list named)');
          this.feed.podsChanged();
        }),
      readLive: (p, channels) =>
        this.work(T.apiRttMs + w.net.toApiMs(node) + w.net.fromApiMs(node), (): LiveRead => {
          if (!w.api.reachableFrom(node)) return { unavailable: 'api-server unreachable' };
          const beats: Beat[] = [];
          for (const ch of channels) {
            const beat = w.api.readBeat(ch, p.namespace, leaseName(p.key, node.name));
            if (beat) beats.push(beat);
          }
          return { beats };
        }),
      event: (p, e) => {
        w.log(node.name, 'event', `${e.eventType} ${e.reason}: ${e.message}`, p.key);
        return this.settled(undefined);
      },
      // Production's fence (src/agent/fence.ts) over the node's heartbeat folder and clocks
      // (fence-folder.ts); the parent's own sidecar (production's responder, in sidecar.ts) answers it.
      fence: (p, podUid, reason, evenIfStarved) => {
        w.invariants.fencing(node, p.key, podUid);
        return this.work(T.actuatorMs, () => undefined)
          .then(() =>
            fenceThroughSidecar(
              agentFencePorts(w, node, (fn) => this.enter(fn)),
              p,
              podUid,
              reason,
              evenIfStarved,
            ),
          )
          .then((r) => {
            w.log(node.name, 'agent', `fence of pod ${podUid}: ${r.killed > 0 ? 'its hung process was killed' : 'nothing hung to kill'}`, p.key);
            return r;
          });
      },
    };
  }
}
