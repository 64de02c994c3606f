// The real control plane for the benchmark: `scripts/control-plane` in a fresh mkdtemp folder (never
// shared with a developer's or a test run's), the CRDs installed, kube-apiserver's own /metrics read
// with the admin client certificate.
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { mkdtemp, readdir } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = join(ROOT, 'scripts', 'control-plane');

export interface ControlPlane {
  dir: string;
  server: string;
  adminKubeconfig: string;
  kubectl: string;
  kc(): KubeConfig;
  kubectlRun(args: string[], input?: string): Promise<string>;
  /** apiserver_request_total summed over codes, keyed `VERB resource[/subresource]`; the scrape itself is left out. */
  requests(): Promise<Map<string, number>>;
  down(): void;
}

function script(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(SCRIPT, args, { env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`scripts/control-plane ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

export async function controlPlaneUp(): Promise<ControlPlane> {
  await script(['ensure'], process.env, 20 * 60_000);
  const dir = await mkdtemp(join(tmpdir(), 'lastseen-bench-cp-'));
  // The script's watchdog runs `down` if this process dies without doing so (SIGKILL).
  const env = { ...process.env, LASTSEEN_CP_DIR: dir, LASTSEEN_CP_OWNER_PID: String(process.pid) };
  let downed = false;
  const down = () => {
    if (downed) return;
    downed = true;
    try {
      execFileSync(SCRIPT, ['down'], { env, stdio: 'ignore', timeout: 60_000 });
    } catch {
      // best effort; the watchdog covers the rest
    }
    rmSync(dir, { recursive: true, force: true });
  };
  let out: string;
  try {
    out = await script(['up'], env, 180_000);
  } catch (e) {
    down();
    throw e;
  }
  const vars = Object.fromEntries([...out.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
  const adminKubeconfig = vars.LASTSEEN_ADMIN_KUBECONFIG!;
  const kubectl = vars.LASTSEEN_KUBECTL!;
  const server = readFileSync(join(dir, 'server'), 'utf8').trim();
  const pki = join(dir, 'pki');
  const tls = { ca: readFileSync(join(pki, 'ca.crt')), cert: readFileSync(join(pki, 'admin.crt')), key: readFileSync(join(pki, 'admin.key')) };
  const kubectlRun = (args: string[], input?: string) =>
    new Promise<string>((resolve, reject) => {
      const child = execFile(
        kubectl,
        ['--kubeconfig', adminKubeconfig, '--cache-dir', join(dir, 'kube-cache'), ...args],
        { timeout: 120_000 },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`kubectl ${args.join(' ')}: ${err.message}\n${stderr}`));
          else resolve(stdout);
        },
      );
      child.stdin?.end(input ?? '');
    });
  const requests = () =>
    new Promise<Map<string, number>>((resolve, reject) => {
      const req = request(`${server}/metrics`, { ...tls, method: 'GET' }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (s: string) => {
          body += s;
        });
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`/metrics answered ${res.statusCode}`));
          resolve(parseRequests(body));
        });
      });
      req.on('error', reject);
      req.setTimeout(30_000, () => req.destroy(new Error('/metrics timed out')));
      req.end();
    });
  const cp: ControlPlane = {
    dir,
    server,
    adminKubeconfig,
    kubectl,
    kc: () => {
      const kc = new KubeConfig();
      kc.loadFromFile(adminKubeconfig);
      return kc;
    },
    kubectlRun,
    requests,
    down,
  };
  // Every CRD (the agent writes NodeCheckpoint status), Established before use.
  const crdDir = join(ROOT, 'crds');
  for (const f of (await readdir(crdDir)).filter((f) => f.endsWith('.yaml'))) await kubectlRun(['apply', '-f', join(crdDir, f)]);
  await kubectlRun(['wait', '--for', 'condition=Established', '--timeout', '60s', 'crd', '--all']);
  return cp;
}

export function parseRequests(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^apiserver_request_total\{([^}]*)\} (\S+)$/gm)) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (labels.subresource === '/metrics') continue; // our own scrapes
    const what = labels.resource ? `${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}` : labels.subresource || '?';
    const key = `${labels.verb} ${what}`;
    out.set(key, (out.get(key) ?? 0) + Number(m[2]));
  }
  return out;
}

/** after − before, per key (only keys that moved). */
export function delta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) {
    const d = v - (before.get(k) ?? 0);
    if (d !== 0) out.set(k, d);
  }
  return out;
}

export function total(m: Map<string, number>, filter: (key: string) => boolean = () => true): number {
  let t = 0;
  for (const [k, v] of m) if (filter(k)) t += v;
  return t;
}

/** The api-server's own background traffic (no lastseen process running), per key per second. */
export interface Baseline {
  seconds: number;
  perSecond: Map<string, number>;
}

/** Requests attributable to us: delta minus the background rate × duration, per key, floored at 0 in total. */
export function net(d: Map<string, number>, base: Baseline, seconds: number, filter: (key: string) => boolean = () => true): number {
  let t = 0;
  for (const [k, v] of d) if (filter(k)) t += v;
  for (const [k, r] of base.perSecond) if (filter(k)) t -= r * seconds;
  return Math.max(0, t);
}
