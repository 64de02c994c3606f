// Helpers of the end-to-end and fault suites (agent.test.ts, faults.test.ts): one parent pod bound to a node name (no kubelet runs
// it), `lastseen agent` and `lastseen heartbeat` as processes (processes.ts), an agent kubeconfig
// that can point at a TCP proxy, a watcher that records whether the checkpoint manifest ever
// appeared during a fault, and readers for the agent's /metrics and the state folder.
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { onTestFailed } from 'vitest';
import { Store } from '../../src/checkpoint/store.js';
import { controlPlane, kubeConfigFor, useNamespace, useNode, waitFor } from './harness.js';
import { lastseen, MainContainer, type Proc, tempDirs, writePolicy } from './processes.js';

export const KEY = 'demo';

export async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

/** The port of the api-server this run's control plane serves on. */
export function apiserverPort(): number {
  return Number(new URL(controlPlane().server).port);
}

/** A copy of the admin kubeconfig whose `server:` is https://127.0.0.1:<port> (the cert has SAN 127.0.0.1). */
export async function kubeconfigVia(port: number): Promise<string> {
  const cp = controlPlane();
  const text = await readFile(cp.adminKubeconfig, 'utf8');
  const rewritten = text.replace(/^(\s*server:\s*)https:\/\/127\.0\.0\.1:\d+\s*$/m, `$1https://127.0.0.1:${port}`);
  if (rewritten === text) throw new Error(`no "server: https://127.0.0.1:<port>" line to rewrite in ${cp.adminKubeconfig}`);
  const dir = await mkdtemp(join(tmpdir(), 'lastseen-faults-kc-'));
  const path = join(dir, 'via-proxy.kubeconfig');
  await writeFile(path, rewritten, { mode: 0o600 });
  return path;
}

/**
 * The parent pod, or by `name` another pod of its key (a successor). With a secret volume (the
 * Secret faultSetup creates), the capture reads the Secret through the agent's pooled
 * api client, which leaves a kept-alive connection behind (as in production, where captures and
 * Events run over it); without one, the capture needs no request.
 */
async function parentPod(ns: string, node: string, secret: boolean, name = `demo-${node}`): Promise<{ name: string; uid: string }> {
  const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  const pod = await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name, labels: { 'lastseen.dev/parent': KEY, app: 'demo' }, annotations: { 'lastseen.dev/checkpoint': 'true' } },
      spec: {
        nodeName: node,
        containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10', ...(secret ? { volumeMounts: [{ name: 'tls', mountPath: '/tls' }] } : {}) }],
        ...(secret ? { volumes: [{ name: 'tls', secret: { secretName: 'demo-tls' } }] } : {}),
      },
    },
  });
  return { name: pod.metadata!.name!, uid: pod.metadata!.uid! };
}

export interface FaultSetupOptions {
  /** The policy's `defaults:` (flow YAML). */
  policy: string;
  /** The agent's kubeconfig (default: admin, straight to the api-server). */
  agentKubeconfig?: string;
  /** The agent's --watchdog (default 10s). */
  watchdog?: string;
  /** Give the parent a secret volume (default true): its capture then uses the agent's pooled api connection. */
  secret?: boolean;
  /** Run agent and heartbeat from this bundle (dist/lastseen.mjs) instead of the sources. */
  bundle?: string;
}

export interface FaultSetup {
  ns: string;
  node: string;
  dirs: Awaited<ReturnType<typeof tempDirs>>;
  pod: { name: string; uid: string };
  main: MainContainer;
  /** The active checkpoint's manifest (exists only while the checkpoint is active). */
  manifest: string;
  /** The running agent; a test that restarts it assigns the new one here. */
  agent: Proc;
  /** Starts another agent process with the same folders and flags (after the first was stopped), plus `extra` (later flags win). */
  startAgent(extra?: string[]): Proc;
  /** Starts `lastseen heartbeat` for the parent (default channel: lease) as `pod` (default: the parent pod), straight to the api-server (never via a proxy). */
  heartbeat(channels?: string, pod?: { name: string; uid: string }): Proc;
  /** Another pod of the parent's key on the node, as a surge rollout's new pod (same spec, its own name). */
  addParentPod(name: string): Promise<{ name: string; uid: string }>;
}

