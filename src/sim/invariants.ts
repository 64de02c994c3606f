// Invariants, checked after every event (and at the moments the agent acts). They hold the
// lastseen agent to the promises of docs/architecture.md; for other strategies they are only recorded, since
// breaking them is what those strategies are known for. A violation carries the time and place;
// the run stops at the first one when enforcing, and the seed replays it.
//
// The checks after an event are per node and parent key ("tag"), and a tag's verdict changes only
// when its node's state does (the world is told: World.touch), its key's desired spec does, or
// time passes a deadline (a bound on unserved time). So by default (CheckMode `incremental`) an
// event re-checks the tags of the nodes it touched, the tags of a key whose spec changed, and the
// tags whose next deadline has passed; re-checking any other tag would change nothing. `full`
// re-checks every tag after every event (the reference), `verify` checks incrementally and
// recomputes every skipped tag's inputs, throwing if one changed without a touch.

import { HANG_STARVED_MS } from '../core/fence.js';
import { manifestFile, parentId } from '../core/names.js';
import { type ParentStateName, type Phase, type Reason, reasonText } from '../core/types.js';
import { judged, parentBoundMs, serveBoundMs, unservedBudgetMs } from './bounds.js';
import { faultEnd } from './faults.js';
import type { PodSpec, SimNode } from './model.js';
import { T } from './model.js';
import { parentServes, servedBy } from './outcome.js';
import type { ParentDef } from './schema.js';
import type { World } from './world.js';

const NO_TAGS: Tag[] = [];

/** One parent on one node: what the checks after an event look at. */
interface Tag {
  node: SimNode;
  def: ParentDef;
  /** `${node}/${key}`. */
  tag: string;
  /** Place in the full walk (parents in scenario order, then their nodes). */
  order: number;
  /** The earliest time a check of this tag could fire without any change (Infinity: none). */
  due: number;
  /** verify mode: the inputs when last checked. */
  inputs: string;
}

export interface Violation {
  /** Virtual seconds. */
  t: number;
  node: string;
  key: string;
  invariant:
    | 'activation-while-fresh'
    | 'activation-while-parent-alive'
    | 'gc-without-api'
    | 'checkpoint-not-ready'
    | 'not-served'
    | 'unserved-total'
    | 'checkpoint-not-retired'
    | 'handover-backoff'
    | 'fence-while-fresh'
    | 'fence-while-starved';
  message: string;
}

/** Tolerance for the agent's clock drift and event ordering when comparing agent-side times. */
const SLACK_MS = 1_000;
/**
 * How long a parent must have served before an agent could know it: a Ready beat is written (one
 * interval at most after Ready: the policy's), read (file poll or watch round trip), and the
 * manifest write already under way finishes (actuator).
 */
const SEEN_AFTER_MS = T.agentFilePollMs + T.apiRttMs + T.actuatorMs + SLACK_MS;

