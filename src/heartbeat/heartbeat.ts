// `startHeartbeat`: the writer beside a parent's main container, as a library (a Node.js parent can
// run it in-process) and behind `lastseen heartbeat`.
//
// Options are validated here, once: identity fields present, interval from the same policy file
// the agent reads (so writer and reader agree without an api-server) unless given explicitly, a
// probe that parses, a known set of channels. Then it only wires: channel adapters over the ports
// in channel.ts, the fence responder's ports (fence.ts), and the sidecar in loop.ts. The policy
// file alone is not a reason to refuse: an invalid one is logged and replaced by the last good one
// or the defaults (policy-file.ts), and it is re-read while the heartbeat runs.
import type { KubeConfig } from '@kubernetes/client-node';
import { type Logger, pino } from 'pino';
import { AnnotationChannel } from '../channels/annotation.js';
import { type BeatWriter, type Clock, systemClock } from '../channels/channel.js';
import { LeaseChannel, type LeaseTarget } from '../channels/lease.js';
import { DEFAULT_HEARTBEAT_DIR, LocalChannel } from '../channels/local.js';
import type { Channel } from '../core/types.js';
import type { BeatClient } from '../kube/beat-client.js';
import { makeLightClient } from '../kube/light-client.js';
import { type EndpointSource, endpointFromKubeConfig, loadEndpoint } from '../kube/light-config.js';
import { type ParentPolicy, type Policy, policyFor } from '../policy/policy.js';
import { CHANNELS, MIN_INTERVAL_MS } from '../policy/schema.js';
import type { HeartbeatIdentity } from './beat.js';
import { type FenceDeps, fsFenceFiles } from './fence.js';
import { type Heartbeat, type LoopOptions, runSidecar } from './loop.js';
import { portOwnership } from './ownership.js';
import { POLICY_RELOAD_MS, PolicyFile, type PolicyOrigin } from './policy-file.js';
import { makeProbe, type Probe, parseProbe } from './probe.js';
import { NO_PROOF_YET, READY_STATE_VERSION, type ReadyState, writeReadyState } from './ready-state.js';

export type { BeatWriter, Clock } from '../channels/channel.js';
export type { HeartbeatIdentity } from './beat.js';
export type { ChannelStats, Heartbeat } from './loop.js';

/** Probes get 40% of the interval: the writes that follow need the rest. */
export const PROBE_TIMEOUT_FRACTION = 0.4;
/** Each api request gets half the interval, so a hung connection still leaves time for one retry. */
export const REQUEST_TIMEOUT_FRACTION = 0.5;
/** …but no more than 10s: a Lease write that takes longer is a dead connection, not a slow server. */
export const MAX_REQUEST_TIMEOUT_MS = 10_000;

export interface HeartbeatOptions {
  identity: HeartbeatIdentity;
  /** Beat interval (ms). Overrides the policy's; mainly for tests. */
  intervalMs?: number;
  /** The agent's policy file (policy.yaml from the lastseen-policy ConfigMap, mounted). */
  policyFile?: string;
  /** Labels of the parent pod, to select per-parent policy overrides. */
  labels?: Record<string, string>;
  /** Channels to write; default: the policy's (lease and local unless overridden). */
  channels?: Channel[];
  /** `none` (default), `http://…`, `https://…`, `tcp://host:port`, or a probe function. */
  probe?: string | Probe;
  probeCaFile?: string;
  probeInsecure?: boolean;
  /** Folder of the local channel's files. Default /run/lastseen/heartbeats. */
  heartbeatDir?: string;
  /**
   * Where to keep the last Ready proof for the pod's readiness probe (`ready --ready-file`, see
   * ready-state.ts): a file in a volume of this pod alone. Unset: none is kept.
   */
  readyFile?: string;
  /**
   * Api access for the lease and annotation channels: a client-node KubeConfig (its TLS material and
   * credentials, exec plugins included), or a kubeconfig file (else default / in-cluster) read
   * without client-node (src/kube/light-config.ts). Either way the requests go over the light client.
   */
  kubeConfig?: KubeConfig;
  kubeconfigPath?: string;
  /** Use these writers instead of building channels (tests, the simulator). */
  writers?: BeatWriter[];
  clock?: Clock;
  logger?: Logger;
  /** Jitter source for retries, [0, 1). */
  random?: () => number;
  /** Told of every api request sent (counting requests per beat). */
  onRequest?: (method: string, url: string) => void;
  /** Reads the policy file (tests). Default: readFileSync. */
  readPolicyFile?: (file: string) => string;
}

/** The running heartbeat, and the policy it beats by. */
export interface HeartbeatHandle extends Heartbeat {
  policy(): { origin: PolicyOrigin; problem: string | null; intervalMs: number; windowMs: number; channels: Channel[] };
}

