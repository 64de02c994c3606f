// Ground truth about service, measured from the outside (kubelet container states, not anyone's
// belief): who serves a parent key on a node, and the figures a run reports for its focus key.
import { manifestFile } from '../core/names.js';
import type { RolloutFigures } from './daemonset.js';
import type { World } from './world.js';

export type ServedBy = 'parent' | 'checkpoint' | null;

export function servedBy(world: World, node: string, key: string): ServedBy {
  const k = world.kubelets.get(node);
  if (!k || !world.nodes.get(node)!.up) return null;
  return k.answeredBy((spec) => spec.key === key);
}

/** The checkpoint is active: its manifest is in the folder or its copy still runs. */
const manifestNames = new WeakMap<object, string>();

export function checkpointActive(world: World, node: string, key: string): boolean {
  const n = world.nodes.get(node)!;
  const def = world.parentDef(key);
  // Called for every parent on every node after every event: no allocation on this path.
  let file = manifestNames.get(def);
  if (file === undefined) {
    file = manifestFile(def.namespace, key);
    manifestNames.set(def, file);
  }
  if (n.disk.manifests.has(file)) return true;
  const k = world.kubelets.get(node);
  if (!k) return false;
  for (const p of k.pods.values()) if (p.role === 'checkpoint' && p.spec?.key === key && !p.removed) return true;
  return false;
}

/** The parent itself serves and its checkpoint is retired. */
export function parentServes(world: World, node: string, key: string): boolean {
  return servedBy(world, node, key) === 'parent' && !checkpointActive(world, node, key);
}

/** Who runs and serves a key on a node: the parent's process, and the spec generation of a checkpoint copy that serves. */
function serving(world: World, node: string, key: string): { parent: boolean; checkpointGeneration: number | null } {
  const k = world.kubelets.get(node);
  let parent = false;
  let checkpointGeneration: number | null = null;
  if (!k || !world.nodes.get(node)!.up) return { parent, checkpointGeneration };
  for (const p of k.pods.values()) {
    if (p.spec?.key !== key || !k.serving(p)) continue;
    if (p.role === 'parent') parent = true;
    else if (p.role === 'checkpoint') checkpointGeneration = p.spec.generation;
  }
  return { parent, checkpointGeneration };
}

/**
 * The focus key's recovery from one fault. A fault's window runs from its `at` until the next fault
 * that starts later (faults at the same moment share one), or the end of the run; every figure is
 * counted inside it, in seconds from the fault's `at`, with the conventions of OutcomeFigures.
 */
export interface FaultOutcome {
  /** The fault's index in the scenario's `faults` and its type. */
  index: number;
  type: string;
  /** Virtual seconds of the fault and of the end of its window. */
  at: number;
  until: number;
  /** Served again after being unserved in the window (0: never unserved in it; null: not within the window). */
  servedAt: number | null;
  /** The parent itself served with its checkpoint retired (same conventions). */
  parentServedAt: number | null;
  unservedSeconds: number;
  /** The checkpoint's manifest appeared in the static-pod folder (re-activations after a lost hand-over included). */
  activations: number;
  /** Hand-overs the lastseen agent started (Active -> HandingOver); other strategies have none. */
  handoverAttempts: number;
  /** The spec generations of the checkpoint copies that served the key (it was served by them), in the order they first did; empty: none did. */
  checkpointGenerations: number[];
  /**
   * Seconds a checkpoint copy served beside a parent that had been serving since before that
   * checkpoint's activation: an activation while the parent was alive. Should be 0 (a parent that
   * comes back beside its active checkpoint, a hand-over, is not counted).
   */
  checkpointWhileParentAliveSeconds: number;
}

/** The focus key over the whole run. */
export interface OutcomeTotals {
  /** Unserved time from the moment the key was first served (the cluster's cold start is not counted). */
  unservedSeconds: number;
  activations: number;
  handoverAttempts: number;
  /** As in FaultOutcome, over the whole run. */
  checkpointGenerations: number[];
  checkpointWhileParentAliveSeconds: number;
}

export interface OutcomeFigures {
  /** Virtual seconds of the first fault (null: no fault). */
  faultAt: number | null;
  /** Seconds from the fault until the key was served again (0: never unserved; null: not again). */
  servedAt: number | null;
  /** Seconds until the parent itself served with the checkpoint retired (same conventions). */
  parentServedAt: number | null;
  unservedSeconds: number;
  /** Who served the focus key at the end. */
  finalServedBy: ServedBy;
  /** The same figures after each fault, in the order of their `at`. */
  perFault: FaultOutcome[];
  totals: OutcomeTotals;
  /** Each rollout's progress through the parent's nodes (the DaemonSet controller's, src/sim/daemonset.ts); always set by a run. */
  rollouts?: RolloutFigures[];
}

