// Scenario files: a topology, the parents with their policy, a schedule of faults and the
// expectations a run must meet. Users write them as YAML or JSON; the named scenarios are the same
// structure as TypeScript objects. Validation is zod, and every error names its field path, like
// the policy document's.
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import { parseDuration } from '../policy/duration.js';
import { formatPath, type ParentPolicy, type PolicyError, parsePolicy } from '../policy/policy.js';
import { MAX_DURATION_MS, MIN_INTERVAL_MS } from '../policy/schema.js';
import { KUBELET_MODEL_BY_NAME, KUBELET_MODELS, type KubeletModel, type KubeletModelName } from './kubelet-model.js';
import { API_SERVER } from './network.js';

export const SCENARIO_API_VERSION = 'lastseen.dev/v1alpha1';

/** A duration string ("15s", "PT1M") or a number of milliseconds; may be negative when `signed`. */
function duration(signed = false) {
  return z.union([z.number(), z.string()], { error: 'must be a duration such as 20s or 1m30s, or milliseconds' }).transform((v, ctx) => {
    if (typeof v === 'number') {
      if (!Number.isFinite(v) || (!signed && v < 0)) {
        ctx.addIssue({ code: 'custom', message: `${v} is not a valid number of milliseconds` });
        return z.NEVER;
      }
      return v;
    }
    const neg = signed && v.trim().startsWith('-');
    const r = parseDuration(neg ? v.trim().slice(1) : v);
    if (!r.ok) {
      ctx.addIssue({ code: 'custom', message: r.error });
      return z.NEVER;
    }
    return neg ? -r.ms : r.ms;
  });
}

const node = z.strictObject({
  name: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label (lowercase letters, digits, -)'),
  master: z.boolean().default(false),
  /** Wall clock minus true time. */
  skew: duration(true).default(0),
  /** Clock rate error in parts per million. */
  driftPpm: z.number().min(-10_000).max(10_000).default(0),
});

const parent = z.strictObject({
  key: z.string().min(1),
  namespace: z.string().min(1).default('kube-system'),
  /** `apiserver`: the pod serves the api-server (its readiness is the api-server's availability). */
  kind: z.enum(['apiserver', 'app']).default('app'),
  /** Nodes the DaemonSet runs on (default: masters for an apiserver, else every node). */
  nodes: z.array(z.string()).optional(),
  /** Host ports the main container binds (default 6443 for an apiserver, none otherwise). */
  ports: z.array(z.number().int().min(1).max(65535)).optional(),
  /** The pod's terminationGracePeriodSeconds: the kubelet kills a process still running this long after SIGTERM. */
  terminationGracePeriod: duration().default(30_000),
  /** Binds its ports with SO_REUSEPORT (`--permit-port-sharing`), so it can run beside its checkpoint. */
  portSharing: z.boolean().default(false),
  /** From process start to Ready. */
  startTime: duration().optional(),
  /**
   * From process start to binding its host ports (default: 1s before Ready for an apiserver, as
   * kube-apiserver v1.36 was measured here; 1s after start for an app). Bound but not yet Ready, a
   * port-sharing pod takes its share of new connections and fails them.
   */
  bindTime: duration().optional(),
  /**
   * Graceful termination, from SIGTERM to exit (default 15s for an apiserver, 3s for an app). The
   * pod stops serving at once but holds its host ports until it exits.
   */
  stopTime: duration().optional(),
  /**
   * The main container's preStop hook (`lifecycle.preStop.sleep`): when its pod is deleted it keeps
   * serving this long before its SIGTERM, within the grace period. Default none. A checkpoint copy
   * has none (sanitize drops it).
   */
  preStop: duration().optional(),
  /** Policy fields, in the policy document's syntax (`window: 20s`, `whenApiUnreachable: activate`). */
  policy: z.record(z.string(), z.unknown()).default({}),
  /**
   * The heartbeat sidecar's own interval (its flag or its own copy of the policy), declared in every
   * beat; default the policy's `interval`. Set apart from the policy it models a writer and an agent
   * that read different policies, e.g. a parent beating every `window - 1s`; the agent
   * then judges it by max(window, 2 x this interval).
   */
  beatInterval: duration()
    .refine((ms) => ms >= MIN_INTERVAL_MS && ms <= MAX_DURATION_MS, `must be between ${MIN_INTERVAL_MS}ms and 24h`)
    .optional(),
});