export interface ResolvedSettings {
  policy: ParentPolicy;
  intervalMs: number;
  channels: Channel[];
}

/** The effective interval, window and channels for this writer under policy `doc`. Throws on bad flags. */
export function resolveSettings(doc: Policy, opts: Pick<HeartbeatOptions, 'identity' | 'intervalMs' | 'labels' | 'channels'>): ResolvedSettings {
  const { namespace, key } = opts.identity;
  const policy = policyFor(doc, { namespace, key, labels: opts.labels ?? {} }).policy;
  const intervalMs = opts.intervalMs ?? policy.intervalMs;
  if (!Number.isFinite(intervalMs) || intervalMs < MIN_INTERVAL_MS) throw new Error(`interval ${intervalMs}ms is below the ${MIN_INTERVAL_MS}ms minimum`);
  // An explicit interval keeps the window at least two intervals, as the policy rules demand.
  const windowMs = Math.max(policy.windowMs, 2 * intervalMs);
  const channels = opts.channels ?? policy.channels;
  if (channels.length === 0) throw new Error('no heartbeat channel: give at least one of lease, annotation, local');
  for (const c of channels) if (!CHANNELS.includes(c)) throw new Error(`unknown channel "${c}": use ${CHANNELS.join(', ')}`);
  if (new Set(channels).size !== channels.length) throw new Error(`channel listed twice in ${channels.join(',')}`);
  return { policy: { ...policy, intervalMs, windowMs }, intervalMs, channels };
}

function validateIdentity(id: HeartbeatIdentity): void {
  const missing = (['node', 'podName', 'namespace', 'key'] as const).filter((f) => !id[f]);
  if (missing.length > 0) throw new Error(`heartbeat identity is missing ${missing.join(', ')}`);
  if (id.role !== 'parent' && id.role !== 'checkpoint') throw new Error(`role "${id.role}" is not parent or checkpoint`);
}

/** Start beating. Throws (before any beat) on invalid options; afterwards failures are logged, never thrown. */
export function startHeartbeat(opts: HeartbeatOptions): HeartbeatHandle {
  validateIdentity(opts.identity);
  const clock = opts.clock ?? systemClock;
  const logger = (opts.logger ?? pino()).child({
    component: 'heartbeat',
    namespace: opts.identity.namespace,
    key: opts.identity.key,
    node: opts.identity.node,
    role: opts.identity.role,
  });
  const policyFile = new PolicyFile(opts.policyFile, logger, opts.readPolicyFile);
  let settings = resolveSettings(policyFile.current().doc, opts);
  const { intervalMs } = settings;
  const id = opts.identity;
  const leaseTarget: LeaseTarget = {
    namespace: id.namespace,
    key: id.key,
    node: id.node,
    role: id.role,
    windowMs: settings.policy.windowMs,
    policyProblem: policyFile.current().problem,
  };

  let probe: Probe;
  /** The port the probe checks: the one a fence takes the pod's hung process off (src/heartbeat/fence.ts). */
  let probedPort: number | null = null;
  if (typeof opts.probe === 'function') probe = opts.probe;
  else {
    const p = parseProbe(opts.probe ?? 'none');
    if (!p.ok) throw new Error(p.error);
    probe = makeProbe(p.spec, { timeoutMs: Math.floor(intervalMs * PROBE_TIMEOUT_FRACTION), caFile: opts.probeCaFile, insecure: opts.probeInsecure });
    if (p.spec.kind === 'tcp') probedPort = p.spec.port;
    if (p.spec.kind === 'http') probedPort = p.spec.url.port ? Number(p.spec.url.port) : p.spec.url.protocol === 'https:' ? 443 : 80;
  }
  // A parent's sidecar answers the agent's fence requests (a checkpoint's never: it is not fenced).
  const heartbeatDir = opts.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR;
  const fence: FenceDeps | null =
    id.role === 'parent' && settings.channels.includes('local')
      ? {
          files: fsFenceFiles(heartbeatDir, id.namespace, id.key),
          podUid: id.podUid,
          probe,
          portHolders: () => (probedPort === null ? null : [...new Set(portOwnership(probedPort).ours.map((o) => o.pid))]),
          kill: (pid, signal) => process.kill(pid, signal),
        }
      : null;

  const writers = opts.writers ?? buildWriters(opts, settings, leaseTarget, clock, logger);
  logger.info(
    {
      intervalMs,
      windowMs: settings.policy.windowMs,
      channels: writers.map((w) => w.channel),
      pod: opts.identity.podName,
      policy: policyFile.current().origin,
    },
    'heartbeat starting',
  );

  // Re-read the policy file every POLICY_RELOAD_MS, at the start of a round (so on the loop's clock).
  let lastRead = clock.now();
  const beforeRound = (): void => {
    if (!opts.policyFile || clock.now() - lastRead < POLICY_RELOAD_MS) return;
    lastRead = clock.now();
    const changed = policyFile.reload();
    const state = policyFile.current();
    leaseTarget.policyProblem = state.problem;
    if (!changed) return;
    let next: ResolvedSettings;
    try {
      next = resolveSettings(state.doc, opts);
    } catch (e) {
      logger.error({ file: opts.policyFile, error: (e as Error).message }, 'changed policy not applied: keeping the settings in force');
      return;
    }
    // Interval and window apply from the next round; the probe and request timeouts and the set of
    // channels were fixed at start.
    if (next.channels.join(',') !== settings.channels.join(','))
      logger.warn(
        { file: opts.policyFile, channels: next.channels, writing: settings.channels },
        'policy changed the channels: restart the heartbeat to apply',
      );
    settings = { ...next, channels: settings.channels };
    leaseTarget.windowMs = settings.policy.windowMs;
    logger.info({ file: opts.policyFile, intervalMs: settings.intervalMs, windowMs: settings.policy.windowMs }, 'policy file changed: applied');
  };

  const onPhase = opts.readyFile ? readyFileWriter(opts.readyFile, clock, () => settings.intervalMs, logger) : undefined;
  const hb = runSidecar({ identity: opts.identity, intervalMs: () => settings.intervalMs, beforeRound, writers, probe, clock, logger, fence, onPhase });
  return {
    ...hb,
    policy: () => {
      const s = policyFile.current();
      return { origin: s.origin, problem: s.problem, intervalMs: settings.intervalMs, windowMs: settings.policy.windowMs, channels: settings.channels };
    },
  };
}

