// 8. Runtime: the last landing (Node 20 + the agent bundle built at b439bbf with client-node 1.4)
// against the current code (Node 24 from node_modules/.bin + the bundle `npm run bundle` just
// made), in one run, rounds interleaved (old, new, new, old, …) so load drifts hit both alike:
// agent RSS at /readyz 200 and after an idle spell, start time (spawn -> /readyz 200), `agent
// --help` peak RSS, and activation/retire delays (lease channel) through the activation section.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from '../lib/cp.js';
import { ROOT } from '../lib/cp.js';
import { createNamespace } from '../lib/kube.js';
import { agentArgs, currentBundle, lastseen, type Pair, sampleProc, tempDirs, writePolicy } from '../lib/procs.js';
import { progress, type Summary, sleep, summarize } from '../lib/util.js';
import { type ActivationFigures, activation } from './activation.js';
import { readyAgent } from './footprint.js';

export const OLD_COMMIT = 'b439bbf';
const CACHED = join(homedir(), '.cache', 'lastseen', 'bench', `bundle-${OLD_COMMIT}.mjs`);
/** The old bundle: LASTSEEN_BENCH_OLD_BUNDLE, else the cached build. */
export function oldBundle(): string {
  return process.env.LASTSEEN_BENCH_OLD_BUNDLE || CACHED;
}
const OLD_NODE = '/usr/bin/node';
const POLICY = '{ interval: 1s, window: 4s, startupGrace: 4s, channels: [lease] }';

export interface RuntimeSide {
  name: 'old' | 'new';
  node: string;
  nodeVersion: string;
  bundle: string;
  startMs: Summary;
  rssAtReadyMiB: Summary;
  rssIdleMiB: Summary;
  /** peak RSS (VmHWM via /usr/bin/time %M) of `agent --help`; null when /usr/bin/time is missing */
  helpPeakMiB: Summary | null;
  activation?: ActivationFigures;
}

export interface RuntimeOptions {
  rounds: number;
  idleMs: number;
  helpRuns: number;
  /** activation trials per pair, 0 for none */
  activationTrials: number;
}

/** How to make the old bundle when it is not cached: the section fails with this, it never skips. */
export function howToGetOld(path: string): string {
  return [
    `runtime: the last landing's agent bundle is missing at ${path}. Build it (or point LASTSEEN_BENCH_OLD_BUNDLE at one):`,
    `  git worktree add /tmp/lastseen-${OLD_COMMIT} ${OLD_COMMIT} && cd /tmp/lastseen-${OLD_COMMIT}`,
    '  PATH=/usr/bin:$PATH npm ci && PATH=/usr/bin:$PATH node scripts/bundle.mjs   # Node 20, client-node 1.4',
    `  mkdir -p ${join(homedir(), '.cache', 'lastseen', 'bench')} && cp dist/lastseen.mjs ${CACHED}`,
    `  cd - && git worktree remove /tmp/lastseen-${OLD_COMMIT}`,
  ].join('\n');
}

function version(node: string): string {
  return execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
}

/** Both pairs; throws with the way to build the old bundle when it is missing. */
export function runtimePairs(): Array<Pair & { name: 'old' | 'new'; nodeVersion: string }> {
  const old = oldBundle();
  if (!existsSync(old)) throw new Error(howToGetOld(old));
  if (!existsSync(OLD_NODE)) throw new Error(`runtime: the last landing ran on the system Node 20 at ${OLD_NODE}, which is missing`);
  const local = join(ROOT, 'node_modules', '.bin', 'node');
  const newNode = existsSync(local) ? local : process.execPath;
  return [
    { name: 'old', node: OLD_NODE, nodeVersion: version(OLD_NODE), bundle: old },
    { name: 'new', node: newNode, nodeVersion: version(newNode), bundle: currentBundle() },
  ];
}

const hasTime = existsSync('/usr/bin/time');

/** Peak RSS in KiB of `node bundle agent --help`, from GNU time's %M (written to stderr's last line). */
function helpPeakKiB(p: Pair): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/time', ['-f', 'peak %M', p.node, p.bundle, 'agent', '--help'], { cwd: ROOT, timeout: 60_000 }, (err, _o, stderr) => {
      const m = /peak (\d+)\s*$/.exec(stderr);
      if (err || !m) reject(new Error(`agent --help on ${p.node} ${p.bundle}: ${err?.message ?? `no peak in "${stderr.slice(-300)}"`}`));
      else resolve(Number(m[1]));
    });
  });
}

export async function runtimeComparison(cp: ControlPlane, o: RuntimeOptions): Promise<RuntimeSide[]> {
  const pairs = runtimePairs();
  const kc = cp.kc();
  const ns = await createNamespace(kc, 'runtime');
  const r = pairs.map(() => ({ start: [] as number[], ready: [] as number[], idle: [] as number[], help: [] as number[] }));
  for (let i = 0; i < o.rounds; i++) {
    // old,new then new,old: neither side always goes first.
    for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) {
      const p = pairs[k]!;
      const dirs = await tempDirs();
      await writePolicy(dirs.policy, POLICY);
      const agent = lastseen(agentArgs({ node: `rt-${p.name}-${i}`, namespace: ns, kubeconfig: cp.adminKubeconfig, dirs }), 'bundle', p);
      try {
        const readyAt = await readyAgent(agent);
        r[k]!.start.push(readyAt - agent.startedAt);
        r[k]!.ready.push((await sampleProc(agent.pid)).rssKiB / 1024);
        await sleep(o.idleMs);
        r[k]!.idle.push((await sampleProc(agent.pid)).rssKiB / 1024);
      } finally {
        await agent.stop('SIGTERM');
      }
      progress(`runtime: round ${i + 1}/${o.rounds} ${p.name} (${p.nodeVersion}) done`);
    }
  }
  if (hasTime) for (let i = 0; i < o.helpRuns; i++) for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) r[k]!.help.push((await helpPeakKiB(pairs[k]!)) / 1024);
  const acts: Array<ActivationFigures | undefined> = [undefined, undefined];
  if (o.activationTrials > 0)
    for (const k of [0, 1]) {
      acts[k] = await activation(cp, 'lease', o.activationTrials, pairs[k], `-${pairs[k]!.name}`);
      progress(`runtime: activation ${pairs[k]!.name}: ${acts[k]!.trials} trials`);
    }
  return pairs.map((p, k) => ({
    name: p.name,
    node: p.node,
    nodeVersion: p.nodeVersion,
    bundle: p.bundle,
    startMs: summarize(r[k]!.start),
    rssAtReadyMiB: summarize(r[k]!.ready),
    rssIdleMiB: summarize(r[k]!.idle),
    helpPeakMiB: hasTime ? summarize(r[k]!.help) : null,
    ...(acts[k] ? { activation: acts[k] } : {}),
  }));
}
