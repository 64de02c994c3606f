// One CLI entry point run as a process of its own, as a user or the kubelet runs it: from the
// sources through tsx, its output collected, its exit code the verdict.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** `lastseen` (the agent's and the operator's CLI). */
export const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
/** `lastseen-heartbeat` (the sidecar's bundle: heartbeat, ready). */
export const HEARTBEAT_MAIN = join(ROOT, 'src', 'cli', 'heartbeat-main.ts');
/** tsx compiles on start; on a loaded 2-core box that takes seconds. */
export const RUN_TIMEOUT_MS = 60_000;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `entry` with `args`; `env`, when given, is laid over this process's environment. */
export function runCli(entry: string, args: string[], env?: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
      cwd: ROOT,
      ...(env ? { env: { ...process.env, ...env } } : {}),
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: RUN_TIMEOUT_MS,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