/**
 * Keeps the ready file: at once a Starting state (a proof left by this container's previous run must
 * not make the new one Ready), then every round's phase. A failed write is logged when its error
 * changes and when writes work again; the probe then reads an ageing proof and turns NotReady.
 */
function readyFileWriter(file: string, clock: Clock, intervalMs: () => number, logger: Logger): NonNullable<LoopOptions['onPhase']> {
  let failing: string | null = null;
  const write = (state: ReadyState): void => {
    try {
      writeReadyState(file, state);
      if (failing !== null) logger.info({ file }, 'ready file written again');
      failing = null;
    } catch (e) {
      const error = (e as Error).message;
      if (error !== failing) logger.warn({ file, error }, 'ready file not written: the pod will turn NotReady once the last proof ages');
      failing = error;
    }
  };
  write({ v: READY_STATE_VERSION, phase: 'Starting', at: clock.wallNow(), intervalMs: intervalMs(), why: NO_PROOF_YET });
  return ({ phase, probe, wallMs, intervalMs: ms }) =>
    write({
      v: READY_STATE_VERSION,
      phase,
      at: wallMs,
      intervalMs: ms,
      ...(probe.ok && probe.unprobed ? { unprobed: true as const } : {}),
      ...(!probe.ok ? { why: probe.error } : {}),
    });
}

function buildWriters(opts: HeartbeatOptions, settings: ResolvedSettings, leaseTarget: LeaseTarget, clock: Clock, logger: Logger): BeatWriter[] {
  const id = opts.identity;
  let endpoint: EndpointSource | undefined;
  const makeClient = (): BeatClient => {
    endpoint ??= opts.kubeConfig ? endpointFromKubeConfig(opts.kubeConfig) : loadEndpoint(opts.kubeconfigPath);
    const requestTimeoutMs = Math.min(MAX_REQUEST_TIMEOUT_MS, Math.floor(settings.intervalMs * REQUEST_TIMEOUT_FRACTION));
    return makeLightClient(endpoint, { requestTimeoutMs, onRequest: opts.onRequest });
  };
  const onFailure = (channel: Channel) => (err: { kind: string; status: number | null; message: string }, attempt: number) =>
    logger.debug({ channel, attempt, kind: err.kind, status: err.status, error: err.message }, 'heartbeat request failed');
  return settings.channels.map((channel): BeatWriter => {
    switch (channel) {
      case 'lease':
        return new LeaseChannel({
          // Shared, not copied: a re-read policy updates the window and the policy problem in place.
          target: leaseTarget,
          makeClient,
          clock,
          random: opts.random,
          onFailure: onFailure('lease'),
        });
      case 'annotation':
        return new AnnotationChannel({
          namespace: id.namespace,
          podName: id.podName,
          makeClient,
          clock,
          random: opts.random,
          onFailure: onFailure('annotation'),
        });
      default:
        return new LocalChannel(opts.heartbeatDir ?? DEFAULT_HEARTBEAT_DIR, { node: id.node, namespace: id.namespace, key: id.key, role: id.role });
    }
  });
}
