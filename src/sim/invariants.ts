// Invariants, checked after every event (and at the moments the agent acts). They hold the
// lastseen agent to the promises of docs/architecture.md; for other strategies they are only recorded, since
// breaking them is what those strategies are known for. A violation carries the time and place;
// the run stops at the first one when enforcing, and the seed replays it.
import type { ParentStateName, Phase } from '../core/types.js';
import { parentId } from '../core/names.js';
import { parentBoundMs, serveBoundMs } from './bounds.js';
import type { PodSpec, SimNode } from './model.js';
import { T } from './model.js';
import { parentServes, servedBy } from './outcome.js';
import type { World } from './world.js';

export interface Violation {
  /** Virtual seconds. */
  t: number;
  node: string;
  key: string;
  invariant: 'activation-while-fresh' | 'gc-without-api' | 'checkpoint-not-ready' | 'not-served' | 'checkpoint-not-retired' | 'handover-backoff';
  message: string;
}

/** Tolerance for the agent's clock drift and event ordering when comparing agent-side times. */
const SLACK_MS = 1_000;

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

  /** The core asked to activate: the parent must not have been fresh (Ready) on a channel the agent could see. */
  activating(node: SimNode, key: string, reason: string): void {
    const lv = this.lastVisible.get(`${node.name}/${key}`);
    const p = this.world.parentDef(key).policy;
    // A parent that beat Ready less than (window - interval) ago was certainly fresh to an agent
    // that polls its files every second and its watch within a round trip.
    // A hand-over deadline is not a silence: it may fall on the very moment the parent's first
    // Ready beat is written, before any agent could have seen it (file poll, watch round trip).
    const unseenMs = reason.startsWith('HandoverFailed') ? T.agentFilePollMs + T.apiRttMs : 0;
    const age = lv ? this.world.q.now - lv.at : Number.POSITIVE_INFINITY;
    if (lv && lv.phase === 'Ready' && age < p.windowMs - p.intervalMs && age >= unseenMs) {
      this.violate(node.name, key, 'activation-while-fresh', `activated (${reason}) ${((this.world.q.now - lv.at) / 1000).toFixed(1)}s after a visible Ready beat (window ${p.windowMs / 1000}s)`);
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
    if (!this.world.readySpecs.has(spec.hash)) this.violate(node.name, key, 'checkpoint-not-ready', `stored generation ${spec.generation}, which never reached Ready`);
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
      this.violate(node.name, key, 'handover-backoff', `hand-over retried ${((mono - h.failedAt) / 1000).toFixed(1)}s after failure ${h.failures}; the schedule says ${h.expectMs / 1000}s`);
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
        if (servable && servedBy(w, n, def.key) === null) {
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
          if (now - since > bound) this.violate(n, def.key, 'checkpoint-not-retired', `the parent can become Ready but has not served alone for over ${Math.round(bound / 1000)}s after the last fault ended`);
        } else this.notParentSince.delete(tag);
      }
    }
    return !(this.enforce && this.violations.length > 0);
  }
}
