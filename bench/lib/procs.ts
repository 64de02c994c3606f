// lastseen as child processes (from the bundle, or through tsx), their JSON logs, /proc sampling.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './cp.js';

/** bundle: node lastseen.mjs; cached: the same with a compile cache warmed as the image's (see warmCompileCache); tsx: the sources. */
export type Runner = 'bundle' | 'cached' | 'tsx';

export interface Proc {
  child: ChildProcess;
  pid: number;
  startedAt: number;
  logs: Array<Record<string, unknown>>;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Calls fn for every log line from now on (and returns an unsubscribe). */
  onLog(fn: (l: Record<string, unknown>) => void): () => void;
}

const all = new Set<Proc>();
const temps = new Set<string>();

/** Removes every temporary folder this run made. */
export function removeTemps(): void {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
  temps.clear();
}

/** SIGKILL every child still running (on error and SIGINT). */
export function killAll(): void {
  for (const p of all) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
}

let bundlePath = join(ROOT, 'dist', 'lastseen.mjs');
/** The heartbeat sidecar's own bundle (scripts/bundle.mjs builds it beside lastseen.mjs): what parent pods run. */
let sidecarPath = join(ROOT, 'dist', 'lastseen-heartbeat.mjs');
/** Node flags of the sidecar's command in deploy/examples/parent-daemonset.yaml. */
export const SIDECAR_NODE_FLAGS = ['--max-semi-space-size=1'];

/** `npm run bundle`, then a private copy (others may rebuild dist/ while we run). */
export async function buildBundle(): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [join(ROOT, 'scripts', 'bundle.mjs')], { cwd: ROOT, timeout: 300_000 }, (err, _o, stderr) =>
      err ? reject(new Error(`bundle: ${err.message}\n${stderr}`)) : resolve(),
    );
  });
  const dir = await mkdtemp(join(tmpdir(), 'lastseen-bench-bin-'));
  temps.add(dir);
  bundlePath = join(dir, 'lastseen.mjs');
  await copyFile(join(ROOT, 'dist', 'lastseen.mjs'), bundlePath);
  sidecarPath = join(dir, 'lastseen-heartbeat.mjs');
  await copyFile(join(ROOT, 'dist', 'lastseen-heartbeat.mjs'), sidecarPath);
  return bundlePath;
}

let cacheDir: string | null = null;

/**
 * A V8 compile cache for both bundles, made as the Dockerfile makes the image's: one `--help` run
 * of each with NODE_COMPILE_CACHE set (the cache holds what that run compiled). Made once per bench run.
 */
export async function warmCompileCache(): Promise<string> {
  if (cacheDir) return cacheDir;
  const dir = await mkdtemp(join(tmpdir(), 'lastseen-bench-cache-'));
  temps.add(dir);
  const env = { ...process.env, NODE_COMPILE_CACHE: dir };
  const run = (argv: string[]) =>
    new Promise<void>((resolve, reject) =>
      execFile(process.execPath, argv, { cwd: ROOT, env, timeout: 60_000 }, (err) =>
        err ? reject(new Error(`warm compile cache: ${err.message}`)) : resolve(),
      ),
    );
  await run([bundlePath, 'agent', '--help']);
  await run([...SIDECAR_NODE_FLAGS, sidecarPath, 'heartbeat', '--help']);
  cacheDir = dir;
  return dir;
}

function compileCacheDir(): string {
  if (!cacheDir) throw new Error('runner "cached" needs warmCompileCache() first');
  return cacheDir;
}

/** The bundle `buildBundle` made (dist/lastseen.mjs before it ran). */
export function currentBundle(): string {
  return bundlePath;
}

/** A Node binary and a bundle to run instead of this process's Node and the current bundle (runtime section). */
export interface Pair {
  node: string;
  bundle: string;
  /** Node/V8 flags before the bundle (e.g. --max-semi-space-size=1) */
  flags?: string[];
  /** Environment added to this process's (e.g. the image's MALLOC_ARENA_MAX). */
  env?: Record<string, string>;
}