const at = duration();

/**
 * Added one-way latency: a duration (fixed), or `{min, max}`, uniform in between for each message,
 * drawn from the run's seeded randomness (the node's own stream: a seed replays it exactly).
 */
const delay = z
  .union([duration(), z.strictObject({ min: duration(), max: duration() })], { error: 'must be a duration such as 200ms, or {min, max}' })
  .transform((v) => (typeof v === 'number' ? { minMs: v, maxMs: v } : { minMs: v.min, maxMs: v.max }))
  .refine((d) => d.maxMs >= d.minMs, { message: 'max is below min', path: ['max'] });
/** A DaemonSet's maxUnavailable / maxSurge: a count, or a percentage of the parent's nodes ("50%", rounded up). */
const intOrPercent = z.union([z.number().int().min(0), z.string().regex(/^(100|[1-9]?[0-9])%$/, 'must be a percentage from 0% to 100%')], {
  error: 'must be a whole number of nodes (0, 1, ...) or a percentage such as 50%',
});
const fault = z.discriminatedUnion('type', [
  /** `down`: from power loss until the node runs again (firmware, kernel, systemd). */
  z.strictObject({ type: z.literal('reboot'), at, node: z.string(), down: duration().default(40_000) }),
  z.strictObject({ type: z.literal('partition'), at, node: z.string(), duration: duration() }),
  /**
   * Added latency between the node and the api-server for `duration`: `latency` in both directions,
   * or `toApi` (writes and requests) and `fromApi` (responses and watch events) apart; either given
   * alone leaves the other direction as `latency` (or none).
   */
  z.strictObject({
    type: z.literal('latency'),
    at,
    node: z.string(),
    latency: delay.optional(),
    toApi: delay.optional(),
    fromApi: delay.optional(),
    duration: duration(),
  }),
  /**
   * Packets from `from` (a node) to `to` (another node, or `api-server`: the api-server's address,
   * every instance) are lost for `duration`: `direction` `out` (from -> to), `in` (to -> from) or
   * `both` (default). See src/sim/network.ts for what crosses a link.
   */
  z.strictObject({
    type: z.literal('link'),
    at,
    from: z.string(),
    to: z.string(),
    direction: z.enum(['both', 'out', 'in'], { error: 'must be both, out or in' }).default('both'),
    duration: duration(),
  }),
  z.strictObject({ type: z.literal('stall-watch'), at, node: z.string(), duration: duration() }),
  z.strictObject({ type: z.literal('delete-pod'), at, key: z.string(), node: z.string() }),
  z.strictObject({
    type: z.literal('rollout'),
    at,
    key: z.string(),
    /** Whether the new spec can become Ready. */
    healthy: z.boolean().default(true),
    startTime: duration().optional(),
    /**
     * The new spec's process start to its bind; undefined: the parent's. A bad spec that binds at
     * once and then waits for its storage (an api-server with a dead etcd address: binds within a
     * second, answers nothing, exits after about 20 s) holds its share of the port silently for
     * `startTime - bindTime`. Given here, the spec answers nothing between its bind and its start
     * (its sidecar's probe times out); the parent's own bindTime keeps its answering start.
     */
    bindTime: duration().optional(),
    /** The DaemonSet's `updateStrategy.rollingUpdate` and `minReadySeconds` for this rollout (src/sim/daemonset.ts). */
    maxUnavailable: intOrPercent.default(1),
    maxSurge: intOrPercent.default(0),
    minReadySeconds: z.number().int().min(0).default(0),
    /**
     * A good spec that stumbles: each of its pods crashes in its first `crashes` starts (at the end
     * of the start, after binding: a dependency not ready yet), then becomes Ready. Needs healthy.
     */
    crashes: z.number().int().min(0).max(10).default(0),
  }),
  z.strictObject({ type: z.literal('agent-restart'), at, node: z.string() }),
  /**
   * The parent's main process dies (a crash, an OOM kill) with no last beat, while its node, its
   * heartbeat sidecar and the agent stay up; the kubelet restarts it per its model (crash-loop back-off).
   */
  z.strictObject({ type: z.literal('kill'), at, key: z.string(), node: z.string() }),
  /**
   * The parent's process hangs for `duration`: it holds its ports and stays "running", but stops
   * serving and answering. `scope: process` (default): its sidecar runs on and reports the probe
   * that gets no answer; `scope: pod`: the whole pod is frozen, its sidecar too (no beat at all);
   * `scope: starved`: the process is runnable but the node has no CPU for it (an overloaded node):
   * it answers nothing in time, like a hung one, but its sidecar sees it waiting for a CPU.
   */
  z.strictObject({
    type: z.literal('hang'),
    at,
    key: z.string(),
    node: z.string(),
    duration: duration(),
    scope: z.enum(['process', 'pod', 'starved']).default('process'),
  }),
  z.strictObject({ type: z.literal('clock-step'), at, node: z.string(), step: duration(true) }),
  /**
   * Something other than lastseen removes the checkpoint manifest of `key` from the node's static-pod
   * folder, or, without `key`, every checkpoint manifest in it (the folder removed).
   */
  z.strictObject({ type: z.literal('remove-manifest'), at, node: z.string(), key: z.string().optional() }),
]);

