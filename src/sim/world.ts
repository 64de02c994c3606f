// The simulated world: nodes, their kubelets and agents, the api-server, the timeline. It owns no
// policy of its own: mechanics live in kubelet.ts, apiserver.ts, sidecar.ts, lastseen.ts and
// strategies.ts; faults in faults.ts; checks in invariants.ts and outcome.ts.
import { type ParentState, type ParentStateName, type Reason, reasonText } from '../core/types.js';
import { ApiServer, type StoredBeat } from './apiserver.js';
import { NodeClock } from './clock.js';
import { Invariants } from './invariants.js';
import { type KPod, Kubelet } from './kubelet.js';
import { AGENT_MANIFEST, type Manifest, ManifestFolder, type PodSpec, type SimNode, T } from './model.js';
import { Network, NO_DELAY } from './network.js';
import { Outcome } from './outcome.js';
import { EventQueue, promiseCallbacksRun } from './queue.js';
import { Rng } from './rng.js';
import type { ParentDef, Scenario } from './schema.js';
import { type SidecarProcess, startSidecar } from './sidecar.js';
import { type AgentProcess, type StrategyName, startAgentFor } from './strategies.js';

export type LogKind = 'fault' | 'kubelet' | 'core' | 'event' | 'agent' | 'api' | 'invariant';

export interface LogEntry {
  t: number;
  node: string;
  kind: LogKind;
  text: string;
  key?: string;
}

/** Step series for the chart: lane -> [(time, value)] on every change. */
export type Series = Map<string, Array<{ t: number; v: string }>>;

/**
 * How the invariants are checked after every event: `incremental` re-checks only the nodes an
 * event touched (World.touch) and the checks whose deadline passed; `full` walks every node and
 * parent, as before; `verify` is incremental and also recomputes everything the incremental check
 * skipped, throwing if any of it changed untouched (a missing World.touch: for tests).
 */
export type CheckMode = 'incremental' | 'full' | 'verify';

/** A Map that tells the world about every write (a node's checkpoint store). */
class TouchingMap<K, V> extends Map<K, V> {
  constructor(private readonly touched: () => void) {
    super();
  }

  override set(k: K, v: V): this {
    this.touched();
    return super.set(k, v);
  }

  override delete(k: K): boolean {
    this.touched();
    return super.delete(k);
  }
}

/** The static-pod folder, telling the world about every write as well as its watcher. */
class TouchingFolder extends ManifestFolder {
  touched: (() => void) | null = null;

  override set(file: string, m: Manifest): this {
    this.touched?.();
    return super.set(file, m);
  }

  override delete(file: string): boolean {
    this.touched?.();
    return super.delete(file);
  }
}

const NO_NODES: SimNode[] = [];

/** The DaemonSet controller runs this often (it is not event-driven in the model). */
const CONTROLLER_PERIOD_MS = 1_000;

export function specFor(def: ParentDef, generation: number, healthy: boolean, startMs = def.startMs, bindMs = def.bindMs): PodSpec {
  return {
    namespace: def.namespace,
    key: def.key,
    generation,
    hash: `${def.key}-g${generation}`,
    apiServer: def.kind === 'apiserver',
    ports: def.ports,
    portSharing: def.portSharing,
    startMs,
    bindMs: Math.min(startMs, bindMs ?? (def.kind === 'apiserver' ? Math.max(0, startMs - T.apiserverBindLeadMs) : T.bindDelayMs)),
    healthy,
    stopMs: def.stopMs,
    gracePeriodMs: def.gracePeriodMs,
    preStopMs: def.preStopMs,
  };
}

export class World {
  readonly q = new EventQueue();
  readonly nodes = new Map<string, SimNode>();
  readonly kubelets = new Map<string, Kubelet>();
  readonly agents = new Map<string, AgentProcess>();
  readonly api: ApiServer;
  readonly net: Network;
  readonly invariants: Invariants;
  readonly outcome: Outcome;
  readonly logs: LogEntry[] = [];
  readonly series: Series = new Map();
  /** Spec hashes some pod ran to Ready. */
  readonly readySpecs = new Set<string>();
  /** When the last scheduled fault ends (liveness bounds count from here). */
  lastFaultEnd = 0;
  firstFaultAt: number | null = null;
  private readonly root: Rng;
  private reach = new Map<string, boolean>();
  /** Whether each node's kubelet reaches an api-server: the node's own reach, or for a `local` kubelet its own node's api-server. */
  private kubeletReach = new Map<string, boolean>();
  /** Some promise was created or settled since the last settle() (see EventQueue.runUntil). */
  private promisesPending = false;
  private readonly defs: Map<string, ParentDef>;
  private readonly defsOn = new Map<string, ParentDef[]>();
  /** Each node's place in `nodes`: touched nodes are handled in this order, as a full walk would. */
  private readonly nodeIndex = new Map<SimNode, number>();
  /** Nodes an event may have changed since the last afterEvent (see touch()). */
  private readonly touchedNodes = new Set<SimNode>();
  private lastAvailable: boolean | null = null;

