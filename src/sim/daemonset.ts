// The DaemonSet controller of the model's api-server: one pod of the desired spec per node of a
// parent, and rolling updates as kube-controller-manager's daemon controller does them
// (pkg/controller/daemon/update.go, rollingUpdate), reduced to what the model has:
// - maxSurge 0 (the default): an old pod is deleted only while fewer than maxUnavailable nodes are
//   unavailable (a node counts as unavailable while it has no pod, an old and a new pod, or a new
//   pod not yet available); an old pod that is itself unavailable is replaced at once. The manage
//   loop then creates the new pod on the emptied node.
// - maxSurge > 0: a new pod is created beside the old one on up to maxSurge nodes at a time (at
//   once where the old pod is unavailable), and the old pod is deleted once the new one is
//   available. maxUnavailable plays no part, as in the real controller.
// - "available" is the api-server's view of the pod's Ready condition, as its node's kubelet last
//   reported it (a kubelet that cannot reach an api-server reports nothing), Ready for at least
//   minReadySeconds. Nothing marks the pods of an unreachable node NotReady (the node lifecycle
//   controller is not modelled): they stay as last reported.
// - The real controller walks its nodes in Go map order (random); this one goes by node name, so
//   a seed replays a run exactly. A DaemonSet has no progress deadline: a new spec that never gets
//   available holds the rollout on its first node(s) for good, which the timeline says.
// Percentages are of the parent's nodes, rounded up; 0 for both is refused by the schema.
import type { ApiPod, ApiServer } from './apiserver.js';
import { T } from './model.js';
import type { ParentDef } from './schema.js';
import type { World } from './world.js';

/** A DaemonSet's `updateStrategy.rollingUpdate` and `minReadySeconds`. */
export interface RollingUpdate {
  maxUnavailable: number | string;
  maxSurge: number | string;
  minReadySeconds: number;
}

export const DEFAULT_ROLLING_UPDATE: RollingUpdate = { maxUnavailable: 1, maxSurge: 0, minReadySeconds: 0 };

/** One rollout's progress, for the timeline and the outcome figures. */
export interface RolloutFigures {
  /** The rollout fault's index in the scenario's `faults`. */
  fault: number;
  key: string;
  generation: number;
  /** Virtual seconds of the rollout. */
  at: number;
  /** Nodes running an available pod of this generation and no older one, at the end (or when a later rollout replaced it). */
  nodesUpdated: number;
  nodes: number;
  /** Seconds from the rollout until every node ran an available new pod (null: it did not). */
  completedAfter: number | null;
  /** It waited on a new pod that restarted without ever becoming available, and never completed. */
  stalled: boolean;
  /** The nodes whose new pod held it up at the end (or when a later rollout replaced it), by name. */
  waitingOn: string[];
}

interface Rollout {
  figures: RolloutFigures;
  /** The spec hash this rollout brings. */
  hash: string;
  startedAt: number;
  strategy: RollingUpdate;
  /** What the last "waits" line said, so it is logged once per change. */
  waitLine: string;
  /** New pods already called stalled in the timeline. */
  stalledPods: Set<string>;
  done: boolean;
}

/** A count or a percentage of `of`, rounded up (intstr.GetScaledValueFromIntOrPercent with roundUp). */
export function scaled(v: number | string, of: number): number {
  if (typeof v === 'number') return v;
  return Math.ceil((Number.parseInt(v, 10) * of) / 100);
}

export class DaemonSetController {
  private readonly creating = new Set<string>();
  /** The rollout in progress (or last done) per parent key, and every rollout in order. */
  private readonly current = new Map<string, Rollout>();
  private readonly all: Rollout[] = [];
  private readonly strategies = new Map<string, RollingUpdate>();
  /** Each parent's nodes by name: the order the controller walks them in. */
  private readonly order = new Map<string, { from: string[]; sorted: string[] }>();

  constructor(
    private readonly world: World,
    private readonly api: ApiServer,
  ) {}