/**
 * Expectations about the recovery after one fault, judged on its figures in `outcome.perFault`
 * (counted in the fault's window: from its `at` until the next fault that starts later, or the end).
 */
const faultExpectation = z.strictObject({
  /** The fault's index in `faults` (0 = the first listed). */
  fault: z.number().int().min(0),
  /** The key is served again within the window (false: it was unserved and not served again). */
  served: z.boolean().optional(),
  /** The parent itself serves again, its checkpoint retired, within the window. */
  parentServed: z.boolean().optional(),
  maxServedAt: duration().optional(),
  maxParentServedAt: duration().optional(),
  /** The key's unserved time within the window. */
  maxUnserved: duration().optional(),
  /** The checkpoint's manifest is not written within the window. */
  noActivation: z.boolean().optional(),
  maxActivations: z.number().int().min(0).optional(),
  maxHandoverAttempts: z.number().int().min(0).optional(),
  /** Every checkpoint copy that served in the window ran this spec generation, and one did. */
  checkpointServedGeneration: z.number().int().min(1).optional(),
});

const expectations = z.strictObject({
  /** The focus key is served again (by parent or checkpoint) after the first fault. */
  served: z.boolean().optional(),
  /** The parent itself serves again with its checkpoint retired. */
  parentServed: z.boolean().optional(),
  maxServedAt: duration().optional(),
  maxParentServedAt: duration().optional(),
  /** The focus key's total unserved time after the first fault, every stretch counted. */
  maxUnserved: duration().optional(),
  /** No checkpoint is ever activated for the focus key after the first fault. */
  noActivation: z.boolean().optional(),
  /** The active checkpoint at the end runs this spec generation (1 = the first). */
  checkpointGeneration: z.number().int().min(1).optional(),
  /** Expectations about the recovery after individual faults. */
  faults: z.array(faultExpectation).default([]),
});

