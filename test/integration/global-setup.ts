/**
 * vitest globalSetup of the integration project: one real control plane per run.
 *
 * Promises: `scripts/control-plane ensure` then `up` in a fresh mkdtemp folder (so this run never
 * collides with a developer's own control plane or another concurrent run), every CRD in crds/
 * installed and Established, and the result handed to tests as `inject('controlPlane')` (see
 * harness.ts). The control plane is stopped when the run ends: by the returned teardown, on
 * SIGINT/SIGTERM and process exit, and, should this process be SIGKILLed, by the script's own
 * watchdog (LASTSEEN_CP_OWNER_PID). If the binaries cannot be had, the run fails saying how to
 * provide them; it never skips.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import type { ControlPlane } from './harness.js';

const SCRIPT = fileURLToPath(new URL('../../scripts/control-plane', import.meta.url));
const CRD_DIR = fileURLToPath(new URL('../../crds/', import.meta.url));
/** A cold `ensure` builds three Go binaries: ~4.5 min on 2 cores; allow for a slower box. */
const ENSURE_TIMEOUT_MS = 20 * 60_000;
/** `up` waits up to 120 s for /readyz itself. */
const UP_TIMEOUT_MS = 180_000;
const DOWN_TIMEOUT_MS = 60_000;
const CRD_ESTABLISHED_TIMEOUT = '60s';

const HOW_TO_PROVIDE =
  'The integration tests need kube-apiserver, etcd and kubectl. Either install Go (https://go.dev/dl, ' +
  'the version named in scripts/go/kube/go.mod) so `scripts/control-plane ensure` can build them, or set ' +
  'KUBEBUILDER_ASSETS to a folder holding kube-apiserver, etcd and kubectl (e.g. from setup-envtest).';

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command; its stderr is shown live (a cold build talks for minutes) and also kept. */
function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number, input?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    // stdin is a pipe only when there is input: a command that exits at once (a warm `ensure`)
    // would otherwise race our write and fail the run with EPIPE.
    const child = spawn(cmd, args, { env, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    child.stderr!.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
      process.stderr.write(s);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    if (child.stdin) {
      child.stdin.on('error', () => {}); // the child's exit code tells what happened
      child.stdin.end(input);
    }
  });
}