  constructor(
    readonly scenario: Scenario,
    readonly seed: number,
    readonly strategy: StrategyName,
    /** Keep the timeline (off for speed runs and the random sweep). */
    readonly keepLogs = true,
    readonly check: CheckMode = 'incremental',
  ) {
    this.root = new Rng(seed);
    this.defs = new Map(scenario.parents.map((p) => [p.key, p]));
    this.api = new ApiServer(this);
    this.net = new Network((name) => this.rng(name));
    this.invariants = new Invariants(this, strategy === 'lastseen');
    this.outcome = new Outcome(this);
    const clocks = this.rng('clocks');
    for (const n of scenario.spec.nodes) {
      this.defsOn.set(
        n.name,
        scenario.parents.filter((p) => p.nodes.includes(n.name)),
      );
      const manifests = new TouchingFolder([[AGENT_MANIFEST, { role: 'agent', spec: null }]]);
      const node: SimNode = {
        name: n.name,
        master: n.master,
        up: true,
        bootId: 1,
        clock: new NodeClock(n.skew + clocks.between(-500, 500), n.driftPpm),
        disk: {
          manifests,
          containers: new Map(),
          checkpoints: new TouchingMap(() => this.touch(node)),
          handovers: new Map(),
        },
        files: new Map(),
        net: { partitioned: false, latencyMs: 0, toApi: NO_DELAY, fromApi: NO_DELAY, watchStalled: false },
        ports: new Map(),
        redirects: new Map(),
      };
      manifests.touched = () => this.touch(node);
      this.nodeIndex.set(node, this.nodeIndex.size);
      this.nodes.set(n.name, node);
    }
  }

  /**
   * Something that decides who serves on `node` changed or may change in this event: its pods or
   * their containers, its manifest folder or checkpoint store, its power or its network. The
   * checks after the event look again at touched nodes only (CheckMode), so every change to a
   * node's state must come with a touch; the kubelet, the disk's folders and the faults do it,
   * and `verify` mode finds a change that came without one.
   */
  touch(node: SimNode): void {
    this.touchedNodes.add(node);
  }

  /** Nodes touched since the last afterEvent (the api-server keeps its view of them fresh). */
  get touched(): ReadonlySet<SimNode> {
    return this.touchedNodes;
  }

  rng(name: string): Rng {
    return this.root.fork(name);
  }

  parentDef(key: string): ParentDef {
    return this.defs.get(key)!;
  }

  parentDefOrNull(key: string): ParentDef | null {
    return this.defs.get(key) ?? null;
  }

  parentsOn(node: string): ParentDef[] {
    return this.defsOn.get(node) ?? [];
  }

  log(node: string, kind: LogKind, text: string, key?: string): void {
    if (this.keepLogs || kind === 'invariant') this.logs.push({ t: this.q.now, node, kind, text, ...(key ? { key } : {}) });
  }

  record(lane: string, v: string): void {
    if (!this.keepLogs) return;
    let s = this.series.get(lane);
    if (!s) {
      s = [];
      this.series.set(lane, s);
    }
    if (s.length > 0 && s[s.length - 1]!.v === v) return;
    s.push({ t: this.q.now, v });
  }

  // ---- bootstrap: the cluster as bootkube leaves it, every pod starting at t=0 ----

  bootstrap(): void {
    for (const def of this.scenario.parents) {
      const spec = specFor(def, 1, true);
      this.api.desired.set(def.key, spec);
      for (const n of def.nodes) this.api.createPod(n, spec);
    }
    for (const node of this.nodes.values()) this.startKubelet(node, true);
    const loop = () => {
      this.api.reconcile();
      this.q.after(CONTROLLER_PERIOD_MS, loop);
    };
    this.q.after(CONTROLLER_PERIOD_MS, loop);
  }

  startKubelet(node: SimNode, adoptApiPods = false): void {
    const k = new Kubelet(this, node, node.bootId);
    this.kubelets.set(node.name, k);
    this.touch(node);
    // A new kubelet learns reachability like everyone else: on the next check after this event.
    this.reach.delete(node.name);
    this.kubeletReach.delete(node.name);
    k.start();
    if (adoptApiPods) k.adoptApiPods();
  }

  // ---- hooks for the subsystems ----

  startSidecar(node: SimNode, pod: KPod): SidecarProcess {
    return startSidecar(this, node, pod);
  }

  startAgent(node: SimNode, _pod: KPod, alive: () => boolean): void {
    this.agents.set(node.name, startAgentFor[this.strategy](this, node, alive));
  }

  markReady(node: SimNode, pod: KPod): void {
    this.readySpecs.add(pod.spec!.hash);
    this.log(node.name, 'kubelet', `${pod.name} is Ready (generation ${pod.spec!.generation})`, pod.spec!.key);
  }

  onApiBeat(sb: StoredBeat): void {
    this.agents.get(sb.node)?.onApiBeat?.(sb);
  }

