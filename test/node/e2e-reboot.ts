// npm run e2e:reboot -- --reboots N [--without-agent] [--json] [--case reboot|delete-pod|bad-rollout]
//
// On a real node (scripts/node: kubelet v1.36.3 + containerd), bootstrap a self-hosted control
// plane with lastseen installed from deploy/, then power-cycle the node N times and measure each
// recovery from the kubelet's start. --without-agent runs the same without lastseen: the baseline,
// which is expected never to come back (the background deadlock). --case delete-pod deletes the
// self-hosted api-server's pod instead (N times); --case bad-rollout rolls out an api-server spec
// that never becomes ready, measures for --limit seconds, then rolls it back and measures the
// recovery. Needs root; see docs/real-node.md.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { badRollout, type Disruption, deleteApiserverPod, log, type RebootResult, rebootOnce, Testbed, undoRollout } from './testbed.js';

const program = new Command('e2e:reboot')
  .option('--reboots <n>', 'power cycles in a row', '3')
  .option('--without-agent', 'the baseline: the same control plane without lastseen')
  .option('--json', 'print one JSON summary on stdout')
  .option('--off <seconds>', 'how long the node stays off', '2')
  .option('--limit <seconds>', 'how long to wait for a recovery (default 240, or 90 for the baseline)')
  .option('--settle <seconds>', 'keep measuring this long after the parent serves again', '15')
  .option('--case <name>', 'reboot, delete-pod or bad-rollout', 'reboot')
  .option('--out <file>', 'also write every figure, with the date and commit, to this JSON file (bench/real-node.json is what npm run bench reads)')
  .option('--keep', 'leave the node up at the end');
program.parse();
const o = program.opts<{
  reboots: string;
  withoutAgent?: boolean;
  json?: boolean;
  off: string;
  limit?: string;
  settle: string;
  keep?: boolean;
  case: string;
  out?: string;
}>();
if (!['reboot', 'delete-pod', 'bad-rollout'].includes(o.case)) {
  console.error(`--case ${o.case}: expected reboot, delete-pod or bad-rollout`);
  process.exit(2);
}

const withAgent = !o.withoutAgent;
// The commit the test bed's images are built from (at `node up`, below), not the one checked out when it ends.
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const tb = new Testbed();
const t0 = Date.now();
const results: RebootResult[] = [];
let failed: Error | null = null;
try {
  await tb.node('down');
  await tb.node('up');
  log(`node up after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  await tb.bootstrap(withAgent);
  const limitS = Number(o.limit ?? (withAgent ? 240 : 90));
  if (o.case === 'bad-rollout') {
    const bad = await rebootOnce(tb, { offS: 0, limitS: Number(o.limit ?? 90), settleS: 0, withAgent, disrupt: badRollout });
    log(`bad rollout, ${o.limit ?? 90} s: ${JSON.stringify(bad)}`);
    results.push(bad);
    const undo: Disruption = async (t) => {
      const t0 = Date.now();
      await undoRollout(t);
      return t0;
    };
    const back = await rebootOnce(tb, { offS: 0, limitS, settleS: Number(o.settle), withAgent, disrupt: undo });
    log(`rolled back: ${JSON.stringify(back)}`);
    results.push(back);
  } else {
    for (let i = 1; i <= Number(o.reboots); i++) {
      const disrupt = o.case === 'delete-pod' ? deleteApiserverPod : undefined;
      const r = await rebootOnce(tb, { offS: Number(o.off), limitS, settleS: Number(o.settle), withAgent, ...(disrupt ? { disrupt } : {}) });
      results.push(r);
      log(`${o.case} ${i}: ${JSON.stringify(r)}`);
      if (!r.recovered && withAgent) log('not recovered: the next one starts from this state');
    }
  }
} catch (e) {
  failed = e as Error;
  log(`failed: ${failed.message}`);
} finally {
  if (!o.keep) await tb.node('down').catch((e) => log(`down failed: ${(e as Error).message}`));
}

const summary = {
  reboots: results.map((r) => ({
    apiServedAfterS: r.apiServedAfterS,
    parentServedAfterS: r.parentServedAfterS,
    unavailableS: r.unavailableS,
    agentActivatedAfterS: r.agentActivatedAfterS,
    recovered: r.recovered,
  })),
  baseline: !withAgent,
  ...(o.case === 'reboot' ? {} : { case: o.case }),
};
if (o.out) {
  writeFileSync(
    o.out,
    `${JSON.stringify({ measuredAt: new Date().toISOString(), commit, case: o.case, baseline: !withAgent, offS: Number(o.off), reboots: results }, null, 2)}\n`,
  );
}
if (o.json) {
  process.stdout.write(`${JSON.stringify(summary)}\n`);
} else {
  const spread = (xs: (number | null)[]) => {
    if (xs.some((x) => x === null)) return `never in ${xs.filter((x) => x === null).length} of ${xs.length}`;
    const s = (xs as number[]).slice().sort((a, b) => a - b);
    const mid = s.length / 2;
    const median = s.length % 2 ? s[Math.floor(mid)] : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
    return `min ${s[0]} / median ${Math.round((median as number) * 100) / 100} / max ${s[s.length - 1]} s`;
  };
  console.log(`${withAgent ? 'lastseen' : 'baseline (no agent)'}: ${results.filter((r) => r.recovered).length} of ${results.length} reboots recovered`);
  console.log(`  api-server answers: ${spread(results.map((r) => r.apiServedAfterS))}`);
  console.log(`  parent serves, checkpoint retired: ${spread(results.map((r) => r.parentServedAfterS))}`);
  console.log(`  unavailable after the kubelet started: ${spread(results.map((r) => r.unavailableS))}`);
  if (withAgent && o.case === 'reboot') console.log(`  agent decided to run the checkpoint: ${spread(results.map((r) => r.agentActivatedAfterS))}`);
  console.log(`  total ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}
if (failed) process.exit(2);