export const scenarioSchema = z.strictObject({
  apiVersion: z.literal(SCENARIO_API_VERSION).optional(),
  kind: z.literal('Scenario').optional(),
  name: z.string().min(1),
  description: z.string().default(''),
  /** Virtual run length. */
  duration: duration().default(900_000),
  seed: z.number().int().optional(),
  kubelet: z
    .strictObject({
      /**
       * Which kubelet to model (src/sim/kubelet-model.ts, docs/simulator-kubelet.md): `v1.36`,
       * calibrated against a real kubelet v1.36.3 (default), or `v1.5`, the kubelet of the
       * background issue (docs/reboot-story.md), with its periodic file check and status cache.
       */
      model: z.enum(KUBELET_MODELS).default('v1.36'),
      /** v1.5 only: how often the kubelet re-reads its static-pod folder (--file-check-frequency, default 20s). */
      fileCheckPeriod: duration().optional(),
      /**
       * The kubelet v1.5 status cache (docs/reboot-story.md); the model's own default (on for v1.5,
       * off for v1.36) unless set. While on:
       * - `/pods` reports each api-assigned pod's phase as last pushed to an api-server, and a pod
       *   whose container has started is phase Running through its crash-loop restarts;
       * - a container of an api-assigned pod that exits while the kubelet reaches no api-server is
       *   not noticed: its status stays "running" and it is not restarted until the kubelet syncs
       *   with an api-server again (then it is restarted with the crash-loop back-off).
       * Off: `/pods` reports container states, and every exit is restarted on the back-off.
       */
      staleStatus: z.boolean().optional(),
      /**
       * Which api-server the kubelets ask: `cluster` (default), any that serves, as through a
       * load balancer; `local`, a master's only its own node's (kubeadm's control-plane
       * kubelets since v1.33): it learns its pods only once something serves on its node. Workers'
       * kubelets ask the cluster's either way.
       */
      api: z.enum(['cluster', 'local']).optional(),
    })
    .default({ model: 'v1.36' }),
  nodes: z.array(node).min(1),
  parents: z.array(parent).min(1),
  faults: z.array(fault).default([]),
  /** The node and key the outcome figures are about (default: the first fault's node, the first parent). */
  focus: z.strictObject({ node: z.string(), key: z.string() }).optional(),
  expect: expectations.default({ faults: [] }),
});

/** The fault types that name a node, and those that name a parent key (from the schema itself). */
const FAULTS_WITH = {
  node: new Set<unknown>(fault.options.filter((o) => 'node' in o.shape).map((o) => o.shape.type.value)),
  key: new Set<unknown>(fault.options.filter((o) => 'key' in o.shape).map((o) => o.shape.type.value)),
};

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const listOf = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const stringAt = (v: unknown, k: string): string | undefined => (isRecord(v) && typeof v[k] === 'string' ? v[k] : undefined);

/**
 * The reference and cross-field rules (a fault names a node that exists, a parent key that exists,
 * an index into faults, ...), checked on the raw document whatever the schema found, so one run
 * names every problem: a scenario with a bad duration and a fault on a missing node gets both.
 * Names come from the raw strings (a node with a badly-formed name still answers references to it,
 * so only the name is reported); a rule that needs a parsed value (a fault's `at` against the run's
 * duration) is checked only where that value parses.
 */