export async function faultSetup(name: string, o: FaultSetupOptions): Promise<FaultSetup> {
  const ns = await useNamespace(name);
  const node = await useNode(`node-${ns}`);
  const dirs = await tempDirs();
  await writePolicy(dirs.policy, o.policy);
  // The Secret every parent pod of the setup mounts (parentPod with `secret`).
  if (o.secret ?? true)
    await kubeConfigFor('admin')
      .makeApiClient(CoreV1Api)
      .createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'demo-tls' }, stringData: { 'tls.key': 'secret-key-bytes' } } });
  const pod = await parentPod(ns, node, o.secret ?? true);
  const main = new MainContainer();
  await main.up();
  const cp = controlPlane();
  const startAgent = (extra: string[] = []) =>
    lastseen(
      [
        'agent',
        ...['--node', node, '--pod-name', `agent-${node}`, '--namespace', ns, '--kubeconfig', o.agentKubeconfig ?? cp.adminKubeconfig],
        ...['--manifest-dir', dirs.manifests, '--state-dir', dirs.state, '--heartbeat-dir', dirs.heartbeats, '--policy-file', dirs.policy],
        ...['--health-port', '0', '--health-host', '127.0.0.1', '--api-probe', '500ms', '--local-poll', '200ms', '--watchdog', o.watchdog ?? '10s'],
        ...extra,
      ],
      {},
      o.bundle,
    );
  const setup: FaultSetup = {
    ns,
    node,
    dirs,
    pod,
    main,
    manifest: join(dirs.manifests, `lastseen-${ns}-${KEY}.json`),
    agent: startAgent(),
    startAgent,
    addParentPod: (name) => parentPod(ns, node, o.secret ?? true, name),
    heartbeat: (channels = 'lease', as = pod) =>
      lastseen(
        [
          'heartbeat',
          ...['--node', node, '--pod-name', as.name, '--namespace', ns, '--pod-uid', as.uid, '--parent-key', KEY],
          ...['--channels', channels, '--interval', '250ms', '--probe', main.probe(), '--heartbeat-dir', dirs.heartbeats, '--kubeconfig', cp.adminKubeconfig],
        ],
        {},
        o.bundle,
      ),
  };
  // On failure, keep the agent's log for a post-mortem and say where it is.
  onTestFailed(async () => {
    const path = join(dirs.root, 'agent.log.jsonl');
    await writeFile(path, setup.agent.logs.map((l) => JSON.stringify(l)).join('\n'));
    process.stderr.write(`[e2e] agent log of the failed test: ${path}\n`);
  });
  return setup;
}

/** Waits for the first capture (meta.json of the parent's checkpoint). */
export async function captured(s: FaultSetup): Promise<void> {
  await waitFor(() => exists(join(s.dirs.state, 'checkpoints', `${s.ns}_${KEY}`, 'meta.json')), { timeoutMs: 60_000, what: 'the first capture' });
}

export async function appears(path: string, timeoutMs = 30_000): Promise<number> {
  const t0 = Date.now();
  await waitFor(() => exists(path), { timeoutMs, intervalMs: 25, what: `${path} to appear` });
  return Date.now() - t0;
}

export interface Transition {
  from: string;
  to: string;
  reason: string;
  /** Index in the agent's logs. */
  at: number;
}

/**
 * The agent's state transitions from log line `since` on, and its notes (a reason change without a
 * state change) as transitions from a state to itself; `reason` is `Code: message`.
 */
export function transitions(p: Proc, since = 0): Transition[] {
  const out: Transition[] = [];
  p.logs.forEach((l, i) => {
    if (i < since) return;
    const reason = `${String(l.reason)}: ${String(l.message)}`;
    if (l.msg === 'transition') out.push({ from: String(l.from), to: String(l.to), reason, at: i });
    else if (l.msg === 'reason noted') out.push({ from: String(l.state), to: String(l.state), reason, at: i });
  });
  return out;
}

/** Waits until the agent reports the parent Healthy (a transition to Healthy after log line `since`). */
export async function healthy(p: Proc, since = 0, timeoutMs = 60_000): Promise<void> {
  await waitFor(() => transitions(p, since).some((t) => t.to === 'Healthy'), { timeoutMs, what: 'the parent to be Healthy' });
}

/** The agent's latest verdict on the api-server (its own log line, not the probe's), null before the first. */
export function apiReachable(p: Proc): boolean | null {
  for (let i = p.logs.length - 1; i >= 0; i--) {
    const l = p.logs[i]!;
    if (l.msg === 'api-server reachability changed' && l.observer === undefined) return l.reachable === true;
  }
  return null;
}

/**
 * Waits until the agent's verdict is `reachable`. For `true`, the verdict must hold for `stableMs`
 * (after an etcd restart kube-apiserver's /readyz flaps for a few seconds, and so does the verdict).
 */
export async function reachability(p: Proc, reachable: boolean, timeoutMs = 60_000, stableMs = reachable ? 3_000 : 0): Promise<void> {
  let since: number | null = null;
  await waitFor(
    () => {
      if (apiReachable(p) !== reachable) {
        since = null;
        return false;
      }
      since ??= Date.now();
      return Date.now() - since >= stableMs;
    },
    { timeoutMs, intervalMs: 100, what: `the agent to find the api-server ${reachable ? 'reachable' : 'unreachable'}${stableMs ? ` for ${stableMs} ms` : ''}` },
  );
}

/**
 * Polls `path` every 25 ms until stopped and remembers whether (and when, relative to the start)
 * it ever existed: a checkpoint manifest that flickers in and out during a fault is caught.
 */
export function watchFile(path: string): { stop(): Promise<number | null> } {
  const t0 = Date.now();
  let seenAt: number | null = null;
  let running = true;
  const loop = (async () => {
    while (running) {
      if (seenAt === null && (await exists(path))) seenAt = Date.now() - t0;
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return seenAt;
    },
  };
}

export async function metricsText(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/** The value of one series (`name{labels}`) in Prometheus text, 0 when absent. */
export function metric(body: string, series: string): number {
  for (const line of body.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return 0;
}

/** The state folder's checkpoints as a restarted agent would load them. */
export async function storedCheckpoints(stateDir: string): Promise<{ ids: string[]; problems: string[] }> {
  const listed = await new Store({ stateDir }).list();
  return { ids: listed.checkpoints.map((c) => c.id), problems: listed.problems.map((p) => `${p.id}: ${p.reason}`) };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