  /** A new spec generation of `key` (the rollout fault): the update strategy comes with it. */
  rollout(fault: number, key: string, generation: number, hash: string, strategy: RollingUpdate): void {
    this.strategies.set(key, strategy);
    const prev = this.current.get(key);
    if (prev && !prev.done) {
      // A later rollout replaced this one before it completed: its figures stay as they are now.
      this.measure(prev);
      prev.done = true;
    }
    const def = this.world.parentDef(key);
    const r: Rollout = {
      figures: {
        fault,
        key,
        generation,
        at: this.world.q.now / 1000,
        nodesUpdated: 0,
        nodes: def.nodes.length,
        completedAfter: null,
        stalled: false,
        waitingOn: [],
      },
      hash,
      startedAt: this.world.q.now,
      strategy,
      waitLine: '',
      stalledPods: new Set(),
      done: false,
    };
    this.current.set(key, r);
    this.all.push(r);
    const { maxUnavailable, maxSurge, minReadySeconds } = strategy;
    this.world.log(
      'cluster',
      'api',
      `DaemonSet ${key}: rolling update to generation ${generation} (maxUnavailable ${maxUnavailable}, maxSurge ${maxSurge}, minReadySeconds ${minReadySeconds}; nodes by name)`,
      key,
    );
  }

  /** Every rollout so far, its figures as of `now` (a rollout still open is measured now). */
  figures(): RolloutFigures[] {
    for (const r of this.all) if (!r.done) this.measure(r);
    return this.all.map((r) => ({ ...r.figures, waitingOn: [...r.figures.waitingOn] }));
  }

  /** Runs every second while an api-server is available. */
  reconcile(): void {
    for (const def of this.world.scenario.parents) this.reconcileKey(def);
  }

