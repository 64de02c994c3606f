// The simulated world: nodes, their kubelets and agents, the api-server, the timeline. It owns no
// policy of its own: mechanics live in kubelet.ts, apiserver.ts, heartbeat.ts, lastseen.ts and
// strategies.ts; faults in faults.ts; checks in invariants.ts and outcome.ts.
import { type ParentState, type ParentStateName, type Reason, reasonText } from '../core/types.js';
import { ApiServer, type StoredBeat } from './apiserver.js';
import { NodeClock } from './clock.js';
import { startSidecar } from './heartbeat.js';
import { Invariants } from './invariants.js';
import { Kubelet, type KPod } from './kubelet.js';
import { AGENT_MANIFEST, ManifestFolder, type PodSpec, type SimNode, T } from './model.js';
import { Outcome } from './outcome.js';
import { EventQueue, promiseCallbacksRun } from './queue.js';
import { Rng } from './rng.js';
import type { ParentDef, Scenario } from './schema.js';
import { type AgentProcess, startAgentFor, type StrategyName } from './strategies.js';

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

/** The DaemonSet controller runs this often (it is not event-driven in the model). */
const CONTROLLER_PERIOD_MS = 1_000;

export function specFor(def: ParentDef, generation: number, healthy: boolean, startMs = def.startMs): PodSpec {
  return {
    namespace: def.namespace,
    key: def.key,
    generation,
    hash: `${def.key}-g${generation}`,
    apiServer: def.kind === 'apiserver',
    ports: def.ports,
    portSharing: def.portSharing,
    startMs,
    healthy,
    stopMs: def.stopMs,
    gracePeriodMs: def.gracePeriodMs,
  };
}

export class World {
  readonly q = new EventQueue();
  readonly nodes = new Map<string, SimNode>();
  readonly kubelets = new Map<string, Kubelet>();
  readonly agents = new Map<string, AgentProcess>();
  readonly api: ApiServer;
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
  /** Some promise was created or settled since the last settle() (see EventQueue.runUntil). */
  private promisesPending = false;
  private readonly defs: Map<string, ParentDef>;

  constructor(
    readonly scenario: Scenario,
    readonly seed: number,
    readonly strategy: StrategyName,
    /** Keep the timeline (off for speed runs and the random sweep). */
    readonly keepLogs = true,
  ) {
    this.root = new Rng(seed);
    this.defs = new Map(scenario.parents.map((p) => [p.key, p]));
    this.api = new ApiServer(this);
    this.invariants = new Invariants(this, strategy === 'lastseen');
    this.outcome = new Outcome(this);
    const clocks = this.rng('clocks');
    for (const n of scenario.spec.nodes) {
      const node: SimNode = {
        name: n.name,
        master: n.master,
        up: true,
        bootId: 1,
        clock: new NodeClock(n.skew + clocks.between(-500, 500), n.driftPpm),
        disk: {
          manifests: new ManifestFolder([[AGENT_MANIFEST, { role: 'agent', spec: null }]]),
          containers: new Set(),
          checkpoints: new Map(),
          handovers: new Map(),
        },
        files: new Map(),
        net: { partitioned: false, latencyMs: 0, watchStalled: false },
        ports: new Map(),
      };
      this.nodes.set(n.name, node);
    }
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
    return this.scenario.parents.filter((p) => p.nodes.includes(node));
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
    // A new kubelet learns reachability like everyone else: on the next check after this event.
    this.reach.delete(node.name);
    k.start();
    if (adoptApiPods) k.adoptApiPods();
  }

  // ---- hooks for the subsystems ----

  startSidecar(node: SimNode, pod: KPod): () => void {
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

  /** After every event: propagate reachability changes, then check. False stops the run. */
  afterEvent(): boolean {
    const avail = this.api.available();
    for (const node of this.nodes.values()) {
      const r = avail && node.up && !node.net.partitioned;
      if (this.reach.get(node.name) !== r) {
        this.reach.set(node.name, r);
        this.kubelets.get(node.name)?.setConnected(r);
        this.log(node.name, 'api', r ? 'api-server reachable from this node' : 'api-server unreachable from this node');
        this.record(`api/${node.name}`, r ? 'up' : 'down');
      }
      if (r) this.invariants.reachable(node);
    }
    this.outcome.afterEvent();
    return this.invariants.afterEvent();
  }
}
