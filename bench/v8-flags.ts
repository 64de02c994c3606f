// `npx tsx bench/v8-flags.ts [--rounds N] [--idle-ms MS] [--variants a,b]`: the bundled agent's
// RSS under Node/V8 flag variants, side by side in one run against one kube-apiserver
// (scripts/control-plane). Rounds are interleaved (every variant once per round, order rotated), one
// agent at a time, no parents, lease-only policy as in the runtime section: RSS (VmRSS) at /readyz
// 200 and after an idle spell, spawn -> /readyz, and CPU over the idle spell; and a heartbeat sidecar
// (local channel, no api-server) from the same bundle with the same flags, RSS after the idle
// spell. Variants named before* run LASTSEEN_BENCH_BEFORE_BUNDLE instead. Not part of `npm run
// bench` (it answers one question: which flags to put in the image's command).
import { execFileSync } from 'node:child_process';
import { controlPlaneUp } from './lib/cp.js';
import { createNamespace } from './lib/kube.js';
import { agentArgs, buildBundle, killAll, lastseen, removeTemps, sampleProc, setClockTicks, tempDirs, writePolicy } from './lib/procs.js';
import { fmt, progress, ratio, sleep, summarize, table } from './lib/util.js';
import { readyAgent } from './sections/footprint.js';

/** `before:` prefixed variants run LASTSEEN_BENCH_BEFORE_BUNDLE (e.g. main's bundle) instead of the one built here. */
const VARIANTS: Record<string, string[]> = {
  default: [],
  before: [],
  'before+semi1': ['--max-semi-space-size=1'],
  semi1: ['--max-semi-space-size=1'],
  semi2: ['--max-semi-space-size=2'],
  'semi1+stgc': ['--max-semi-space-size=1', '--single-threaded-gc'],
  stgc: ['--single-threaded-gc'],
  old64: ['--max-old-space-size=64'],
  'semi1+old64': ['--max-semi-space-size=1', '--max-old-space-size=64'],
  lite: ['--lite-mode'],
  jitless: ['--jitless'],
};

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : dflt;
}

async function main(): Promise<void> {
  const rounds = Number(arg('--rounds', '3'));
  const idleMs = Number(arg('--idle-ms', '20000'));
  const names = arg('--variants', 'default,semi1,semi1+stgc,stgc,old64').split(',');
  for (const n of names) if (!VARIANTS[n]) throw new Error(`unknown variant ${n} (${Object.keys(VARIANTS).join(', ')})`);
  try {
    setClockTicks(Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100);
  } catch {}
  const cp = await controlPlaneUp();
  try {
    const bundle = await buildBundle();
    const ns = await createNamespace(cp.kc(), 'v8flags');
    const before = process.env.LASTSEEN_BENCH_BEFORE_BUNDLE;
    if (names.some((n) => n.startsWith('before')) && !before) throw new Error('before* variants need LASTSEEN_BENCH_BEFORE_BUNDLE');
    const bundleOf = (n: string) => (n.startsWith('before') ? before! : bundle);
    const r = new Map(names.map((n) => [n, { start: [] as number[], ready: [] as number[], idle: [] as number[], cpu: [] as number[], hb: [] as number[] }]));
    for (let i = 0; i < rounds; i++) {
      const order = names.map((_, j) => names[(i + j) % names.length]!);
      for (const name of order) {
        const dirs = await tempDirs();
        await writePolicy(dirs.policy, '{ interval: 1s, window: 4s, startupGrace: 4s, channels: [lease] }');
        const agent = lastseen(agentArgs({ node: `v8-${name.replace(/\W/g, '')}-${i}`, namespace: ns, kubeconfig: cp.adminKubeconfig, dirs }), 'bundle', {
          node: process.execPath,
          bundle: bundleOf(name),
          flags: VARIANTS[name],
        });
        const hb = lastseen(
          [
            'heartbeat',
            '--node',
            'n',
            '--pod-name',
            'p',
            '--namespace',
            'ns',
            '--pod-uid',
            'u',
            '--parent-key',
            `k${i}`,
            '--channels',
            'local',
            '--interval',
            '1s',
            '--probe',
            'none',
            '--heartbeat-dir',
            dirs.heartbeats,
          ],
          'bundle',
          { node: process.execPath, bundle: bundleOf(name), flags: VARIANTS[name] },
        );
        try {
          const readyAt = await readyAgent(agent);
          const f = r.get(name)!;
          f.start.push(readyAt - agent.startedAt);
          const a = await sampleProc(agent.pid);
          f.ready.push(a.rssKiB / 1024);
          await sleep(idleMs);
          const b = await sampleProc(agent.pid);
          f.idle.push(b.rssKiB / 1024);
          f.cpu.push((100 * (b.cpuSeconds - a.cpuSeconds)) / ((b.t - a.t) / 1000));
          f.hb.push((await sampleProc(hb.pid)).rssKiB / 1024);
        } finally {
          await Promise.all([agent.stop('SIGTERM'), hb.stop('SIGTERM')]);
        }
      }
      progress(`round ${i + 1}/${rounds} done`);
    }
    const base = r.get(names[0]!)!;
    const med = (xs: number[]) => summarize(xs).p50;
    console.log(
      table(
        `Agent under Node/V8 flags (${process.version}, bundle, no parents, lease policy; ${rounds} interleaved rounds; medians)`,
        [
          'variant',
          'bundle',
          'flags',
          'ready ms',
          'RSS at ready MiB',
          `RSS after ${idleMs / 1000}s MiB`,
          'vs first',
          `CPU % over ${idleMs / 1000}s`,
          'heartbeat (local) RSS MiB',
        ],
        names.map((n) => {
          const f = r.get(n)!;
          return [
            n,
            n.startsWith('before') ? 'before' : 'this',
            VARIANTS[n]!.join(' ') || '(none)',
            fmt(med(f.start)),
            fmt(med(f.ready), 1),
            fmt(med(f.idle), 1),
            ratio(med(f.idle), med(base.idle)),
            fmt(med(f.cpu), 2),
            fmt(med(f.hb), 1),
          ];
        }),
        [
          `before: ${before ?? '-'}; this: ${bundle} (built now).`,
          `per-run idle RSS: ${names
            .map(
              (n) =>
                `${n} [${r
                  .get(n)!
                  .idle.map((x) => x.toFixed(1))
                  .join(', ')}]`,
            )
            .join('; ')}`,
        ],
      ),
    );
  } finally {
    killAll();
    cp.down();
    removeTemps();
  }
  process.exit(0);
}

main().catch((e) => {
  killAll();
  console.error(e);
  process.exit(1);
});
