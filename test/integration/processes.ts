// Child processes for end-to-end tests: `lastseen agent` and `lastseen heartbeat` run as real
// processes (through tsx, or from the bundle when LASTSEEN_BIN points at dist/lastseen.mjs),
// their JSON logs kept for assertions, and a TCP "main container" whose readiness a test toggles.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { waitFor } from './harness.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');

export interface Proc {
  child: ChildProcess;
  logs: Array<Record<string, unknown>>;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const all = new Set<Proc>();
afterAll(async () => {
  await Promise.all([...all].map((p) => p.stop('SIGKILL')));
});

/** Start `lastseen <args>`; stdout lines that parse as JSON are kept in `logs`. */
export function lastseen(args: string[], env: NodeJS.ProcessEnv = {}, bundle?: string): Proc {
  const bin = bundle ?? process.env.LASTSEEN_BIN;
  // node --import tsx (not the tsx wrapper, which does not pass SIGTERM on to the program).
  const [cmd, argv] = bin ? [process.execPath, [bin, ...args]] : [process.execPath, ['--import', 'tsx', MAIN, ...args]];
  const child = spawn(cmd, argv, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: Array<Record<string, unknown>> = [];
  let buf = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => {
    buf += s;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        logs.push({ msg: line, raw: true });
      }
    }
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
    if (stderr.length > 20_000) stderr = stderr.slice(-10_000);
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const p: Proc = {
    child,
    logs,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const code = await exited;
      all.delete(p);
      return code;
    },
  };
  exited.then((code) => {
    if (code !== 0 && code !== null && process.env.LASTSEEN_TEST_VERBOSE) process.stderr.write(`lastseen ${args[0]} exited ${code}: ${stderr}\n`);
  });
  all.add(p);
  return p;
}

export async function tempDirs(): Promise<{ root: string; manifests: string; state: string; heartbeats: string; policy: string }> {
  const root = await mkdtemp(join(tmpdir(), 'lastseen-e2e-'));
  return { root, manifests: join(root, 'manifests'), state: join(root, 'state'), heartbeats: join(root, 'heartbeats'), policy: join(root, 'policy.yaml') };
}

export async function writePolicy(path: string, defaults: string, overrides = ''): Promise<void> {
  await writeFile(path, `apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults: ${defaults}\n${overrides}`);
}

/** A TCP server standing in for the parent's main container: listening = Ready. */
export class MainContainer {
  private server: Server | null = null;
  port = 0;
  async up(): Promise<void> {
    if (this.server) return;
    const s = createServer((c) => c.end());
    await new Promise<void>((r) => s.listen(this.port, '127.0.0.1', () => r()));
    const a = s.address();
    if (typeof a === 'object' && a) this.port = a.port;
    this.server = s;
  }
  async down(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }
  probe(): string {
    return `tcp://127.0.0.1:${this.port}`;
  }
}

export async function healthPort(p: Proc): Promise<number> {
  const line = await waitFor(() => p.logs.find((l) => l.msg === 'health endpoints listening'), { timeoutMs: 60_000, what: 'the agent to listen' });
  return line.port as number;
}

export function logsWith(p: Proc, msg: string): Array<Record<string, unknown>> {
  return p.logs.filter((l) => l.msg === msg);
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end and keeps its output; killed after `timeoutMs`. Never rejects on a non-zero exit. */
export function runCommand(cmd: string, args: string[], o: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: o.cwd ?? ROOT,
      env: o.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: o.timeoutMs,
      killSignal: 'SIGKILL',
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