  /** A heartbeat wrote a local beat file on `node`: its agent's folder watch fires. */
  onLocalBeat(node: SimNode): void {
    this.agents.get(node.name)?.onLocalBeat?.();
  }

  /** A pod's status changed (not its spec or existence): only the node's agent watches it. */
  onApiPodStatus(node: string): void {
    this.q.after(T.apiRttMs, () => this.agents.get(node)?.onPodsChanged?.());
  }

  onApiPodsChanged(node: string): void {
    this.q.after(T.apiRttMs, () => {
      this.kubelets.get(node)?.syncApiPods();
      this.agents.get(node)?.onPodsChanged?.();
    });
  }

  onTransition(node: SimNode, key: string, from: ParentStateName, to: ParentStateName, r: Reason, s: ParentState): void {
    const reason = reasonText(r);
    this.log(node.name, 'core', from === to ? `${s.id} ${to}: ${reason}` : `${s.id} ${from} -> ${to}: ${reason}`, key);
    this.record(`core/${node.name}/${key}`, to);
    this.invariants.transition(node, key, from, to, node.clock.mono(this.q.now));
    this.outcome.transition(node.name, key, from, to);
  }

  /** An agent created or settled a promise: its callbacks must run before time moves on. */
  promised(): void {
    this.promisesPending = true;
  }

  /** Resolves once every promise callback released so far has run, or null when none is pending. */
  settle(): Promise<void> | null {
    if (!this.promisesPending) return null;
    const drain = async () => {
      while (this.promisesPending) {
        this.promisesPending = false;
        await promiseCallbacksRun();
      }
    };
    return drain();
  }

  /**
   * After every event: propagate reachability changes, then check. False stops the run. Only
   * touched nodes can have changed, unless the api-server's availability did (then every node).
   */
  afterEvent(): boolean {
    const avail = this.api.available();
    const touched = this.inNodeOrder(this.touchedNodes);
    let nodes: Iterable<SimNode>;
    // With links cut (or cut or healed by this event, which touches no node), a node's reachability
    // depends on the cuts and on which instances serve: every node is looked at.
    const links = this.net.takeChanged() || !this.net.whole;
    if (this.check === 'full' || avail !== this.lastAvailable || links) nodes = this.nodes.values();
    else nodes = touched;
    this.lastAvailable = avail;
    for (const node of nodes) {
      const r = this.reaches(node, avail);
      const kr = this.kubeletReaches(node, r);
      if (this.kubeletReach.get(node.name) !== kr) {
        this.kubeletReach.set(node.name, kr);
        this.kubelets.get(node.name)?.setConnected(kr);
      }
      if (this.reach.get(node.name) !== r) {
        this.reach.set(node.name, r);
        this.log(node.name, 'api', r ? 'api-server reachable from this node' : 'api-server unreachable from this node');
        this.record(`api/${node.name}`, r ? 'up' : 'down');
        this.invariants.reachability(node, r);
      }
      if (r && this.check === 'full') this.invariants.reachable(node);
    }
    if (this.check === 'verify') this.verifyReach(avail);
    this.outcome.afterEvent();
    // setConnected touches the nodes it is called for (every node when availability changed).
    const go = this.invariants.afterEvent(this.touchedNodes.size === touched.length ? touched : this.inNodeOrder(this.touchedNodes));
    // setConnected may have changed a touched node's pods after available() looked at them.
    this.api.available();
    this.touchedNodes.clear();
    return go;
  }

  private inNodeOrder(nodes: ReadonlySet<SimNode>): SimNode[] {
    if (nodes.size === 0) return NO_NODES;
    const out = [...nodes];
    if (out.length > 1) out.sort((a, b) => this.nodeIndex.get(a)! - this.nodeIndex.get(b)!);
    return out;
  }

  /**
   * The node reaches an api-server. Recomputed after an event for touched nodes only (every node
   * when availability changed): whatever it reads of another node's state, a change to that state
   * must touch this node too (verify mode recomputes it for every node and finds one that did not).
   */
  private reaches(node: SimNode, avail: boolean): boolean {
    return this.net.whole ? avail && node.up && !node.net.partitioned : this.api.reachableFrom(node);
  }

  /**
   * A master's `local` kubelet asks its own node's api-server only (kubelet-model.ts `api`); a
   * worker's asks the cluster's, as kubeadm's workers do. Reads only the node's own state.
   */
  private kubeletReaches(node: SimNode, nodeReaches: boolean): boolean {
    return this.scenario.kubelet.api === 'local' && node.master ? this.api.hasInstance(node) : nodeReaches;
  }

  private verifyReach(avail: boolean): void {
    for (const node of this.nodes.values()) {
      const r = this.reaches(node, avail);
      if (this.reach.get(node.name) !== r) throw new Error(`verify: ${node.name}'s reachability changed at ${this.q.now} ms without a touch`);
      if (this.kubelets.has(node.name) && this.kubeletReach.get(node.name) !== this.kubeletReaches(node, r))
        throw new Error(`verify: ${node.name}'s kubelet reachability changed at ${this.q.now} ms without a touch`);
    }
  }
}
