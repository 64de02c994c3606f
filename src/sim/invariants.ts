// Invariants, checked after every event (and at the moments the agent acts). They hold the
// lastseen agent to the promises of docs/architecture.md; for other strategies they are only recorded, since
// breaking them is what those strategies are known for. A violation carries the time and place;
// the run stops at the first one when enforcing, and the seed replays it.
import { type ParentStateName, type Phase, type Reason, reasonText } from '../core/types.js';
import { parentId } from '../core/names.js';
import { manifestFile } from '../core/names.js';
import { faultEnd } from './faults.js';
import { parentBoundMs, serveBoundMs, unservedBudgetMs } from './bounds.js';
import type { PodSpec, SimNode } from './model.js';
import { T } from './model.js';
import { parentServes, servedBy } from './outcome.js';
import type { World } from './world.js';

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
    | 'handover-backoff';
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

  constructor(
    private readonly world: World,
    /** Stop the run on the first violation (the lastseen strategy). */
    readonly enforce: boolean,
  ) {}

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
    for (const k of [...this.lastVisible.keys()]) if (k.startsWith(`${node.name}/`)) this.lastVisible.delete(k);
  }

  /** The core asked to activate: the parent must not have been fresh (Ready) on a channel the agent could see. */
  activating(node: SimNode, key: string, r: Reason): void {
    const reason = reasonText(r);
    const lv = this.lastVisible.get(`${node.name}/${key}`);
    const p = this.world.parentDef(key).policy;
    // A parent that beat Ready less than (window - interval) ago was certainly fresh to an agent
    // that polls its files every second and its watch within a round trip.
    // A hand-over deadline is not a silence: it may fall on the very moment the parent's first
    // Ready beat is written, before any agent could have seen it (file poll, watch round trip).
    const unseenMs = r.code === 'HandoverFailed' ? T.agentFilePollMs + T.apiRttMs : 0;
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

  reachable(node: SimNode): void {
    this.lastReachable.set(node.name, this.world.q.now);
  }

  /** The core asked to collect: the api-server must have been reachable (within one probe period). */
  collecting(node: SimNode, key: string): void {
    const at = this.lastReachable.get(node.name);
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

  /** Liveness after faults. Returns false when the run must stop. */
  afterEvent(): boolean {
    const w = this.world;
    const now = w.q.now;
    for (const def of w.scenario.parents) {
      const desired = w.api.desired.get(def.key);
      for (const n of def.nodes) {
        const node = w.nodes.get(n)!;
        const tag = `${n}/${def.key}`;
        const servable = node.up && (desired?.healthy || node.disk.checkpoints.has(parentId(def.namespace, def.key)));
        const by = servedBy(w, n, def.key);
        this.checkActivation(node, def.key, by, now, def.policy.intervalMs);
        this.countUnserved(tag, def.key, servable && by === null, now);
        if (servable && by === null) {
          const since = Math.max(this.unservedSince.get(tag) ?? now, w.lastFaultEnd);
          this.unservedSince.set(tag, this.unservedSince.get(tag) ?? now);
          const k = w.kubelets.get(n);
          if (k) for (const p of k.pods.values()) if (p.unnoticed !== null && p.role === 'parent' && p.spec?.key === def.key) this.unnoticedDuring.add(tag);
          const bound = serveBoundMs(def, w.scenario.kubelet, desired?.healthy ?? true, this.unnoticedDuring.has(tag));
          if (now - since > bound) this.violate(n, def.key, 'not-served', `unserved for over ${Math.round(bound / 1000)}s after the last fault ended`);
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
        } else this.notParentSince.delete(tag);
      }
    }
    return !(this.enforce && this.violations.length > 0);
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
    if (since !== undefined && now - since > intervalMs + SEEN_AFTER_MS) {
      this.violate(
        node.name,
        key,
        'activation-while-parent-alive',
        `checkpoint activated while the parent had been serving on this node for ${((now - since) / 1000).toFixed(1)}s`,
      );
    }
  }

  /** The total unserved time after the first fault stays within a budget independent of the run's length. */
  private countUnserved(tag: string, key: string, unserved: boolean, now: number): void {
    const w = this.world;
    if (w.firstFaultAt === null || now < w.firstFaultAt) return;
    const since = this.unservedAt.get(tag);
    if (since !== undefined) {
      const total = (this.unservedTotal.get(tag) ?? 0) + (now - since);
      this.unservedTotal.set(tag, total);
      let budget = this.budgets.get(key);
      if (budget === undefined) {
        budget = unservedBudgetMs(
          w.parentDef(key),
          w.scenario.kubelet,
          w.scenario.spec.faults.map((f) => ({ ...f, end: faultEnd(f) })),
        );
        this.budgets.set(key, budget);
      }
      if (total > budget)
        this.violate(
          tag.split('/')[0]!,
          key,
          'unserved-total',
          `unserved ${Math.round(total / 1000)}s in total since the first fault; the budget for this scenario's faults is ${Math.round(budget / 1000)}s`,
        );
    }
    if (unserved) this.unservedAt.set(tag, now);
    else this.unservedAt.delete(tag);
  }
}
