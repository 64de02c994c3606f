// npm run e2e:redirect -- [--trials N] [--bad-trials N] [--drain-ms MS] [--json] [--out FILE]
//
// Decision 0012 measured on real kube-apiservers (v1.36.3, one etcd), side by side in one run, in a
// network namespace of its own (nothing of the machine's network is touched): a parent api-server
// and its copy, clients polling the parent's port for `/readyz` on a new connection every
// POLL_MS (as a load balancer's health check and any new client do), each way:
//
// - shared: the copy beside the parent on the parent's port (`--permit-port-sharing`, SO_REUSEPORT),
//   as lastseen's `overlap` hand-over runs it today;
// - redirect: the copy on a port of its own, the parent alone on its port, and the agent's nftables
//   redirect (src/agent/redirect.ts) sending new connections to the copy while it stands.
//
// (The shared way twice: with the kernel's default net.ipv4.tcp_migrate_req 0 and with 1, which
// the real beds set; the redirect with 1.) Two events, each way: the retire (shared: SIGTERM to the copy; redirect: remove the redirect,
// wait --drain-ms, then SIGTERM), --trials times; and a bad spec (an api-server whose etcd accepts
// and never answers: it binds at once, answers nothing and exits after ~20 s) starting beside a
// serving copy, --bad-trials times. Counted: the polls that failed (no answer within 1 s, a reset,
// or anything but HTTP 200). Needs root (a network namespace, nft) and scripts/control-plane ensure.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { DEFAULT_EXCEPT_ADDRESS, NftRedirector, type Redirect } from '../../src/agent/redirect.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CP = join(ROOT, 'scripts', 'control-plane');
const PORT = 6443;
const COPY_PORT = 16443;
const POLL_MS = 50;
const POLLERS = 4;

const o = new Command()
  .option('--trials <n>', 'retires per way', '15')
  .option('--bad-trials <n>', 'bad-spec starts per way', '2')
  .option('--drain-ms <ms>', 'redirect: wait between removing the redirect and stopping the copy', '1500')
  .option('--json', 'print one JSON document')
  .option('--out <file>', 'also write the JSON document here')
  .parse()
  .opts<{ trials: string; badTrials: string; drainMs: string; json?: boolean; out?: string }>();

// Run inside a network namespace of our own: re-run this script under `unshare --net`.
if (process.env.LASTSEEN_REDIRECT_NETNS !== '1') {
  if (process.getuid?.() !== 0) {
    console.error('e2e:redirect needs root (a network namespace of its own, nftables)');
    process.exit(2);
  }
  try {
    execFileSync('unshare', ['--net', process.execPath, ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
      stdio: 'inherit',
      env: { ...process.env, LASTSEEN_REDIRECT_NETNS: '1' },
    });
    process.exit(0);
  } catch (e) {
    process.exit((e as { status?: number }).status ?? 1);
  }
}

