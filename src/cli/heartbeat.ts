// `lastseen heartbeat`: the sidecar beside a parent's main container. Identity comes from flags or
// the downward-API environment; JSON logs go to stdout; SIGTERM/SIGINT write a last beat with phase
// Stopping to every channel and exit 0.
import { existsSync, readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { type Logger, pino } from 'pino';
import { DEFAULT_HEARTBEAT_DIR } from '../channels/local.js';
import { parentKey } from '../core/names.js';
import type { Channel, Role } from '../core/types.js';
import type { HeartbeatIdentity } from '../heartbeat/beat.js';
import { startHeartbeat } from '../heartbeat/heartbeat.js';
import { parseProbe } from '../heartbeat/probe.js';
import type { BeatClient } from '../kube/beat-client.js';
import { classifyKubeError } from '../kube/errors.js';
import { makeLightClient } from '../kube/light-client.js';
import { loadEndpoint } from '../kube/light-config.js';
import { parseDuration } from '../policy/duration.js';
import { CliError, exitCodesHelp, usageError } from './errors.js';

/** Reading our own pod (parent key, labels) at start: tries, and the timeout of each. */
const POD_LOOKUP_ATTEMPTS = 3;
const POD_LOOKUP_TIMEOUT_MS = 2_000;

/** `heartbeat --help`'s section on what each probe mode proves (what a Ready beat may be trusted for). */
export const PROBE_MODES = `
Probe modes (--probe), checked every interval:
  http://HOST:PORT/PATH, https://…
      Ready when (a) a process of this pod listens on PORT: its listening socket is an open
      file of a process this sidecar sees, which needs shareProcessNamespace: true on the pod
      and the capabilities SYS_PTRACE and DAC_READ_SEARCH on this container; a socket of another pod on the host
      network (the parent's checkpoint) does not count; and (b) GET answers 2xx/3xx on fresh
      connections: one, or, while other sockets share the port (SO_REUSEPORT), as many in a
      row as keep the chance that all reached the others at 1e-6 (20 beside one checkpoint).
  tcp://HOST:PORT
      Ready when (a) holds and a connection is accepted.
  none (the default)
      Nothing is probed: Ready only says that this sidecar runs, and the beat says so. The
      agent keeps a copy as last known good, retires a checkpoint or ends a hand-over on an
      unprobed Ready only once the api-server reports the pod's own Ready condition True (so
      a main container crash-looping beside a running sidecar hands nothing back). Give a
      probe to every parent that has a port.
Anything short of Ready is Starting; the log line "heartbeat phase" says which proof failed.
`;

interface Flags {
  node?: string;
  podName?: string;
  namespace?: string;
  podUid?: string;
  parentKey?: string;
  role?: string;
  probe: string;
  probeCa?: string;
  probeInsecure?: boolean;
  channels?: string;
  heartbeatDir: string;
  readyFile?: string;
  policyFile?: string;
  interval?: string;
  kubeconfig?: string;
  labelsFile?: string;
}

export function register(program: Command): void {
  program
    .command('heartbeat')
    .description('write heartbeats for this pod (run as a sidecar beside the parent container)')
    .option('--node <name>', 'node name (env NODE_NAME)')
    .option('--pod-name <name>', 'this pod (env POD_NAME)')
    .option('--namespace <ns>', "this pod's namespace (env POD_NAMESPACE)")
    .option('--pod-uid <uid>', "this pod's uid (env POD_UID)")
    .option('--parent-key <key>', 'parent key (env LASTSEEN_PARENT_KEY; default: derived from the pod)')
    .option('--role <role>', 'parent or checkpoint (env LASTSEEN_ROLE; default parent)')
    .option('--probe <spec>', 'what makes a beat Ready (else Starting): none, http://…, https://…, tcp://host:port (see "Probe modes" below)', 'none')
    .option('--probe-ca <file>', 'CA bundle for an https probe')
    .option('--probe-insecure', 'do not verify the https probe certificate')
    .option('--channels <list>', 'comma-separated: lease, annotation, local (default: the policy)')
    .option('--heartbeat-dir <dir>', 'folder of the local channel', DEFAULT_HEARTBEAT_DIR)
    .option(
      '--ready-file <file>',
      "keep the last proof here (a file in a volume of this pod alone, e.g. an emptyDir) for the sidecar's readiness probe `ready --ready-file FILE`",
    )
    .option(
      '--policy-file <file>',
      "the agent's policy.yaml, for the interval and window; re-read every 5s; when invalid or missing: the last good one, else the built-in defaults",
    )
    .option('--interval <duration>', 'beat interval, overriding the policy (e.g. 500ms, 5s)')
    .option('--labels-file <file>', "this pod's labels as the downward API writes them (env LASTSEEN_LABELS_FILE)")
    .option('--kubeconfig <file>', 'kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)')
    .addHelpText('after', PROBE_MODES)
    .addHelpText('after', exitCodesHelp({ 0: 'stopped by SIGTERM or SIGINT' }))
    .action(async (flags: Flags) => {
      const logger = pino(pino.destination({ dest: 1, sync: true }));
      await run(flags, logger);
    });
}

const CHANNEL_NAMES: readonly string[] = ['lease', 'annotation', 'local'];

/** Every problem with the flags (and their environment fallbacks), before any request is made. */
function flagProblems(flags: Flags, env: NodeJS.ProcessEnv): string[] {
  const out: string[] = [];
  for (const [value, flag, name] of [
    [flags.node ?? env.NODE_NAME, '--node', 'NODE_NAME'],
    [flags.podName ?? env.POD_NAME, '--pod-name', 'POD_NAME'],
    [flags.namespace ?? env.POD_NAMESPACE, '--namespace', 'POD_NAMESPACE'],
  ] as const)
    if (!value) out.push(`${flag} (or env ${name}) is required`);
  const role = flags.role ?? env.LASTSEEN_ROLE ?? 'parent';
  if (role !== 'parent' && role !== 'checkpoint') out.push(`--role must be parent or checkpoint, not "${role}"`);
  if (flags.interval) {
    const d = parseDuration(flags.interval);
    if (!d.ok) out.push(`--interval: ${d.error}`);
  }
  for (const c of flags.channels?.split(',').map((x) => x.trim()) ?? [])
    if (!CHANNEL_NAMES.includes(c)) out.push(`--channels: "${c}" is not a channel (use lease, annotation, local)`);
  const probe = parseProbe(flags.probe);
  if (!probe.ok) out.push(`--probe: ${probe.error}`);
  if (flags.kubeconfig !== undefined && !existsSync(flags.kubeconfig)) out.push(`--kubeconfig ${flags.kubeconfig}: no such file`);
  return out;
}

async function run(flags: Flags, root: Logger): Promise<void> {
  const env = process.env;
  const problems = flagProblems(flags, env);
  if (problems.length > 0) throw usageError(problems);
  const node = (flags.node ?? env.NODE_NAME)!;
  const podName = (flags.podName ?? env.POD_NAME)!;
  const namespace = (flags.namespace ?? env.POD_NAMESPACE)!;
  const role = (flags.role ?? env.LASTSEEN_ROLE ?? 'parent') as Role;
  const intervalMs = flags.interval ? (parseDuration(flags.interval) as { ms: number }).ms : undefined;
  const channels = flags.channels
    ?.split(',')
    .map((c) => c.trim())
    .filter(Boolean) as Channel[] | undefined;
  const usesApi = !channels || channels.some((c) => c !== 'local');

  let key = flags.parentKey ?? env.LASTSEEN_PARENT_KEY;
  let podUid = flags.podUid ?? env.POD_UID ?? '';
  // The lines before the beats start carry the same fields as the beats' own (the key once known).
  let logger = root.child({ component: 'heartbeat', namespace, node, role, pod: podName, ...(key ? { key } : {}) });
  // Labels pick the per-parent policy overrides. Read them from a downward-API file when mounted
  // (no api-server needed, no RBAC beyond Leases); read the pod only when something is missing.
  const labelsFile = flags.labelsFile ?? env.LASTSEEN_LABELS_FILE;
  let labels: Record<string, string> = labelsFile ? readLabelsFile(labelsFile, logger) : {};
  if (!key || !podUid || (usesApi && !labelsFile)) {
    const pod = await readOwnPod(flags.kubeconfig, namespace, podName, logger);
    if (pod) {
      key ??= pod.key;
      podUid ||= pod.uid;
      if (!labelsFile) labels = pod.labels;
    }
  }
  if (!key) {
    key = podName;
    logger.warn(
      'parent key unknown (api unreachable, no --parent-key / LASTSEEN_PARENT_KEY): using the pod name; set LASTSEEN_PARENT_KEY so the agent finds these beats',
    );
  }

  logger = root.child({ component: 'heartbeat', namespace, key, node, role });
  const identity: HeartbeatIdentity = { node, podName, namespace, podUid, key, role };
  let hb: ReturnType<typeof startHeartbeat>;
  try {
    hb = startHeartbeat({
      identity,
      intervalMs,
      policyFile: flags.policyFile,
      labels,
      channels,
      probe: flags.probe,
      probeCaFile: flags.probeCa,
      probeInsecure: flags.probeInsecure,
      heartbeatDir: flags.heartbeatDir,
      readyFile: flags.readyFile,
      kubeconfigPath: flags.kubeconfig,
      // startHeartbeat adds the same fields itself.
      logger: root,
    });
  } catch (e) {
    throw new CliError((e as Error).message, 'EHEARTBEAT', 2);
  }

  await new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      logger.info({ signal }, 'heartbeat stopping');
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      hb.stop().then(resolve, (e) => {
        logger.error({ error: (e as Error).message }, 'heartbeat stop failed');
        resolve();
      });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  process.exit(0);
}

/** Our own pod's parent key, uid and labels; null when the api-server cannot tell us. */
async function readOwnPod(
  kubeconfig: string | undefined,
  namespace: string,
  name: string,
  logger: Logger,
): Promise<{ key: string; uid: string; labels: Record<string, string> } | null> {
  let client: BeatClient;
  try {
    client = makeLightClient(loadEndpoint(kubeconfig), { requestTimeoutMs: POD_LOOKUP_TIMEOUT_MS });
  } catch (e) {
    logger.warn({ error: (e as Error).message }, 'no api access: beating without reading this pod');
    return null;
  }
  try {
    for (let attempt = 1; attempt <= POD_LOOKUP_ATTEMPTS; attempt++) {
      try {
        const pod = await client.readPod({ name, namespace });
        const labels = pod.metadata?.labels ?? {};
        const owners = (pod.metadata?.ownerReferences ?? []).map((o) => ({ kind: o.kind, name: o.name, controller: o.controller }));
        return { key: parentKey({ name, labels, ownerReferences: owners }), uid: pod.metadata?.uid ?? '', labels };
      } catch (e) {
        const err = classifyKubeError(e, `pod ${namespace}/${name}`);
        logger.warn({ attempt, kind: err.kind, error: err.message }, 'cannot read this pod');
        if (err.kind !== 'unreachable') return null;
      }
    }
    return null;
  } finally {
    client.close();
  }
}

/** The downward API's labels file: one `key="value"` per line, values JSON-quoted. */
export function parseLabelsFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([^=\s]+)=(".*")\s*$/.exec(line);
    if (!m) continue;
    try {
      out[m[1]!] = JSON.parse(m[2]!) as string;
    } catch {
      // a malformed line is skipped; the rest still selects the policy
    }
  }
  return out;
}

function readLabelsFile(path: string, logger: Logger): Record<string, string> {
  try {
    return parseLabelsFile(readFileSync(path, 'utf8'));
  } catch (e) {
    logger.warn({ file: path, error: (e as Error).message }, 'labels file unreadable; policy overrides by label will not match');
    return {};
  }
}
