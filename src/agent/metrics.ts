// Prometheus metrics of one agent. A registry per agent (not the global one) so tests and the
// simulator can run several agents in one process.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { ParentStateName } from '../core/types.js';
import { VERSION } from '../version.js';
import type { ParentView } from './agent.js';

const STATES: ParentStateName[] = ['Pending', 'Healthy', 'Starting', 'Silent', 'Active', 'HandingOver', 'Orphaned'];
/** Label values of the counters that alerts take `increase()` of (deploy/monitoring/rules.yaml). */
export const HANDOVER_RESULTS = ['started', 'succeeded', 'failed'] as const;
export const BAD_INPUT_SOURCES = ['lease', 'annotation', 'local'] as const;
/** The core's activation reasons (Reason.code of a transition to Active), exported at 0 from the start. */
export const ACTIVATION_REASONS = [
  'SilenceConfirmed',
  'Silent',
  'ApiUnreachable',
  'ParentStopping',
  'ParentDeleted',
  'KubeletBlind',
  'StartTimeout',
  'HandoverFailed',
] as const;

export class AgentMetrics {
  readonly registry = new Registry();
  readonly parents = new Gauge({ name: 'lastseen_parents', help: 'Parents on this node by state', labelNames: ['state'], registers: [this.registry] });
  readonly activations = new Counter({
    name: 'lastseen_activations_total',
    help: 'Checkpoint activations, by reason',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly handovers = new Counter({
    name: 'lastseen_handovers_total',
    help: 'Hand-overs, by result (started, succeeded, failed)',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly retirements = new Counter({ name: 'lastseen_retirements_total', help: 'Checkpoint retirements', registers: [this.registry] });
  readonly fences = new Counter({
    name: 'lastseen_fences_total',
    help: "A hung parent's main process stopped by its sidecar at the agent's request (src/core/fence.ts)",
    labelNames: ['namespace', 'parent'],
    registers: [this.registry],
  });
  readonly specProbation = new Gauge({
    name: 'lastseen_spec_probation',
    help: "1 while a parent's new spec is held on probation (a rollout held by lastseen: src/core/probation.ts)",
    labelNames: ['namespace', 'parent'],
    registers: [this.registry],
  });
  readonly collections = new Counter({ name: 'lastseen_collections_total', help: 'Checkpoints garbage-collected', registers: [this.registry] });
  readonly actionFailures = new Counter({
    name: 'lastseen_action_failures_total',
    help: 'Failed actions (capture, activate, retire, collect, confirm: the live read, event, fence, redirect), by action and reason (errno or the api-server answer)',
    labelNames: ['action', 'reason'],
    registers: [this.registry],
  });
  /** 1 while the parent could be run from its copy now (src/agent/coverage.ts says when); a reboot may wait for all 1s. */
  readonly parentCovered = new Gauge({
    name: 'lastseen_parent_covered',
    help: 'This agent holds the node lock and a checkpoint of the parent, from a Ready pod and with valid (or mintable) tokens, is stored',
    labelNames: ['namespace', 'parent'],
    registers: [this.registry],
  });
  /** Buckets from the live read (~1 s) to an api-server outage's grace (tens of seconds). */
  readonly activationDelay = new Histogram({
    name: 'lastseen_activation_delay_seconds',
    help: "Seconds from the end of a parent's window (its last beat plus the window) to the activation of its checkpoint",
    buckets: [0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120],
    registers: [this.registry],
  });
  /** Buckets around a start (seconds) up to the longest hand-over window (handoverBackoff.max). */
  readonly handoverDuration = new Histogram({
    name: 'lastseen_handover_duration_seconds',
    help: 'Seconds from retiring a checkpoint for a hand-over to its end, by result (succeeded: the parent Ready; failed: re-activated)',
    labelNames: ['result'],
    buckets: [1, 2, 5, 10, 20, 30, 60, 120, 300, 600],
    registers: [this.registry],
  });
  readonly beatAge = new Gauge({
    name: 'lastseen_beat_age_seconds',
    help: "Seconds since a parent's beat last changed, on the agent's clock",
    labelNames: ['parent'],
    registers: [this.registry],
  });
  /**
   * 1 while a parent's declared interval is more than half the policy's window, so the agent judges
   * it by twice that interval instead (the core's WindowBelowInterval; see src/core/freshness.ts).
   */
  readonly windowBelowInterval = new Gauge({
    name: 'lastseen_window_below_interval',
    help: "1 while the policy's window is shorter than twice the interval the parent declares (the agent judges it by twice the interval)",
    labelNames: ['parent'],
    registers: [this.registry],
  });
  readonly checkpointActive = new Gauge({
    name: 'lastseen_checkpoint_active',
    help: '1 while the parent checkpoint manifest is in the kubelet directory',
    labelNames: ['parent'],
    registers: [this.registry],
  });
  readonly policyValid = new Gauge({
    name: 'lastseen_policy_valid',
    help: '1 when the last policy read was valid (0: refused; the last good one is in force)',
    registers: [this.registry],
  });
  /**
   * 1 while no policy file or ConfigMap is found (deleted, or never created). Nothing is refused, so
   * lastseen_policy_valid stays 1; the last good policy (persisted in the state folder) stays in
   * force, or the built-in defaults when there never was one.
   */
  readonly policyMissing = new Gauge({
    name: 'lastseen_policy_missing',
    help: '1 while no policy file or ConfigMap is found (the last good policy, or the built-in defaults if none, stays in force)',
    registers: [this.registry],
  });
  readonly apiReachable = new Gauge({ name: 'lastseen_api_reachable', help: '1 when the api-server answers /readyz', registers: [this.registry] });
  readonly badInputs = new Counter({
    name: 'lastseen_bad_inputs_total',
    help: 'Leases, annotations or files ignored as malformed or foreign, by source',
    labelNames: ['source'],
    registers: [this.registry],
  });
  /** 0 while the state folder takes no writes (read-only, full): stored checkpoints still cover, nothing new is kept. */
  readonly stateFolderWritable = new Gauge({
    name: 'lastseen_state_folder_writable',
    help: '1 while the state folder takes writes; 0 when it is read-only or full (stored checkpoints still cover; no new copy is kept)',
    registers: [this.registry],
  });
  /** Beats refused as not the parent's own (src/core/beats.ts): another holder, or a sequence that did not move. */
  readonly refusedBeats = new Counter({
    name: 'lastseen_refused_beats_total',
    help: "Beats refused as not the parent's own (why: foreign holder, or frozen sequence), by channel",
    labelNames: ['channel', 'why'],
    registers: [this.registry],
  });
  /** Always 1; its labels say which lastseen and which Node.js runtime an agent runs. */
  readonly buildInfo = new Gauge({
    name: 'lastseen_build_info',
    help: 'Always 1: the lastseen version and the Node.js runtime of this agent',
    labelNames: ['version', 'runtime'],
    registers: [this.registry],
  });
  readonly watchHealthy = new Gauge({
    name: 'lastseen_watch_healthy',
    help: '1 while a watch is connected and synced',
    labelNames: ['resource'],
    registers: [this.registry],
  });

  constructor(defaultMetrics = true) {
    if (defaultMetrics) collectDefaultMetrics({ register: this.registry });
    this.buildInfo.set({ version: VERSION, runtime: process.version }, 1);
    this.policyValid.set(1);
    this.policyMissing.set(0);
    this.apiReachable.set(0);
    this.stateFolderWritable.set(1);
    // Exported at 0 from the first scrape: increase() needs a sample before the first event, or the
    // first failed hand-over (or bad input) after a start would never count towards an alert.
    for (const result of HANDOVER_RESULTS) this.handovers.inc({ result }, 0);
    for (const source of BAD_INPUT_SOURCES) this.badInputs.inc({ source }, 0);
    for (const reason of ACTIVATION_REASONS) this.activations.inc({ reason }, 0);
    for (const result of ['succeeded', 'failed']) this.handoverDuration.zero({ result });
  }

  /** Recompute the per-state gauges and per-parent series from the agent's views. */
  observe(views: ParentView[], now: number): void {
    for (const s of STATES) this.parents.set({ state: s }, views.filter((v) => v.state.state === s).length);
    for (const v of views) {
      const last = v.state.lastChangeAt;
      if (last !== null) this.beatAge.set({ parent: v.id }, (now - last) / 1000);
      this.checkpointActive.set({ parent: v.id }, v.state.checkpoint.active ? 1 : 0);
      this.windowBelowInterval.set({ parent: v.id }, v.state.windowNotedMs !== null ? 1 : 0);
      const kb = v.state.knownBad;
      this.specProbation.set({ namespace: v.namespace, parent: v.key }, kb !== null && now < kb.until ? 1 : 0);
    }
  }

  forget(id: string): void {
    this.beatAge.remove({ parent: id });
    this.checkpointActive.remove({ parent: id });
    this.windowBelowInterval.remove({ parent: id });
    const [namespace = '', parent = ''] = id.split('/');
    this.specProbation.remove({ namespace, parent });
  }
}