  private nodesOf(def: ParentDef): string[] {
    // Sorted once per node set: a parent's set can change (a DaemonSet that stops placing it on a
    // node, as the garbage-collection tests do), and the controller follows the set it is given.
    let o = this.order.get(def.key);
    if (!o || o.from !== def.nodes) {
      o = { from: def.nodes, sorted: [...def.nodes].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)) };
      this.order.set(def.key, o);
    }
    return o.sorted;
  }

  /** IsPodAvailable: Ready in the api-server's view, for at least minReadySeconds. */
  private available(p: ApiPod, minReadySeconds: number): boolean {
    return p.readySince !== null && this.world.q.now - p.readySince >= minReadySeconds * 1000;
  }

  private reconcileKey(def: ParentDef): void {
    const api = this.api;
    const spec = api.desired.get(def.key)!;
    const strategy = this.strategies.get(def.key) ?? DEFAULT_ROLLING_UPDATE;
    const nodes = this.nodesOf(def);
    const toDelete: ApiPod[] = [];
    const toCreate: string[] = [];
    const n = nodes.length;
    const surge = scaled(strategy.maxSurge, n);
    // The manage loop: a node without a pod of the parent gets one of the desired spec; without
    // surge, only once the pod being deleted there is gone (podsShouldBeOnNode: a terminating pod
    // still exists on the node).
    for (const node of nodes) if (api.podsFor(node, def.key).length === 0 && (surge > 0 || api.deletingFor(node, def.key).length === 0)) toCreate.push(node);
    let maxUnavailable = scaled(strategy.maxUnavailable, n);
    if (n > 0 && maxUnavailable === 0 && surge === 0) maxUnavailable = 1;
    const sides = (node: string) => {
      const pods = api.podsFor(node, def.key);
      const fresh = pods.filter((p) => p.spec.hash === spec.hash);
      const old = pods.filter((p) => p.spec.hash !== spec.hash);
      // A creation under way counts as a new pod that is not available yet.
      const pending = this.creating.has(`${node}/${def.key}`);
      return { fresh, old, pending };
    };
    if (surge === 0) {
      let unavailable = 0;
      const replace: ApiPod[] = [];
      const candidates: ApiPod[] = [];
      for (const node of nodes) {
        const { fresh, old, pending } = sides(node);
        if (fresh.length > 1 || old.length > 1) {
          unavailable++;
          continue;
        }
        const [nw, od] = [fresh[0] ?? null, old[0] ?? null];
        if ((nw === null && od === null) || (nw !== null && od !== null) || (od !== null && pending)) unavailable++;
        else if (nw !== null) {
          if (!this.available(nw, strategy.minReadySeconds)) unavailable++;
        } else if (od !== null) {
          if (!this.available(od, strategy.minReadySeconds)) replace.push(od);
          else if (unavailable < maxUnavailable) candidates.push(od);
        }
      }
      const room = Math.min(candidates.length, Math.max(0, maxUnavailable - unavailable));
      toDelete.push(...replace, ...candidates.slice(0, room));
    } else {
      let surging = 0;
      const allowed: string[] = [];
      const candidates: string[] = [];
      for (const node of nodes) {
        const { fresh, old, pending } = sides(node);
        if (fresh.length > 1 || old.length > 1) {
          surging++;
          continue;
        }
        const [nw, od] = [fresh[0] ?? null, old[0] ?? null];
        if (od === null) continue;
        if (nw === null && pending) surging++;
        else if (nw === null) {
          if (!this.available(od, strategy.minReadySeconds)) allowed.push(node);
          else candidates.push(node);
        } else if (!this.available(nw, strategy.minReadySeconds)) surging++;
        else toDelete.push(od);
      }
      const room = Math.min(candidates.length, Math.max(0, surge - surging));
      toCreate.push(...allowed, ...candidates.slice(0, room));
    }
    for (const p of toDelete) {
      this.world.log(p.node, 'api', `DaemonSet ${def.key}: deletes ${p.name} (generation ${p.spec.generation})`, def.key);
      api.deletePod(p.uid);
    }
    for (const node of toCreate) this.create(node, def.key);
    const r = this.current.get(def.key);
    if (r && !r.done) this.progress(r, def, strategy);
  }

  private create(node: string, key: string): void {
    const tag = `${node}/${key}`;
    if (this.creating.has(tag)) return;
    this.creating.add(tag);
    this.world.q.after(T.controllerMs, () => {
      this.creating.delete(tag);
      const api = this.api;
      const spec = api.desired.get(key)!;
      if (api.available() && !api.podsFor(node, key).some((p) => p.spec.hash === spec.hash)) api.createPod(node, spec);
    });
  }

  /** Count the rollout's updated nodes and the new pods it waits on. */
  private measure(r: Rollout): ApiPod[] {
    const f = r.figures;
    const hash = r.hash;
    const waiting: ApiPod[] = [];
    const waitingOn: string[] = [];
    let updated = 0;
    for (const node of this.nodesOf(this.world.parentDef(f.key))) {
      const pods = this.api.podsFor(node, f.key);
      const fresh = pods.filter((p) => p.spec.hash === hash);
      const ok = fresh.some((p) => this.available(p, r.strategy.minReadySeconds));
      if (ok && fresh.length === pods.length) updated++;
      else if (fresh.length > 0 && !ok) {
        waiting.push(...fresh);
        waitingOn.push(node);
      }
    }
    f.nodesUpdated = updated;
    f.waitingOn = waitingOn;
    return waiting;
  }

  private progress(r: Rollout, def: ParentDef, strategy: RollingUpdate): void {
    const f = r.figures;
    const waiting = this.measure(r);
    const w = this.world;
    if (f.nodesUpdated === f.nodes) {
      r.done = true;
      f.completedAfter = Math.round((w.q.now - r.startedAt) / 100) / 10;
      f.stalled = false;
      w.log('cluster', 'api', `DaemonSet ${def.key}: rollout to generation ${f.generation} complete on ${f.nodes} of ${f.nodes} nodes`, def.key);
      return;
    }
    const line =
      waiting.length === 0
        ? ''
        : `DaemonSet ${def.key}: rollout to generation ${f.generation} waits for ${waiting.map((p) => `${p.name} on ${p.node}`).join(', ')} to be available (${f.nodesUpdated} of ${f.nodes} nodes updated; ${
            scaled(strategy.maxSurge, f.nodes) > 0 ? `maxSurge ${strategy.maxSurge}` : `maxUnavailable ${strategy.maxUnavailable}`
          })`;
    if (line !== '' && line !== r.waitLine) w.log('cluster', 'api', line, def.key);
    r.waitLine = line;
    for (const p of waiting) {
      if (p.restarts === 0 || r.stalledPods.has(p.uid)) continue;
      r.stalledPods.add(p.uid);
      f.stalled = true;
      w.log(
        p.node,
        'api',
        `DaemonSet ${def.key}: rollout to generation ${f.generation} stalled: ${p.name} on ${p.node} restarted without becoming available (restarts ${p.restarts}); the controller goes no further (${f.nodesUpdated} of ${f.nodes} nodes updated)`,
        def.key,
      );
    }
  }
}