const log = (m: string) => process.stderr.write(`e2e:redirect: ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
execFileSync('ip', ['link', 'set', 'lo', 'up']);

const dir = `/tmp/lastseen-redirect-${process.pid}`;
const cpEnv = { ...process.env, LASTSEEN_CP_DIR: join(dir, 'cp'), LASTSEEN_CP_OWNER_PID: String(process.pid) };
mkdirSync(dir, { recursive: true });
execFileSync(CP, ['up'], { env: cpEnv, stdio: ['ignore', 'ignore', 'inherit'] });
execFileSync(CP, ['stop-apiserver'], { env: cpEnv, stdio: ['ignore', 'ignore', 'inherit'] });
const bin = execFileSync(CP, ['bin-dir'], { env: cpEnv, encoding: 'utf8' }).trim();
const pki = join(dir, 'cp', 'pki');
const etcdUrl = readFileSync(join(dir, 'cp', 'etcd.url'), 'utf8').trim();
const tls = { ca: readFileSync(join(pki, 'ca.crt')), cert: readFileSync(join(pki, 'admin.crt')), key: readFileSync(join(pki, 'admin.key')) };

// An etcd that accepts and never answers: kube-apiserver binds, answers nothing, exits after ~20 s.
const held: Socket[] = [];
const blackHole = createServer((s) => held.push(s));
await new Promise<void>((r) => blackHole.listen(0, '127.0.0.1', r));
const deadEtcd = `http://127.0.0.1:${(blackHole.address() as { port: number }).port}`;

const procs = new Set<ChildProcess>();
let n = 0;
function apiserver(name: string, port: number, extra: string[], etcd = etcdUrl): ChildProcess {
  const args = [
    '--advertise-address=127.0.0.1',
    '--bind-address=0.0.0.0',
    `--secure-port=${port}`,
    `--etcd-servers=${etcd}`,
    `--cert-dir=${join(dir, `certs-${++n}`)}`,
    `--tls-cert-file=${join(pki, 'server.crt')}`,
    `--tls-private-key-file=${join(pki, 'server.key')}`,
    `--client-ca-file=${join(pki, 'ca.crt')}`,
    '--authorization-mode=Node,RBAC',
    '--service-account-issuer=https://lastseen.test',
    `--service-account-key-file=${join(pki, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--shutdown-watch-termination-grace-period=3s',
    ...extra,
  ];
  const child = spawn(join(bin, 'kube-apiserver'), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let tail = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    tail = (tail + s).slice(-4000);
  });
  child.once('exit', (code, sig) => {
    procs.delete(child);
    if (name !== 'bad' && !stopping.has(child)) log(`${name} exited unasked (${code ?? sig}): ${tail.split('\n').slice(-3).join(' | ')}`);
  });
  procs.add(child);
  return child;
}
const stopping = new Set<ChildProcess>();
async function stop(c: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  stopping.add(c);
  const done = new Promise((r) => c.once('exit', r));
  c.kill(signal);
  const t = setTimeout(() => c.kill('SIGKILL'), 20_000);
  await done;
  clearTimeout(t);
}

interface Poll {
  ok: boolean;
  detail: string;
}
/** One `/readyz` on a new connection; `host` the address to connect to. */
function poll(host: string, port: number): Promise<Poll> {
  return new Promise((resolve) => {
    const req = request({ host, port, path: '/readyz', agent: false, timeout: 1000, ...tls, checkServerIdentity: () => undefined }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (s: string) => {
        body += s;
      });
      res.on('end', () =>
        resolve({
          ok: res.statusCode === 200,
          detail:
            res.statusCode === 200
              ? ''
              : `HTTP ${res.statusCode}: ${body
                  .split('\n')
                  .filter((l) => l.startsWith('[-]'))
                  .join(' ')
                  .slice(0, 200)}`,
        }),
      );
    });
    req.on('timeout', () => {
      req.destroy();
      resolve({ ok: false, detail: 'no answer within 1 s' });
    });
    req.on('error', (e) => resolve({ ok: false, detail: (e as NodeJS.ErrnoException).code ?? e.message }));
    req.end();
  });
}

async function ready(host: string, port: number, withinMs = 60_000): Promise<void> {
  const until = Date.now() + withinMs;
  for (let okInRow = 0; okInRow < 3; ) {
    if (Date.now() > until) throw new Error(`no Ready api-server at ${host}:${port} within ${withinMs / 1000} s`);
    okInRow = (await poll(host, port)).ok ? okInRow + 1 : 0;
    await sleep(100);
  }
}

/** POLLERS clients polling the parent's port every POLL_MS while `during` runs; the failures. */
async function polled(during: () => Promise<void>): Promise<{ polls: number; failed: string[] }> {
  let on = true;
  let polls = 0;
  const failed: string[] = [];
  const t0 = Date.now();
  const loops = Array.from({ length: POLLERS }, async (_, i) => {
    await sleep((i * POLL_MS) / POLLERS);
    while (on) {
      const started = Date.now();
      const r = await poll('127.0.0.1', PORT);
      polls++;
      if (!r.ok) failed.push(`${((started - t0) / 1000).toFixed(2)} s: ${r.detail}`);
      await sleep(Math.max(0, POLL_MS - (Date.now() - started)));
    }
  });
  try {
    await during();
  } finally {
    on = false;
    await Promise.all(loops);
  }
  return { polls, failed };
}

const redirector = new NftRedirector();
const migrateReq = (v: 0 | 1) => writeFileSync('/proc/sys/net/ipv4/tcp_migrate_req', String(v));
const rule: Redirect = { parent: 'kube-system/kube-apiserver', port: PORT, toPort: COPY_PORT, exceptAddress: DEFAULT_EXCEPT_ADDRESS };
const trials = Number(o.trials);
const badTrials = Number(o.badTrials);
const drainMs = Number(o.drainMs);
type Way = 'shared' | 'shared-migrate' | 'redirect';
type Trial = { way: Way; event: 'retire' | 'bad-spec'; trial: number; polls: number; failedPolls: number; failures: string[] };
const results: Trial[] = [];
const record = (way: Way, event: Trial['event'], trial: number, r: { polls: number; failed: string[] }) => {
  results.push({ way, event, trial, polls: r.polls, failedPolls: r.failed.length, failures: r.failed });
  log(`${way} ${event} ${trial}: ${r.failed.length} of ${r.polls} polls failed${r.failed.length ? `: ${r.failed.slice(0, 3).join('; ')}` : ''}`);
};

/** A bad spec starting beside (or behind) the serving copy, until it exits by itself. */
const badSpecStarts = (args: string[]) => async () => {
  await sleep(1000);
  const bad = apiserver('bad', PORT, args, deadEtcd);
  await new Promise((r) => bad.once('exit', r));
  await sleep(2000);
};

try {
  // ---- shared: the copy beside the parent on its port; with the kernel's default
  // tcp_migrate_req (0: a closing listener's queued connections are reset) and with 1 ----
  for (const way of ['shared', 'shared-migrate'] as const) {
    migrateReq(way === 'shared' ? 0 : 1);
    const sharedParent = apiserver('parent', PORT, ['--permit-port-sharing']);
    await ready(DEFAULT_EXCEPT_ADDRESS, PORT);
    for (let i = 1; i <= trials; i++) {
      const copy = apiserver('copy', PORT, ['--permit-port-sharing', '--endpoint-reconciler-type=none']);
      // Both Ready: give the copy the time it needs to serve (it shares: its own readyz is not addressable).
      await sleep(6000);
      await ready('127.0.0.1', PORT);
      record(
        way,
        'retire',
        i,
        await polled(async () => {
          await sleep(1000);
          await stop(copy);
          await sleep(3000);
        }),
      );
    }
    await stop(sharedParent);
    for (let i = 1; i <= badTrials; i++) {
      const copy = apiserver('copy', PORT, ['--permit-port-sharing', '--endpoint-reconciler-type=none']);
      await ready('127.0.0.1', PORT);
      record(way, 'bad-spec', i, await polled(badSpecStarts(['--permit-port-sharing'])));
      await stop(copy);
    }
  }

  // ---- redirect: the copy on its own port, the parent alone on its port ----
  migrateReq(1);
  const parent = apiserver('parent', PORT, []);
  await ready(DEFAULT_EXCEPT_ADDRESS, PORT);
  for (let i = 1; i <= trials; i++) {
    const copy = apiserver('copy', COPY_PORT, ['--endpoint-reconciler-type=none']);
    await ready('127.0.0.1', COPY_PORT);
    await redirector.set([rule]);
    const back = await redirector.read();
    if (back.length !== 1 || back[0]!.toPort !== COPY_PORT) throw new Error(`the redirect read back is not the one set: ${JSON.stringify(back)}`);
    record(
      'redirect',
      'retire',
      i,
      await polled(async () => {
        await sleep(1000);
        await redirector.set([]);
        await sleep(drainMs);
        await stop(copy);
        await sleep(3000);
      }),
    );
  }
  await stop(parent);
  for (let i = 1; i <= badTrials; i++) {
    const copy = apiserver('copy', COPY_PORT, ['--endpoint-reconciler-type=none']);
    await ready('127.0.0.1', COPY_PORT);
    await redirector.set([rule]);
    record('redirect', 'bad-spec', i, await polled(badSpecStarts([])));
    await redirector.set([]);
    await stop(copy);
  }
} finally {
  await Promise.all([...procs].map((p) => stop(p, 'SIGKILL')));
  for (const s of held) s.destroy();
  blackHole.close();
  try {
    execFileSync(CP, ['down'], { env: cpEnv, stdio: ['ignore', 'ignore', 'inherit'] });
  } catch (e) {
    log(`control-plane down: ${(e as Error).message}`);
  }
  rmSync(dir, { recursive: true, force: true });
}

const sum = (way: Way, event: Trial['event']) => {
  const xs = results.filter((r) => r.way === way && r.event === event);
  return {
    trials: xs.length,
    withFailures: xs.filter((x) => x.failedPolls > 0).length,
    failedPolls: xs.reduce((a, x) => a + x.failedPolls, 0),
    polls: xs.reduce((a, x) => a + x.polls, 0),
  };
};
const doc = {
  pollMs: POLL_MS,
  pollers: POLLERS,
  drainMs,
  summary: {
    shared: { retire: sum('shared', 'retire'), badSpec: sum('shared', 'bad-spec') },
    sharedMigrate: { retire: sum('shared-migrate', 'retire'), badSpec: sum('shared-migrate', 'bad-spec') },
    redirect: { retire: sum('redirect', 'retire'), badSpec: sum('redirect', 'bad-spec') },
  },
  trials: results,
  commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim(),
  when: new Date().toISOString(),
};
const text = `${JSON.stringify(doc, null, 2)}\n`;
if (o.out) writeFileSync(o.out, text);
if (o.json) process.stdout.write(text);
else
  for (const [way, v] of Object.entries(doc.summary))
    for (const [ev, s] of Object.entries(v))
      console.log(`${way} ${ev}: ${s.withFailures} of ${s.trials} trials with a failed poll, ${s.failedPolls} of ${s.polls} polls failed`);