function seconds(sinceMs: number): string {
  return `${((Date.now() - sinceMs) / 1000).toFixed(1)}s`;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const ensure = await run(SCRIPT, ['ensure'], process.env, ENSURE_TIMEOUT_MS);
  if (ensure.code !== 0) {
    const help = ensure.stderr.includes('KUBEBUILDER_ASSETS') ? '' : `\n\n${HOW_TO_PROVIDE}`;
    throw new Error(`scripts/control-plane ensure failed (exit ${ensure.code}):\n${ensure.stderr.trim()}${help}`);
  }
  const ensureTime = seconds(t0);

  const dir = await mkdtemp(join(tmpdir(), 'lastseen-cp-'));
  const env = { ...process.env, LASTSEEN_CP_DIR: dir };

  let stopped = false;
  const downSync = (): void => {
    if (stopped) return;
    stopped = true;
    spawnSync(SCRIPT, ['down'], { env, stdio: 'ignore', timeout: DOWN_TIMEOUT_MS });
  };
  // vitest answers SIGINT/SIGTERM with process.exit() and skips global teardown, so stop here too.
  const onSignal = (signal: NodeJS.Signals): void => {
    downSync();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('exit', downSync);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const unregister = (): void => {
    process.off('exit', downSync);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };

  const teardown = async (): Promise<void> => {
    if (stopped) return unregister();
    // The exit handler stays armed until `down` is done, in case vitest gives up on teardown first.
    const down = await run(SCRIPT, ['down'], env, DOWN_TIMEOUT_MS);
    stopped = true;
    unregister();
    if (down.code !== 0) throw new Error(`scripts/control-plane down failed (exit ${down.code}): ${down.stderr}`);
    // etcd's data is the only bulky part (preallocated WAL); logs, kubeconfigs and keys stay for a post-mortem.
    if (process.env.LASTSEEN_CP_KEEP !== '1') await rm(join(dir, 'etcd-data'), { recursive: true, force: true });
    process.stderr.write(`control-plane: logs kept in ${dir}\n`);
  };

  try {
    const t1 = Date.now();
    const up = await run(SCRIPT, ['up'], { ...env, LASTSEEN_CP_OWNER_PID: String(process.pid) }, UP_TIMEOUT_MS);
    if (up.code !== 0) throw new Error(`scripts/control-plane up failed (exit ${up.code}); logs in ${dir}:\n${up.stderr.trim()}`);
    const exported = Object.fromEntries([...up.stdout.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
    const kubectl = exported.LASTSEEN_KUBECTL;
    if (!kubectl) throw new Error(`scripts/control-plane up printed no LASTSEEN_KUBECTL:\n${up.stdout}`);
    const binDir = await run(SCRIPT, ['bin-dir'], env, DOWN_TIMEOUT_MS);
    const cp: ControlPlane = {
      dir,
      server: (await readFile(join(dir, 'server'), 'utf8')).trim(),
      adminKubeconfig: join(dir, 'admin.kubeconfig'),
      userKubeconfig: join(dir, 'user.kubeconfig'),
      kubectl,
      binDir: binDir.stdout.trim(),
      caFile: join(dir, 'pki', 'ca.crt'),
    };
    const crds = await installCrds(cp);
    await systemNamespaceBasics(cp);
    process.stderr.write(`control-plane: ensure ${ensureTime}, up ${seconds(t1)}, ${crds.length} CRD(s) established, server ${cp.server}, dir ${dir}\n`);
    project.provide('controlPlane', cp);
  } catch (err) {
    await teardown().catch(() => undefined);
    throw err;
  }
  return teardown;
}

/** Namespaces the api-server creates itself; their basics come from the controller-manager, which does not run here. */
const SYSTEM_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

/**
 * The `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap in every system namespace, as
 * kube-controller-manager would make them (harness.ts `namespaceBasics` does the same for a test's
 * own namespaces): with the ServiceAccount admission plugin on, a pod without its account is refused.
 */
async function systemNamespaceBasics(cp: ControlPlane): Promise<void> {
  const ca = await readFile(cp.caFile, 'utf8');
  const items = SYSTEM_NAMESPACES.flatMap((namespace) => [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'kube-root-ca.crt', namespace }, data: { 'ca.crt': ca } },
  ]);
  const input = JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
  const apply = await run(cp.kubectl, ['--kubeconfig', cp.adminKubeconfig, 'apply', '-f', '-'], process.env, 120_000, input);
  if (apply.code !== 0) throw new Error(`creating the system namespaces' default ServiceAccounts failed:\n${apply.stderr}`);
}

/** Applies every crds/*.yaml and waits until each CRD is Established; returns their names. */
async function installCrds(cp: ControlPlane): Promise<string[]> {
  const files = (await readdir(CRD_DIR).catch(() => [] as string[]))
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .map((f) => join(CRD_DIR, f));
  if (files.length === 0) return [];
  const kc = ['--kubeconfig', cp.adminKubeconfig];
  const apply = await run(cp.kubectl, [...kc, 'apply', '-o', 'name', ...files.flatMap((f) => ['-f', f])], process.env, 120_000);
  if (apply.code !== 0) throw new Error(`installing CRDs from crds/ failed:\n${apply.stderr}`);
  const names = apply.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('customresourcedefinition'));
  if (names.length === 0) return [];
  const wait = await run(cp.kubectl, [...kc, 'wait', '--for=condition=Established', `--timeout=${CRD_ESTABLISHED_TIMEOUT}`, ...names], process.env, 120_000);
  if (wait.code !== 0) throw new Error(`CRDs from crds/ did not become Established:\n${wait.stderr}`);
  return names;
}