function crossErrors(doc: unknown): PolicyError[] {
  const out: PolicyError[] = [];
  const add = (path: PropertyKey[], message: string) => out.push({ path: formatPath(path), message });
  if (!isRecord(doc)) return out;
  const nodes = listOf(doc.nodes);
  const parents = listOf(doc.parents);
  const faults = listOf(doc.faults);
  const nodeNames = nodes.map((n) => stringAt(n, 'name'));
  const names = new Set(nodeNames.filter((n) => n !== undefined));
  const keys = new Set(parents.map((p) => stringAt(p, 'key')).filter((k) => k !== undefined));
  const run = duration().default(900_000).safeParse(doc.duration);
  const node = (path: PropertyKey[], n: unknown) => {
    if (typeof n === 'string' && !names.has(n)) add(path, `no node named "${n}"`);
  };
  nodeNames.forEach((n, i) => {
    if (n !== undefined && nodeNames.indexOf(n) !== i) add(['nodes', i, 'name'], `"${n}" repeats`);
  });
  parents.forEach((p, i) => {
    if (!isRecord(p)) return;
    listOf(p.nodes).forEach((n, j) => {
      node(['parents', i, 'nodes', j], n);
    });
  });
  faults.forEach((raw, i) => {
    if (!isRecord(raw)) return;
    if (FAULTS_WITH.node.has(raw.type)) node(['faults', i, 'node'], raw.node);
    if (FAULTS_WITH.key.has(raw.type) && typeof raw.key === 'string' && !keys.has(raw.key)) add(['faults', i, 'key'], `no parent with key "${raw.key}"`);
    if (raw.type === 'link') {
      node(['faults', i, 'from'], raw.from);
      const to = raw.to;
      if (to === API_SERVER && names.has(API_SERVER)) add(['faults', i, 'to'], `"${API_SERVER}" is ambiguous: a node has that name; rename the node`);
      else if (typeof to === 'string' && to !== API_SERVER && !names.has(to)) add(['faults', i, 'to'], `no node named "${to}" (nor "${API_SERVER}")`);
      else if (typeof to === 'string' && to === raw.from) add(['faults', i, 'to'], 'a link needs two ends: to is from');
    }
    const parsed = fault.safeParse(raw);
    if (!parsed.success) return;
    const f = parsed.data;
    if (f.type === 'rollout' && parseInt(String(f.maxUnavailable), 10) === 0 && parseInt(String(f.maxSurge), 10) === 0)
      add(['faults', i, 'maxUnavailable'], 'may not be 0 when maxSurge is 0 (as the api-server refuses it)');
    if (f.type === 'latency' && !f.latency && !f.toApi && !f.fromApi) add(['faults', i, 'latency'], 'a latency fault needs latency, toApi or fromApi');
    if (run.success && f.at > run.data) add(['faults', i, 'at'], 'is after the end of the run (duration)');
  });
  const expect = isRecord(doc.expect) ? doc.expect : {};
  listOf(expect.faults).forEach((e, i) => {
    const at = isRecord(e) ? e.fault : undefined;
    if (typeof at === 'number' && Number.isInteger(at) && at >= faults.length) {
      const has = faults.length === 0 ? 'the scenario has no faults' : `faults has indices 0..${faults.length - 1}`;
      add(['expect', 'faults', i, 'fault'], `no fault with index ${at} (${has})`);
    }
  });
  if (isRecord(doc.kubelet) && doc.kubelet.fileCheckPeriod !== undefined) {
    const model = doc.kubelet.model ?? 'v1.36';
    if (model !== 'v1.5' && (KUBELET_MODELS as readonly unknown[]).includes(model))
      add(['kubelet', 'fileCheckPeriod'], `applies to the v1.5 model only: kubelet ${String(model)} notices manifests by inotify`);
  }
  if (isRecord(doc.focus)) {
    node(['focus', 'node'], doc.focus.node);
    const key = doc.focus.key;
    if (typeof key === 'string' && !keys.has(key)) add(['focus', 'key'], `no parent with key "${key}"`);
  }
  // Each parent's policy, in the policy document's rules (schema and cross-field), with its own path.
  parents.forEach((p, i) => {
    if (!isRecord(p) || (p.policy !== undefined && !isRecord(p.policy))) return;
    const pr = parsePolicy({ apiVersion: 'lastseen.dev/v1alpha1', kind: 'Policy', defaults: p.policy ?? {} });
    if (!pr.ok) for (const e of pr.errors) out.push({ path: e.path.replace(/^defaults/, `parents[${i}].policy`), message: e.message });
  });
  return out;
}

export type ScenarioInput = z.input<typeof scenarioSchema>;
export type ScenarioSpec = z.output<typeof scenarioSchema>;
export type FaultSpec = ScenarioSpec['faults'][number];

export interface ParentDef {
  key: string;
  namespace: string;
  kind: 'apiserver' | 'app';
  nodes: string[];
  ports: number[];
  portSharing: boolean;
  startMs: number;
  /** From process start to binding its ports; undefined: the kind's default for the spec's start time (bindMsFor). */
  bindMs?: number;
  stopMs: number;
  gracePeriodMs: number;
  /** The main container's preStop pause (0: none). */
  preStopMs: number;
  policy: ParentPolicy;
  /** The sidecar's beat period, declared in its beats (the policy's interval unless `beatInterval` is set). */
  beatIntervalMs: number;
}

export interface Scenario {
  spec: ScenarioSpec;
  /** The kubelet model with the scenario's overrides applied. */
  kubelet: KubeletModel;
  parents: ParentDef[];
  focus: { node: string; key: string };
}

export type ScenarioResult = { ok: true; scenario: Scenario } | { ok: false; errors: PolicyError[] };

