/**
 * The real-control-plane test harness.
 *
 * Promises: every `vitest run` of the integration project gets one kube-apiserver + etcd of its
 * own (started by global-setup.ts in a fresh folder, stopped when the run ends however it ends),
 * shared by all integration files, which run one at a time. Each file isolates itself with
 * `useNamespace()`. The fault helpers (`stopApiserver`, `stopEtcd`, …) act on that shared control
 * plane; an outage a file forgets to end is ended in that file's afterAll, so the next file starts
 * healthy.
 *
 * Assumes: no kube-controller-manager, scheduler or kubelet run. So there is no garbage collector,
 * namespaces never finish terminating and no pod is ever scheduled; tests must not wait for any of
 * that. The api-server runs a real cluster's admission chain (the default plugins, ServiceAccount
 * among them, plus NodeRestriction; authorization Node,RBAC), so a pod needs its ServiceAccount and
 * gets the `kube-api-access-*` volume: what the controller-manager would create in a namespace (the
 * `default` ServiceAccount, the `kube-root-ca.crt` ConfigMap) `useNamespace()` and global-setup.ts
 * create themselves (`namespaceBasics`).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, inject } from 'vitest';

export interface ControlPlane {
  /** the run folder ($LASTSEEN_CP_DIR): kubeconfigs, pki/, *.log */
  dir: string;
  /** https://127.0.0.1:<port> */
  server: string;
  /** client certificate in group system:masters */
  adminKubeconfig: string;
  /** client certificate for user `lastseen-user`, whom RBAC grants nothing */
  userKubeconfig: string;
  /** path of the kubectl binary matching the server version */
  kubectl: string;
  /** folder holding kube-apiserver and etcd */
  binDir: string;
  /** the CA that signed the server's certificate */
  caFile: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    controlPlane: ControlPlane;
  }
}

/** The RBAC user name of the `user` identity (the CN of its client certificate). */
export const USER_NAME = 'lastseen-user';

export const CONTROL_PLANE_SCRIPT = fileURLToPath(new URL('../../scripts/control-plane', import.meta.url));

/** Default for kubectl(): generous, since kubectl on a loaded 2-core box can take seconds to start. */
const KUBECTL_TIMEOUT_MS = 60_000;
/** Starting kube-apiserver waits for /readyz; the script gives up after 120 s, this allows a bit more. */
const SCRIPT_TIMEOUT_MS = 150_000;
/** Exit code reported when kubectl is killed for exceeding its timeout (as timeout(1) does). */
const TIMED_OUT_CODE = 124;

export function controlPlane(): ControlPlane {
  const cp = inject('controlPlane');
  if (!cp) {
    throw new Error(
      'no control plane was provided: run integration tests with `npx vitest run --project integration`, whose globalSetup (test/integration/global-setup.ts) starts one',
    );
  }
  return cp;
}

/** kube-apiserver's pid, from the control plane's run folder (scripts/control-plane): to stop it with SIGSTOP. */
export async function apiserverPid(): Promise<number> {
  return Number((await readFile(join(controlPlane().dir, 'kube-apiserver.pid'), 'utf8')).trim());
}

export function kubeConfigFor(identity: 'admin' | 'user' = 'admin'): KubeConfig {
  const cp = controlPlane();
  const kc = new KubeConfig();
  kc.loadFromFile(identity === 'admin' ? cp.adminKubeconfig : cp.userKubeconfig);
  return kc;
}

// Namespaces and outages of the current test file, undone in one afterAll registered when this
// module is loaded (vitest loads it afresh for each file). That keeps useNamespace() callable from
// anywhere: a test, a beforeAll, or a describe body.
const namespaces = new Set<string>();
const nodes = new Set<string>();
const outage = { apiserver: false, etcd: false };

afterAll(async () => {
  if (outage.etcd) await startEtcd();
  if (outage.apiserver) await startApiserver();
  const api = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  await Promise.all([...nodes].map((name) => api.deleteNode({ name }).catch(() => undefined)));
  nodes.clear();
  if (namespaces.size === 0) return;
  await Promise.all(
    [...namespaces].map((name) =>
      // Background: there is no namespace controller to finalize it; we only want it out of the way.
      api.deleteNamespace({ name, propagationPolicy: 'Background' }).catch(() => undefined),
    ),
  );
  namespaces.clear();
});

/** Creates a namespace named `<prefix>-<random>` and deletes it after the current file. */
export async function useNamespace(prefix = 'test'): Promise<string> {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 50) || 'test';
  const name = `${clean}-${randomBytes(4).toString('hex')}`;
  const api = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  await api.createNamespace({ body: { metadata: { name, labels: { 'lastseen.dev/test': 'true' } } } });
  namespaces.add(name);
  await namespaceBasics(api, name, await readFile(controlPlane().caFile, 'utf8'));
  return name;
}

/**
 * Registers a Node object named `name` (no kubelet behind it) and deletes it after the current file.
 * A real cluster has one for every node its pods are bound to, and the api-server refuses a
 * TokenRequest bound to a Node that does not exist: the agent's capture of a parent with a
 * `kube-api-access-*` volume mints one such token. Idempotent.
 */