export class Invariants {
  readonly violations: Violation[] = [];
  private lastVisible = new Map<string, { at: number; phase: Phase }>();
  private lastReachable = new Map<string, number>();
  private handover = new Map<string, { failures: number; failedAt: number | null; expectMs: number }>();
  private unservedSince = new Map<string, number>();
  /** The parent's container exited unnoticed during the current unserved stretch (staleStatus). */
  private unnoticedDuring = new Set<string>();
  private notParentSince = new Map<string, number>();
  private reported = new Set<string>();
  /** Total unserved time per node/key after the first fault, and whether it was unserved at the last event. */
  private unservedTotal = new Map<string, number>();
  private unservedAt = new Map<string, number>();
  /** The checkpoint manifest was in the folder at the last event. */
  private manifestWas = new Map<string, boolean>();
  /** Since when the parent itself serves on the node (true time). */
  private parentServingSince = new Map<string, number>();
  private budgets = new Map<string, number>();
  /** Every tag in the full walk's order, and by node and key. */
  private tags: Tag[] | null = null;
  private readonly tagsOn = new Map<string, Tag[]>();
  private readonly tagsOf = new Map<string, Tag[]>();
  /** The desired spec of each key when last checked (a rollout changes every node's verdict). */
  private readonly desiredSeen = new Map<string, PodSpec | undefined>();
  /** Tags with a deadline, and the earliest of them. */
  private readonly pending = new Set<Tag>();
  /** Scratch for dueTags. */
  private readonly seen = new Set<Tag>();
  private nextDue = Number.POSITIVE_INFINITY;
  /** The unserved-time count starts at the first fault: every tag is checked then. */
  private firstFaultSwept = false;
  /** Nodes that reached the api-server at the last check, and the time of that check. */
  private readonly reachableNow = new Set<string>();
  private lastCheckAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly world: World,
    /** Stop the run on the first violation (the lastseen strategy). */
    readonly enforce: boolean,
  ) {}

  private buildTags(): Tag[] {
    const w = this.world;
    const tags: Tag[] = [];
    for (const def of w.scenario.parents) {
      for (const n of def.nodes) {
        const t: Tag = { node: w.nodes.get(n)!, def, tag: `${n}/${def.key}`, order: tags.length, due: Number.POSITIVE_INFINITY, inputs: '' };
        tags.push(t);
        const on = this.tagsOn.get(n) ?? [];
        on.push(t);
        this.tagsOn.set(n, on);
        const of = this.tagsOf.get(def.key) ?? [];
        of.push(t);
        this.tagsOf.set(def.key, of);
      }
    }
    return tags;
  }

  private violate(node: string, key: string, invariant: Violation['invariant'], message: string): void {
    const tag = `${invariant}/${node}/${key}`;
    if (this.reported.has(tag)) return;
    this.reported.add(tag);
    const v = { t: Math.round(this.world.q.now) / 1000, node, key, invariant, message };
    this.violations.push(v);
    this.world.log(node, 'invariant', `VIOLATION ${invariant}: ${message}`, key);
  }

  /** A parent's sidecar wrote a round of beats; `apiReach`: its api channels reached the api-server. */
  parentBeat(node: SimNode, key: string, phase: Phase, apiReach: boolean): void {
    const channels = this.world.parentDef(key).policy.channels;
    if (channels.includes('local') || apiReach) this.lastVisible.set(`${node.name}/${key}`, { at: this.world.q.now, phase });
  }

  /**
   * The node lost power: every process of its last boot ended, so a Ready beat from before is no
   * evidence the parent lives (the agent acts on that too: reboot-aware activation, no startupGrace).
   */
  nodeRebooted(node: SimNode): void {
    // Beats are recorded for the parents scheduled on the node only.
    for (const def of this.world.parentsOn(node.name)) this.lastVisible.delete(`${node.name}/${def.key}`);
  }

  /** The core asked to activate: the parent must not have been fresh (Ready) on a channel the agent could see. */
  activating(node: SimNode, key: string, r: Reason): void {
    const reason = reasonText(r);
    if (r.code === 'ParentDeleted') {
      // Covering a pod being deleted while it still beats Ready is the point (deletion.ts): only a
      // deletion the api-server really made counts.
      if (!this.world.api.deletedOn(node.name, key))
        this.violate(node.name, key, 'activation-while-fresh', `activated (${reason}) with no pod of it deleted on this node`);
      return;
    }
    const lv = this.lastVisible.get(`${node.name}/${key}`);
    // The window the core judges by (widened for a parent declaring a slow interval, beatInterval).
    const p = judged(this.world.parentDef(key));
    // A parent that beat Ready less than (window - interval) ago was certainly fresh to an agent
    // that polls its files every second and its watch within a round trip.
    // A hand-over deadline is not a silence: it may fall on the very moment the parent's first
    // Ready beat is written, before any agent could have seen it (file poll, watch round trip).
    // Nor can any agent react to a beat it has not observed yet: a beat written at the very moment
    // a window ends (a parent that missed three beats and writes the fourth on the edge) is seen
    // one folder notice later, after the window's verdict.
    const unseenMs = r.code === 'HandoverFailed' ? T.agentFilePollMs + T.apiRttMs : T.agentFileNoticeMs;
    const age = lv ? this.world.q.now - lv.at : Number.POSITIVE_INFINITY;
    if (lv && lv.phase === 'Ready' && age < p.windowMs - p.intervalMs && age >= unseenMs) {
      this.violate(
        node.name,
        key,
        'activation-while-fresh',
        `activated (${reason}) ${((this.world.q.now - lv.at) / 1000).toFixed(1)}s after a visible Ready beat (window ${p.windowMs / 1000}s)`,
      );
    }
  }

  /** `full` checks: the node reaches the api-server at this event. */
  reachable(node: SimNode): void {
    this.lastReachable.set(node.name, this.world.q.now);
  }

  /**
   * Incremental checks: the node's reachability changed at this event. While it lasts, the last
   * time it was reachable is the last check; once lost, the check before the one that saw it lost.
   */
  reachability(node: SimNode, r: boolean): void {
    if (this.world.check === 'full') return;
    if (r) this.reachableNow.add(node.name);
    else if (this.reachableNow.delete(node.name)) this.lastReachable.set(node.name, this.lastCheckAt);
  }

  /**
   * The core asked to fence pod `podUid`: never a parent fresh on any channel (its latest visible
   * beat a Ready one, well within the window), never a pod other than this key's on this node.
   */
  fencing(node: SimNode, key: string, podUid: string): void {
    const k = this.world.kubelets.get(node.name);
    const pod = k?.pods.get(podUid);
    if (!pod) return; // gone already (deleted, or the node rebooted): the fence finds nothing to stop
    if (pod.spec?.key !== key || pod.role !== 'parent') {
      this.violate(node.name, key, 'fence-while-fresh', `fence of pod ${podUid}, which is not a ${key} parent on this node`);
      return;
    }
    const lv = this.lastVisible.get(`${node.name}/${key}`);
    const p = judged(this.world.parentDef(key));
    const age = lv ? this.world.q.now - lv.at : Number.POSITIVE_INFINITY;
    if (lv && lv.phase === 'Ready' && age < p.windowMs - p.intervalMs && !pod.hung)
      this.violate(node.name, key, 'fence-while-fresh', `fence ${(age / 1000).toFixed(1)}s after a visible Ready beat of a process that answers`);
    // A process waiting for a CPU is slow, not hung: fenced only once it has not answered for
    // HANG_STARVED_MS (counted from when it stopped answering, a hang before the starvation included).
    if (pod.hung && pod.starved && pod.hungSince !== null && this.world.q.now - pod.hungSince < HANG_STARVED_MS)
      this.violate(
        node.name,
        key,
        'fence-while-starved',
        `fence of a process starved of CPU, ${((this.world.q.now - pod.hungSince) / 1000).toFixed(1)}s after it stopped answering (the bound is ${HANG_STARVED_MS / 1000}s)`,
      );
  }

  /** The core asked to collect: the api-server must have been reachable (within one probe period). */
  collecting(node: SimNode, key: string): void {
    const at = this.world.check !== 'full' && this.reachableNow.has(node.name) ? this.lastCheckAt : this.lastReachable.get(node.name);
    if (at === undefined || this.world.q.now - at > T.agentProbeMs + T.apiRttMs + node.net.latencyMs + SLACK_MS) {
      this.violate(node.name, key, 'gc-without-api', 'garbage collection while the api-server was unreachable');
    }
  }

  checkpointStored(node: SimNode, key: string, spec: PodSpec): void {
    if (!this.world.readySpecs.has(spec.hash))
      this.violate(node.name, key, 'checkpoint-not-ready', `stored generation ${spec.generation}, which never reached Ready`);
  }

  agentStarted(node: SimNode, key: string): void {
    this.handover.delete(`${node.name}/${key}`);
  }

  /** Hand-overs follow the backoff schedule: after the n-th failure wait initial * 2^(n-1) (capped). */
  transition(node: SimNode, key: string, from: ParentStateName, to: ParentStateName, mono: number): void {
    const tag = `${node.name}/${key}`;
    const hb = this.world.parentDef(key).policy.handoverBackoff;
    const h = this.handover.get(tag) ?? { failures: 0, failedAt: null, expectMs: 0 };
    this.handover.set(tag, h);
    if (to === 'Healthy') {
      h.failures = 0;
      h.failedAt = null;
    } else if (from === 'HandingOver' && to === 'Active') {
      h.failures++;
      h.failedAt = mono;
      h.expectMs = Math.min(hb.maxMs, hb.initialMs * 2 ** (h.failures - 1));
    } else if (from === 'Active' && to === 'HandingOver' && h.failedAt !== null && mono - h.failedAt < h.expectMs - SLACK_MS) {
      this.violate(
        node.name,
        key,
        'handover-backoff',
        `hand-over retried ${((mono - h.failedAt) / 1000).toFixed(1)}s after failure ${h.failures}; the schedule says ${h.expectMs / 1000}s`,
      );
    }
  }

  /**
   * Liveness after faults, after every event. `touched`: the nodes the event changed, in node
   * order (World.touch). Returns false when the run must stop.
   */
  afterEvent(touched: readonly SimNode[] = []): boolean {
    const w = this.world;
    const now = w.q.now;
    if (this.tags === null) this.tags = this.buildTags();
    const tags = this.tags;
    if (w.check === 'full') {
      for (const t of tags) this.checkTag(t, now);
    } else {
      let due: Tag[];
      if (!this.firstFaultSwept && w.firstFaultAt !== null && now >= w.firstFaultAt) {
        // From the first fault on every unserved tag counts: look at them all once.
        this.firstFaultSwept = true;
        due = tags;
      } else due = this.dueTags(touched, now);
      for (const t of due) this.checkTag(t, now);
      if (w.check === 'verify') this.verify(due, now);
    }
    this.lastCheckAt = now;
    return !(this.enforce && this.violations.length > 0);
  }

  /** The tags an event could have changed, or whose deadline passed, in the full walk's order. */
  private dueTags(touched: readonly SimNode[], now: number): Tag[] {
    const w = this.world;
    const seen = this.seen;
    seen.clear();
    for (const n of touched) for (const t of this.tagsOn.get(n.name) ?? []) seen.add(t);
    for (const def of w.scenario.parents) {
      const d = w.api.desired.get(def.key);
      if (this.desiredSeen.has(def.key) && this.desiredSeen.get(def.key) === d) continue;
      this.desiredSeen.set(def.key, d);
      for (const t of this.tagsOf.get(def.key)!) seen.add(t);
    }
    // A tag is checked a millisecond early at worst, so float rounding never makes one late.
    if (now > this.nextDue - 1) {
      this.nextDue = Number.POSITIVE_INFINITY;
      for (const t of this.pending) {
        if (now > t.due - 1) seen.add(t);
        else this.nextDue = Math.min(this.nextDue, t.due);
      }
    }
    if (seen.size === 0) return NO_TAGS;
    const due = [...seen];
    if (due.length > 1) due.sort((a, b) => a.order - b.order);
    return due;
  }

  /** One tag's checks (the body of the full walk). Records the tag's next deadline. */
  private checkTag(t: Tag, now: number): void {
    const w = this.world;
    const { def, node, tag } = t;
    const n = node.name;
    const desired = w.api.desired.get(def.key);
    const servable = node.up && (desired?.healthy || node.disk.checkpoints.has(parentId(def.namespace, def.key)));
    const by = servedBy(w, n, def.key);
    let due = Number.POSITIVE_INFINITY;
    this.checkActivation(node, def.key, by, now, def.policy.intervalMs);
    due = Math.min(due, this.countUnserved(tag, def.key, servable && by === null, now));
    if (servable && by === null) {
      const since = Math.max(this.unservedSince.get(tag) ?? now, w.lastFaultEnd);
      this.unservedSince.set(tag, this.unservedSince.get(tag) ?? now);
      const k = w.kubelets.get(n);
      if (k) for (const p of k.pods.values()) if (p.unnoticed !== null && p.role === 'parent' && p.spec?.key === def.key) this.unnoticedDuring.add(tag);
      const bound = serveBoundMs(def, w.scenario.kubelet, desired?.healthy ?? true, this.unnoticedDuring.has(tag));
      if (now - since > bound) this.violate(n, def.key, 'not-served', `unserved for over ${Math.round(bound / 1000)}s after the last fault ended`);
      else due = Math.min(due, since + bound);
    } else {
      this.unservedSince.delete(tag);
      this.unnoticedDuring.delete(tag);
    }
    if (node.up && desired?.healthy && !parentServes(w, n, def.key)) {
      const since = Math.max(this.notParentSince.get(tag) ?? now, w.lastFaultEnd);
      this.notParentSince.set(tag, this.notParentSince.get(tag) ?? now);
      const bound = parentBoundMs(def, w.scenario.kubelet);
      if (now - since > bound)
        this.violate(
          n,
          def.key,
          'checkpoint-not-retired',
          `the parent can become Ready but has not served alone for over ${Math.round(bound / 1000)}s after the last fault ended`,
        );
      else due = Math.min(due, since + bound);
    } else this.notParentSince.delete(tag);
    t.due = due;
    if (due === Number.POSITIVE_INFINITY) this.pending.delete(t);
    else {
      this.pending.add(t);
      this.nextDue = Math.min(this.nextDue, due);
    }
  }

  /** What a tag's checks read, as one string (verify mode). */
  private inputs(t: Tag): string {
    const w = this.world;
    const { def, node } = t;
    const n = node.name;
    const desired = w.api.desired.get(def.key);
    const k = w.kubelets.get(n);
    let unnoticed = false;
    if (k) for (const p of k.pods.values()) if (p.unnoticed !== null && p.role === 'parent' && p.spec?.key === def.key) unnoticed = true;
    return [
      node.up,
      desired?.hash,
      desired?.healthy,
      node.disk.checkpoints.has(parentId(def.namespace, def.key)),
      servedBy(w, n, def.key),
      parentServes(w, n, def.key),
      node.disk.manifests.has(manifestFile(def.namespace, def.key)),
      unnoticed,
    ].join('|');
  }

  private verify(checked: Tag[], now: number): void {
    const fresh = new Set(checked);
    for (const t of this.tags!) {
      const inputs = this.inputs(t);
      if (!fresh.has(t) && inputs !== t.inputs) throw new Error(`verify: ${t.tag} changed at ${now} ms without a touch (${t.inputs} -> ${inputs})`);
      t.inputs = inputs;
    }
  }

  /**
   * A checkpoint is never activated while its parent is alive on this node: when the checkpoint's
   * manifest appears, the parent must not have been serving (running and Ready, by the kubelet's
   * ground truth) for longer than an agent needs to learn of it.
   */
  private checkActivation(node: SimNode, key: string, by: ReturnType<typeof servedBy>, now: number, intervalMs: number): void {
    const tag = `${node.name}/${key}`;
    if (by === 'parent') this.parentServingSince.set(tag, this.parentServingSince.get(tag) ?? now);
    else this.parentServingSince.delete(tag);
    const def = this.world.parentDef(key);
    const present = node.disk.manifests.has(manifestFile(def.namespace, key));
    const was = this.manifestWas.get(tag) ?? false;
    this.manifestWas.set(tag, present);
    if (!present || was) return;
    const since = this.parentServingSince.get(tag);
    // A parent deleted in the api-server (its kubelet may not have heard yet: a relist after an
    // outage) or serving through its preStop hook is going: its copy may start beside it.
    const deleted = new Set(this.world.api.deletingOn(node.name));
    const leaving = [...(this.world.kubelets.get(node.name)?.pods.values() ?? [])].some(
      (p) => p.role === 'parent' && p.spec?.key === key && (p.preStopUntil !== null || deleted.has(p.uid)),
    );
    if (since !== undefined && now - since > intervalMs + SEEN_AFTER_MS && !leaving) {
      this.violate(
        node.name,
        key,
        'activation-while-parent-alive',
        `checkpoint activated while the parent had been serving on this node for ${((now - since) / 1000).toFixed(1)}s`,
      );
    }
  }

  /**
   * The total unserved time after the first fault stays within a budget independent of the run's
   * length. Returns when the budget runs out if nothing changes (Infinity: not counting).
   */
  private countUnserved(tag: string, key: string, unserved: boolean, now: number): number {
    const w = this.world;
    if (w.firstFaultAt === null || now < w.firstFaultAt) return Number.POSITIVE_INFINITY;
    let due = Number.POSITIVE_INFINITY;
    const since = this.unservedAt.get(tag);
    if (since !== undefined) {
      const total = (this.unservedTotal.get(tag) ?? 0) + (now - since);
      this.unservedTotal.set(tag, total);
      const budget = this.budget(key);
      if (total > budget)
        this.violate(
          tag.split('/')[0]!,
          key,
          'unserved-total',
          `unserved ${Math.round(total / 1000)}s in total since the first fault; the budget for this scenario's faults is ${Math.round(budget / 1000)}s`,
        );
    }
    if (unserved) {
      this.unservedAt.set(tag, now);
      // While it stays unserved, the budget runs out at this time (over it: already reported).
      const left = this.budget(key) - (this.unservedTotal.get(tag) ?? 0);
      if (left >= 0) due = now + left;
    } else this.unservedAt.delete(tag);
    return due;
  }

  private budget(key: string): number {
    let budget = this.budgets.get(key);
    if (budget === undefined) {
      const w = this.world;
      budget = unservedBudgetMs(
        w.parentDef(key),
        w.scenario.kubelet,
        w.scenario.spec.faults.map((f) => ({ ...f, end: faultEnd(f) })),
      );
      this.budgets.set(key, budget);
    }
    return budget;
  }
}