interface Window {
  index: number;
  type: string;
  at: number;
  until: number;
  unservedMs: number;
  everUnserved: boolean;
  everNotParent: boolean;
  servedAgainAt: number | null;
  parentAgainAt: number | null;
  activations: number;
  handoverAttempts: number;
  generations: number[];
  besideAliveMs: number;
}

const round1 = (ms: number) => Math.round(ms / 100) / 10;

export class Outcome {
  private lastT: number | null = null;
  private lastServed = true;
  private unservedMs = 0;
  private everUnserved = false;
  private everNotParent = false;
  private servedAgainAt: number | null = null;
  private parentAgainAt: number | null = null;
  /** Per-fault windows in the order of `at`; `cur` is the index of the first of the group now open (-1: before the first fault). */
  private readonly windows: Window[];
  private cur = -1;
  private curEnd = -1;
  /** The first window not opened yet. */
  private next = 0;
  /** Whole run, from the first moment the focus key was served. */
  private everServed = false;
  private runLastT: number | null = null;
  private runLastServed = true;
  private runUnservedMs = 0;
  private activations = 0;
  private handoverAttempts = 0;
  private manifestWas = false;
  private readonly manifest: string;
  /** The state since the last event, for the interval up to this one. */
  private prevT: number | null = null;
  private prevGeneration: number | null = null;
  private prevBesideAlive = false;
  /** When the checkpoint's manifest last appeared, and since when the parent serves (null: it does not). */
  private activatedAt = -1;
  private parentSince: number | null = null;
  private readonly generations: number[] = [];
  private besideAliveMs = 0;

  constructor(private readonly world: World) {
    const faults = world.scenario.spec.faults;
    const order = faults.map((f, index) => ({ f, index })).sort((a, b) => a.f.at - b.f.at || a.index - b.index);
    const end = world.scenario.spec.duration;
    this.windows = order.map(({ f, index }) => ({
      index,
      type: f.type,
      at: f.at,
      until: Math.max(f.at, order.find((o) => o.f.at > f.at)?.f.at ?? end),
      unservedMs: 0,
      everUnserved: false,
      everNotParent: false,
      servedAgainAt: null,
      parentAgainAt: null,
      activations: 0,
      handoverAttempts: 0,
      generations: [],
      besideAliveMs: 0,
    }));
    const { key } = world.scenario.focus;
    this.manifest = manifestFile(world.parentDef(key).namespace, key);
  }

  /** The windows of the group now open (faults at the same moment share one). */
  private *open(): Generator<Window> {
    if (this.cur < 0) return;
    for (let i = this.cur; i < this.curEnd; i++) yield this.windows[i]!;
  }

  /** A parent's state changed on a node (the lastseen agent's core). */
  transition(node: string, key: string, from: string, to: string): void {
    const focus = this.world.scenario.focus;
    if (node !== focus.node || key !== focus.key || from !== 'Active' || to !== 'HandingOver') return;
    this.handoverAttempts++;
    for (const win of this.open()) win.handoverAttempts++;
  }