export async function useNode(name: string): Promise<string> {
  const api = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  await api.createNode({ body: { metadata: { name, labels: { 'lastseen.dev/test': 'true' } } } }).catch((e: unknown) => {
    if ((e as { code?: number }).code !== 409) throw e;
  });
  nodes.add(name);
  return name;
}

/**
 * What kube-controller-manager gives every namespace and the integration control plane lacks: the
 * `default` ServiceAccount (the ServiceAccount admission plugin refuses pods without theirs) and the
 * `kube-root-ca.crt` ConfigMap (every pod's `kube-api-access-*` volume projects it). Idempotent.
 */
export async function namespaceBasics(api: CoreV1Api, namespace: string, caPem: string): Promise<void> {
  const exists = (e: unknown) => (e as { code?: number }).code === 409;
  await api.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'default' } } }).catch((e: unknown) => {
    if (!exists(e)) throw e;
  });
  await api.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'kube-root-ca.crt' }, data: { 'ca.crt': caPem } } }).catch((e: unknown) => {
    if (!exists(e)) throw e;
  });
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the control plane's kubectl as `identity` (default admin) or with `kubeconfig`. Never
 * throws on a non-zero exit or a timeout (code 124); only when kubectl cannot be started at all.
 */
export async function kubectl(
  args: string[],
  opts: { input?: string; identity?: 'admin' | 'user'; kubeconfig?: string; timeoutMs?: number } = {},
): Promise<KubectlResult> {
  const cp = controlPlane();
  const kubeconfig = opts.kubeconfig ?? (opts.identity === 'user' ? cp.userKubeconfig : cp.adminKubeconfig);
  const timeoutMs = opts.timeoutMs ?? KUBECTL_TIMEOUT_MS;
  // --cache-dir: discovery for this run's random port belongs in the run folder, not in ~/.kube/cache.
  const child = spawn(cp.kubectl, ['--kubeconfig', kubeconfig, '--cache-dir', join(cp.dir, 'kube-cache'), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return collect(child, opts.input, timeoutMs, `kubectl ${args.join(' ')}`);
}

function collect(child: ChildProcess, input: string | undefined, timeoutMs: number, what: string): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout?.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    child.stderr?.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${what}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) resolve({ code: TIMED_OUT_CODE, stdout, stderr: `${stderr}\n${what}: timed out after ${timeoutMs} ms` });
      else resolve({ code: code ?? 128 + (signal ? constants.signals[signal] : 0), stdout, stderr });
    });
    child.stdin?.on('error', () => undefined); // kubectl may exit before reading all input
    child.stdin?.end(input ?? '');
  });
}

/** Runs a scripts/control-plane subcommand against this run's control plane; throws on failure. */
export function runControlPlaneScript(args: string[], timeoutMs = SCRIPT_TIMEOUT_MS): Promise<string> {
  const cp = controlPlane();
  return new Promise((resolve, reject) => {
    execFile(
      CONTROL_PLANE_SCRIPT,
      args,
      { env: { ...process.env, LASTSEEN_CP_DIR: cp.dir }, timeout: timeoutMs, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`scripts/control-plane ${args.join(' ')} failed: ${err.message}\n${stderr}`));
        else resolve(stdout);
      },
    );
  });
}

/** Stops kube-apiserver (TERM: graceful, closes watches cleanly; KILL: connections just drop). */
export async function stopApiserver(signal: 'TERM' | 'KILL' = 'TERM'): Promise<void> {
  outage.apiserver = true;
  await runControlPlaneScript(['stop-apiserver', signal]);
}

/** Starts kube-apiserver on the same port and waits until /readyz answers ok. */
export async function startApiserver(): Promise<void> {
  await runControlPlaneScript(['start-apiserver']);
  outage.apiserver = false;
}

export async function restartApiserver(opts: { signal?: 'TERM' | 'KILL'; downMs?: number } = {}): Promise<void> {
  await stopApiserver(opts.signal);
  if (opts.downMs) await sleep(opts.downMs);
  await startApiserver();
}

/** Stops etcd; its data folder stays, so startEtcd() brings back every object. */
export async function stopEtcd(signal: 'TERM' | 'KILL' = 'TERM'): Promise<void> {
  outage.etcd = true;
  await runControlPlaneScript(['stop-etcd', signal]);
}

/** Starts etcd on the same ports and data, and waits for its /health. */
export async function startEtcd(): Promise<void> {
  await runControlPlaneScript(['start-etcd']);
  outage.etcd = false;
}

/**
 * Polls `fn` until it returns something other than undefined or false, and returns that. An error
 * thrown by `fn` counts as "not yet" (useful across an api-server restart); the last one is quoted
 * if time runs out.
 */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const intervalMs = opts.intervalMs ?? 200;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError === undefined ? '' : `; last error: ${lastError instanceof Error ? lastError.message : String(lastError)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a condition'}${why}`);
    }
    await sleep(intervalMs);
  }
}
