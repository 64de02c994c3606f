// `npx tsx bench/idle-api.ts [--rounds N] [--measure-ms MS]`: the idle agent's api-server requests
// per minute (bench section 3b's measurement) with calm probing (the default) and without
// (`--api-probe-calm 0s`, the behaviour before calm probing), alternating in one run against one
// kube-apiserver, background subtracted (measured first, no lastseen process running).
import { controlPlaneUp, delta } from './lib/cp.js';
import { buildBundle, killAll, removeTemps } from './lib/procs.js';
import { fmt, progress, sleep, summarize, table } from './lib/util.js';
import { idleAgent } from './sections/apicost.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : dflt;
}

async function main(): Promise<void> {
  const rounds = Number(arg('--rounds', '2'));
  const measureMs = Number(arg('--measure-ms', '60000'));
  const cp = await controlPlaneUp();
  try {
    await buildBundle();
    const b0 = { t: performance.now(), m: await cp.requests() };
    await sleep(20_000);
    const seconds = (performance.now() - b0.t) / 1000;
    const d = delta(b0.m, await cp.requests());
    const base = { seconds, perSecond: new Map([...d].map(([k, v]) => [k, v / seconds])) };
    const sides = { 'calm (default)': [] as number[], 'no calm (--api-probe-calm 0s)': [] as number[] };
    const readyz: Record<string, number[]> = { 'calm (default)': [], 'no calm (--api-probe-calm 0s)': [] };
    const own: Record<string, number[]> = { 'calm (default)': [], 'no calm (--api-probe-calm 0s)': [] };
    const keys: Record<string, string> = {};
    for (let i = 0; i < rounds; i++) {
      const order = (i % 2 === 0 ? ['no calm (--api-probe-calm 0s)', 'calm (default)'] : ['calm (default)', 'no calm (--api-probe-calm 0s)']) as Array<
        keyof typeof sides
      >;
      for (const side of order) {
        const f = await idleAgent(cp, base, measureMs, side.startsWith('no') ? ['--api-probe-calm', '0s'] : []);
        sides[side].push(f.perMinute);
        own[side]!.push(f.ownKindsPerMinute);
        const rz = Object.entries(f.byKey)
          .filter(([k]) => k.includes('readyz'))
          .reduce((a, [, v]) => a + v, 0);
        readyz[side]!.push((rz / f.seconds) * 60);
        keys[side] = Object.entries(f.byKey)
          .sort((a, b) => b[1] - a[1])
          .map(([k, v]) => `${k}=${v}`)
          .join(' ');
        progress(`${side}: ${fmt(f.perMinute, 1)} per minute (${fmt(f.ownKindsPerMinute, 1)} of the kinds the agent makes)`);
      }
    }
    console.log(
      table(
        `Idle agent (bundle, no parents, --api-probe 5s): api-server requests per minute, ${rounds} alternating rounds of ${measureMs / 1000} s each; medians`,
        ['agent', 'rounds', 'requests/min (net)', 'of the kinds the agent makes', 'GET readyz/min', 'raw deltas of the last round (incl. background)'],
        Object.entries(sides).map(([k, v]) => [
          k,
          v.length,
          fmt(summarize(v).p50, 1),
          fmt(summarize(own[k]!).p50, 1),
          fmt(summarize(readyz[k]!).p50, 1),
          keys[k] ?? '',
        ]),
        [`background ${fmt([...base.perSecond.values()].reduce((a, b) => a + b, 0) * 60, 1)} per minute over ${fmt(seconds, 0)} s (subtracted).`],
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