  afterEvent(): void {
    const w = this.world;
    if (w.keepLogs) {
      for (const def of w.scenario.parents) {
        for (const n of def.nodes) {
          const by = servedBy(w, n, def.key);
          w.record(`serve/${n}/${def.key}`, by ?? (w.nodes.get(n)!.up ? 'none' : 'node-down'));
          w.record(`checkpoint/${n}/${def.key}`, checkpointActive(w, n, def.key) ? 'active' : 'inactive');
        }
      }
    }
    const { node, key } = w.scenario.focus;
    const now = w.q.now;
    const by = servedBy(w, node, key);
    const served = by !== null;
    // The interval since the last event belongs to the window open then.
    if (this.lastT !== null && !this.lastServed) for (const win of this.open()) win.unservedMs += now - this.lastT;
    if (this.runLastT !== null && !this.runLastServed) this.runUnservedMs += now - this.runLastT;
    while (this.next < this.windows.length && this.windows[this.next]!.at <= now) {
      this.cur = this.next;
      this.curEnd = this.cur;
      while (this.curEnd < this.windows.length && this.windows[this.curEnd]!.at === this.windows[this.cur]!.at) this.curEnd++;
      this.next = this.curEnd;
    }
    // Who served during the interval since the last event: the state then held until now.
    if (this.prevT !== null && now > this.prevT) {
      const g = this.prevGeneration;
      if (g !== null && !this.generations.includes(g)) this.generations.push(g);
      if (this.prevBesideAlive) this.besideAliveMs += now - this.prevT;
      for (const win of this.open()) {
        if (g !== null && !win.generations.includes(g)) win.generations.push(g);
        if (this.prevBesideAlive) win.besideAliveMs += now - this.prevT;
      }
    }
    const present = w.nodes.get(node)!.disk.manifests.has(this.manifest);
    if (present && !this.manifestWas) {
      this.activations++;
      this.activatedAt = now;
      for (const win of this.open()) win.activations++;
    }
    this.manifestWas = present;
    const s = serving(w, node, key);
    if (!s.parent) this.parentSince = null;
    else if (this.parentSince === null) this.parentSince = now;
    this.prevT = now;
    this.prevGeneration = by === 'checkpoint' ? s.checkpointGeneration : null;
    this.prevBesideAlive = s.checkpointGeneration !== null && this.parentSince !== null && this.parentSince < this.activatedAt;
    if (served) this.everServed = true;
    if (this.everServed) {
      this.runLastT = now;
      this.runLastServed = served;
    }
    const at = w.firstFaultAt;
    if (at === null || now < at) return;
    if (this.lastT !== null && !this.lastServed) this.unservedMs += now - this.lastT;
    // parentServes(), with the servedBy() above.
    const parent = by === 'parent' && !checkpointActive(w, node, key);
    if (!served) this.everUnserved = true;
    if (!parent) this.everNotParent = true;
    if (served && this.everUnserved && this.servedAgainAt === null) this.servedAgainAt = now;
    if (parent && this.everNotParent && this.parentAgainAt === null) this.parentAgainAt = now;
    for (const win of this.open()) {
      if (!served) win.everUnserved = true;
      if (!parent) win.everNotParent = true;
      if (served && win.everUnserved && win.servedAgainAt === null) win.servedAgainAt = now;
      if (parent && win.everNotParent && win.parentAgainAt === null) win.parentAgainAt = now;
    }
    this.lastT = now;
    this.lastServed = served;
  }

  /** The generations served, with the one serving from the last event to the end of the run. */
  private withTail(generations: number[], endAt: number): number[] {
    const g = this.prevT !== null && endAt > this.prevT ? this.prevGeneration : null;
    return g !== null && !generations.includes(g) ? [...generations, g] : [...generations];
  }

  private tailBeside(endAt: number): number {
    return this.prevT !== null && this.prevBesideAlive ? endAt - this.prevT : 0;
  }

  figures(endAt: number): OutcomeFigures {
    const w = this.world;
    const at = w.firstFaultAt;
    const sec = (t: number | null) => (t === null || at === null ? null : Math.round((t - at) / 100) / 10);
    const tail = this.lastT !== null && !this.lastServed ? endAt - this.lastT : 0;
    const runTail = this.runLastT !== null && !this.runLastServed ? endAt - this.runLastT : 0;
    const perFault = this.windows.map((win, i) => {
      const open = i >= this.cur && i < this.curEnd;
      const since = (t: number | null) => (t === null ? null : round1(t - win.at));
      return {
        index: win.index,
        type: win.type,
        at: win.at / 1000,
        until: Math.min(win.until, endAt) / 1000,
        servedAt: !win.everUnserved ? 0 : since(win.servedAgainAt),
        parentServedAt: !win.everNotParent ? 0 : since(win.parentAgainAt),
        unservedSeconds: round1(win.unservedMs + (open ? tail : 0)),
        activations: win.activations,
        handoverAttempts: win.handoverAttempts,
        checkpointGenerations: open ? this.withTail(win.generations, endAt) : [...win.generations],
        checkpointWhileParentAliveSeconds: round1(win.besideAliveMs + (open ? this.tailBeside(endAt) : 0)),
      };
    });
    return {
      faultAt: at === null ? null : at / 1000,
      servedAt: !this.everUnserved ? 0 : sec(this.servedAgainAt),
      parentServedAt: !this.everNotParent ? 0 : sec(this.parentAgainAt),
      unservedSeconds: round1(this.unservedMs + tail),
      finalServedBy: servedBy(w, w.scenario.focus.node, w.scenario.focus.key),
      perFault,
      totals: {
        unservedSeconds: round1(this.runUnservedMs + runTail),
        activations: this.activations,
        handoverAttempts: this.handoverAttempts,
        checkpointGenerations: this.withTail(this.generations, endAt),
        checkpointWhileParentAliveSeconds: round1(this.besideAliveMs + this.tailBeside(endAt)),
      },
      rollouts: w.api.daemonsets.figures(),
    };
  }
}