export function lastseen(args: string[], runner: Runner = 'bundle', pair?: Pair): Proc {
  const argv = pair
    ? [...(pair.flags ?? []), pair.bundle, ...args]
    : runner === 'bundle' || runner === 'cached'
      ? args[0] === 'heartbeat'
        ? // The sidecar's own bundle with the image's V8 flag: the command parent pods run (deploy/examples).
          [...SIDECAR_NODE_FLAGS, sidecarPath, ...args]
        : [bundlePath, ...args]
      : ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts'), ...args];
  const startedAt = Date.now();
  const env =
    runner === 'cached' && !pair ? { ...process.env, NODE_COMPILE_CACHE: compileCacheDir() } : pair?.env ? { ...process.env, ...pair.env } : process.env;
  const child = spawn(pair?.node ?? process.execPath, argv, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: Array<Record<string, unknown>> = [];
  const listeners = new Set<(l: Record<string, unknown>) => void>();
  let buf = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => {
    buf += s;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let l: Record<string, unknown>;
      try {
        l = JSON.parse(line) as Record<string, unknown>;
      } catch {
        l = { msg: line, raw: true };
      }
      logs.push(l);
      if (logs.length > 5000) logs.splice(0, 1000);
      for (const fn of listeners) fn(l);
    }
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    stderr = (stderr + s).slice(-5000);
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const p: Proc = {
    child,
    pid: child.pid!,
    startedAt,
    logs,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      all.delete(p);
      return code;
    },
    onLog(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
  };
  exited.then((code) => {
    if (code && process.env.BENCH_VERBOSE) process.stderr.write(`lastseen ${args[0]} exited ${code}: ${stderr}\n`);
  });
  all.add(p);
  return p;
}

export interface Dirs {
  root: string;
  manifests: string;
  state: string;
  heartbeats: string;
  policy: string;
}

export async function tempDirs(prefix = 'lastseen-bench-'): Promise<Dirs> {
  const root = await mkdtemp(join(tmpdir(), prefix));
  temps.add(root);
  const d = { root, manifests: join(root, 'manifests'), state: join(root, 'state'), heartbeats: join(root, 'heartbeats'), policy: join(root, 'policy.yaml') };
  await mkdir(d.heartbeats, { recursive: true });
  return d;
}

export async function writePolicy(path: string, defaults: string): Promise<void> {
  await writeFile(path, `apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults: ${defaults}\n`);
}

export function agentArgs(o: { node: string; namespace: string; kubeconfig: string; dirs: Dirs; extra?: string[] }): string[] {
  return [
    'agent',
    ...['--node', o.node, '--pod-name', `agent-${o.node}`, '--namespace', o.namespace, '--kubeconfig', o.kubeconfig],
    ...['--manifest-dir', o.dirs.manifests, '--state-dir', o.dirs.state, '--heartbeat-dir', o.dirs.heartbeats, '--policy-file', o.dirs.policy],
    ...['--health-port', '0', '--health-host', '127.0.0.1'],
    ...(o.extra ?? []),
  ];
}

export function healthPortOf(p: Proc): number | undefined {
  const l = p.logs.find((x) => x.msg === 'health endpoints listening');
  return l ? (l.port as number) : undefined;
}

let clkTck = 100;
export function setClockTicks(n: number): void {
  clkTck = n;
}

export interface ProcSample {
  t: number;
  cpuSeconds: number;
  rssKiB: number;
  /** RssFile: the part of VmRSS that is file-backed pages (the Node binary's code and data, mapped files). */
  rssFileKiB: number;
}

/** utime+stime (seconds) from /proc/<pid>/stat, VmRSS and RssFile from /proc/<pid>/status. */
export async function sampleProc(pid: number): Promise<ProcSample> {
  const [stat, status] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile(`/proc/${pid}/status`, 'utf8')]);
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime is field 14, stime field 15.
  const ticks = Number(fields[11]) + Number(fields[12]);
  const rss = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN);
  const file = Number(/^RssFile:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN);
  return { t: performance.now(), cpuSeconds: ticks / clkTck, rssKiB: rss, rssFileKiB: file };
}