/** Default start times: an api-server replays its state and warms caches; an app is quicker. */
const START_MS = { apiserver: 15_000, app: 5_000 } as const;
/**
 * Default graceful termination, SIGTERM to exit: an api-server stops serving at once, then drains
 * in-flight requests and long-running watches before its listeners close; an app just exits. With
 * the v1.5 status cache, the api-server's stop time decides the background issue's race: a parent
 * restart that lands inside it fails to bind with no api-server anywhere and is never noticed. Its
 * first crash-loop restart comes 10-15s after its first failed bind, so from about 15s on the old
 * kubelet-pods checkpointer deadlocks on every seed (at 10s: about a quarter of seeds).
 */
const STOP_MS = { apiserver: 15_000, app: 3_000 } as const;

/** Validate a scenario document (already parsed from YAML/JSON, or a TS object). */
export function parseScenario(doc: unknown): ScenarioResult {
  const r = scenarioSchema.safeParse(doc);
  // Every problem in one pass: the schema's, then the references and each parent's policy.
  const errors: PolicyError[] = [...(r.success ? [] : r.error.issues.map((i) => ({ path: formatPath(i.path), message: i.message }))), ...crossErrors(doc)];
  if (!r.success || errors.length > 0) return { ok: false, errors };
  const spec = r.data;
  const parents: ParentDef[] = [];
  for (const p of spec.parents) {
    const pr = parsePolicy({ apiVersion: 'lastseen.dev/v1alpha1', kind: 'Policy', defaults: p.policy });
    // crossErrors has checked every parent's policy.
    if (!pr.ok) throw new Error(`parent ${p.key}: policy refused after validation`);
    const masters = spec.nodes.filter((n) => n.master).map((n) => n.name);
    parents.push({
      key: p.key,
      namespace: p.namespace,
      kind: p.kind,
      nodes: p.nodes ?? (p.kind === 'apiserver' && masters.length > 0 ? masters : spec.nodes.map((n) => n.name)),
      ports: p.ports ?? (p.kind === 'apiserver' ? [6443] : []),
      portSharing: p.portSharing,
      startMs: p.startTime ?? START_MS[p.kind],
      ...(p.bindTime !== undefined ? { bindMs: p.bindTime } : {}),
      stopMs: p.stopTime ?? STOP_MS[p.kind],
      gracePeriodMs: p.terminationGracePeriod,
      preStopMs: p.preStop ?? 0,
      policy: pr.policy.defaults,
      beatIntervalMs: p.beatInterval ?? pr.policy.defaults.intervalMs,
    });
  }
  const first = spec.faults[0];
  const focusNode = first && 'node' in first ? first.node : first?.type === 'link' ? first.from : (parents[0]!.nodes[0] ?? spec.nodes[0]!.name);
  const focus = spec.focus ?? {
    node: focusNode,
    // The first parent that runs on the focus node (a fault on a worker is about a parent there, not a master's api-server).
    key: (first && 'key' in first ? first.key : undefined) ?? (parents.find((p) => p.nodes.includes(focusNode)) ?? parents[0]!).key,
  };
  const base = KUBELET_MODEL_BY_NAME[spec.kubelet.model];
  const kubelet: KubeletModel = {
    ...base,
    fileCheckPeriodMs: spec.kubelet.fileCheckPeriod ?? base.fileCheckPeriodMs,
    staleStatus: spec.kubelet.staleStatus ?? base.staleStatus,
    api: spec.kubelet.api ?? base.api,
  };
  return { ok: true, scenario: { spec, kubelet, parents, focus } };
}

/** The same scenario on another kubelet model (its file's kubelet overrides are dropped; which api-server it asks is kept). */
export function withKubeletModel(s: Scenario, name: KubeletModelName): Scenario {
  return { ...s, kubelet: { ...KUBELET_MODEL_BY_NAME[name], api: s.kubelet.api } };
}

/** Parse YAML or JSON text (JSON is YAML), then validate. */
export function parseScenarioText(text: string): ScenarioResult {
  let doc: unknown;
  try {
    doc = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (e) {
    const where = e instanceof YAMLParseError && e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '(document)';
    return { ok: false, errors: [{ path: where, message: `not valid YAML or JSON: ${(e as Error).message.split('\n')[0]}` }] };
  }
  return parseScenario(doc);
}
