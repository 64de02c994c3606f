// npm run e2e:cluster -- --case CASE[:ROUNDS][,CASE...] [--rounds N] [--json] [--static-rounds N] [--static-rolling N] [--roll-reboot orderly|power-off] [--out FILE] [--handover overlap|redirect]
//
// Three real nodes (scripts/cluster: kubelets v1.36.3, containerd, haproxy in front of the three
// api-servers): a static-pod control plane first, power-cycled --static-rounds times to measure the
// limit (staticLimitS: twice the median time the load balancer needs to answer /readyz again);
// then the self-hosted control plane with lastseen, and each case --rounds times in this order:
// power-loss, hang, rolling-reboot, partition, bad-rollout, master-lost (master-lost leaves two
// nodes, so it comes last). Prints one JSON document with --json. Needs root; see docs/real-cluster.md.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { log } from '../node/testbed.js';
import {
  CASES,
  type CaseName,
  type CaseResult,
  ROLL_REBOOTS,
  type RollReboot,
  runCase,
  type StaticRoll,
  staticPowerLoss,
  staticRollingReboot,
} from './cases.js';
import { DEFAULT_HANDOVER, realCluster } from './cluster.js';
import { controlPlaneRequests } from './manifests.js';
import { ResourceSampler } from './resources.js';

const program = new Command('e2e:cluster')
  .option('--case <names>', `one or more of ${CASES.join(', ')}, comma-separated, each optionally :ROUNDS`, 'power-loss')
  .option('--rounds <n>', 'rounds of each case', '1')
  .option('--static-rounds <n>', 'power cycles of the static-pod control plane (the limit; 0: not measured)', '1')
  .option('--static-rolling <n>', "rolling reboots of the static-pod control plane, beside which rolling-reboot's failed polls are judged (0: none)", '0')
  .option(
    '--roll-reboot <how>',
    "how rolling-reboot (and --static-rolling) takes each node down: orderly (SIGTERM first, as a rolling OS update's reboot) or power-off (SIGKILL, as a power loss)",
    ROLL_REBOOTS[0],
  )
  .option('--json', 'print one JSON document on stdout')
  .option('--off <seconds>', 'how long a powered-off node stays off', '2')
  .option('--limit <seconds>', 'how long to wait for a recovery', '420')
  .option('--settle <seconds>', 'keep measuring this long after every parent serves again', '10')
  .option('--hold <seconds>', 'how long a partition, a hang or a bad rollout lasts', '120')
  .option('--out <file>', 'also write the document, with the date and commit, to this file')
  .option(
    '--handover <mode>',
    "the self-hosted api-servers' hand-over: redirect (each copy on its own port behind its node's nftables redirect) or overlap (port sharing)",
    DEFAULT_HANDOVER,
  )
  .option('--keep', 'leave the test bed up at the end')
  .option(
    '--logs <dir>',
    "copy every node's pod logs here before the bed goes down (and, in power-loss, each api-server checkpoint's and etcd member's logs to DIR/copies as the node's port first answers)",
  );
program.parse();
const o = program.opts<{
  case: string;
  rounds: string;
  staticRounds: string;
  staticRolling: string;
  rollReboot: string;
  json?: boolean;
  off: string;
  limit: string;
  settle: string;
  hold: string;
  out?: string;
  keep?: boolean;
  logs?: string;
  handover: string;
}>();
if (o.handover !== 'overlap' && o.handover !== 'redirect') {
  console.error(`--handover ${o.handover}: expected overlap or redirect`);
  process.exit(2);
}

if (!(ROLL_REBOOTS as readonly string[]).includes(o.rollReboot)) {
  console.error(`--roll-reboot ${o.rollReboot}: expected ${ROLL_REBOOTS.join(' or ')}`);
  process.exit(2);
}
const rollReboot = o.rollReboot as RollReboot;

const rounds = Number(o.rounds);
const staticRounds = Number(o.staticRounds);
const staticRolling = Number(o.staticRolling);
// --static-rounds 0 skips the limit's measurement (the cases other than power-loss do not need it).
if (!Number.isInteger(rounds) || rounds < 1 || !Number.isInteger(staticRounds) || staticRounds < 0 || !Number.isInteger(staticRolling) || staticRolling < 0) {
  console.error('--rounds must be a whole number ≥ 1, --static-rounds and --static-rolling ones ≥ 0');
  process.exit(2);
}
// Refused here, before the bed comes up, rather than when the first manifest is written.
let requests: ReturnType<typeof controlPlaneRequests>;
try {
  requests = controlPlaneRequests();
} catch (e) {
  console.error((e as Error).message);
  process.exit(2);
}
// CASE or CASE:ROUNDS (that case's own rounds).
const wanted = new Map<string, number>();
for (const w of o.case.split(',').map((s) => s.trim())) {
  const [name = '', n] = w.split(':');
  const r = n === undefined ? rounds : Number(n);
  if (!(CASES as readonly string[]).includes(name) || !Number.isInteger(r) || r < 1) {
    console.error(`--case ${w}: expected one of ${CASES.join(', ')}, optionally with :ROUNDS (a whole number ≥ 1)`);
    process.exit(2);
  }
  wanted.set(name, r);
}
const cases = CASES.filter((c) => wanted.has(c)) as CaseName[];

// lastseen is built from this commit (scripts/cluster bundles it from git, not from the shared
// working tree), so the figures belong to it; LASTSEEN_CLUSTER_COMMIT=worktree measures the tree.
const built = process.env.LASTSEEN_CLUSTER_COMMIT ?? execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
process.env.LASTSEEN_CLUSTER_COMMIT = built;
const commit = built === 'worktree' ? `${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()}-worktree` : built.slice(0, 7);
const c = realCluster(o.handover);
const sampler = new ResourceSampler(c.env.dir);
const t0 = Date.now();
const results: CaseResult[] = [];
const staticRuns: Array<{ lbServedAfterS: number | null; nodes: Record<string, number | null> }> = [];
const staticRolls: StaticRoll[] = [];
let failed: Error | null = null;
const median = (xs: number[]) => {
  const s = xs.slice().sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
try {
  await c.script('down');
  await c.script('up', '--bare');
  sampler.start();
  log(`three nodes up after ${((Date.now() - t0) / 1000).toFixed(0)}s`);
  await c.bootstrapStatic();
  for (let i = 1; i <= staticRounds; i++) {
    const r = await staticPowerLoss(c, Number(o.off));
    log(`static power loss ${i}: ${JSON.stringify(r)}`);
    staticRuns.push(r);
  }
  for (let i = 1; i <= staticRolling; i++) {
    const r = await staticRollingReboot(c, Number(o.off), Number(o.settle), rollReboot);
    log(
      `static rolling reboot ${i}: ${r.failedPolls} of ${r.polls} polls failed (${r.failedPct}%), ${r.failedS} s, in ${r.durationS} s${r.shutdowns.length ? ` (${r.shutdowns.join('; ')})` : ''}`,
    );
    staticRolls.push(r);
  }
  await c.selfHost();
  const measured = staticRuns.map((r) => r.lbServedAfterS).filter((x): x is number => x !== null);
  const staticLimitS = measured.length ? Math.round(2 * median(measured) * 100) / 100 : null;
  for (const name of cases) {
    for (let i = 1; i <= (wanted.get(name) ?? rounds) && !(name === 'master-lost' && i > 1); i++) {
      const r = await runCase(c, name, i, {
        offS: Number(o.off),
        limitS: Number(o.limit),
        settleS: Number(o.settle),
        holdS: Number(o.hold),
        staticLimitS,
        rollReboot,
        ...(o.logs ? { copyLogsTo: join(o.logs, 'copies') } : {}),
      });
      results.push(r);
      log(`${name} ${i}: ${JSON.stringify(r)}`);
      // What is measured so far, in case the run is cut short.
      if (o.out)
        writeFileSync(`${o.out}.partial`, `${JSON.stringify({ cases: results, staticS: staticRuns.map((x) => x.lbServedAfterS), commit }, null, 2)}\n`);
    }
  }
} catch (e) {
  failed = e as Error;
  log(`failed: ${failed.message}`);
} finally {
  // The pods' own logs (agents, heartbeat sidecars, api-servers) outlive the bed for whoever reads a failure.
  if (o.logs) log(`logs kept in ${o.logs}:\n${c.keepLogs(o.logs, 0)}`);
  const down = o.keep ? Promise.resolve('') : c.script('down').catch((e) => log(`down failed: ${(e as Error).message}`));
  await down;
}
const resources = sampler.stop();
const staticTimes = staticRuns.map((r) => r.lbServedAfterS).filter((x): x is number => x !== null);
const doc = {
  cases: results,
  staticS: staticRuns.map((r) => r.lbServedAfterS),
  staticNodesS: staticRuns.map((r) => r.nodes),
  ...(staticRolls.length ? { staticRolling: staticRolls } : {}),
  staticLimitS: staticTimes.length ? Math.round(2 * median(staticTimes) * 100) / 100 : null,
  resources,
  totalS: Math.round((Date.now() - t0) / 1000),
  measuredAt: new Date().toISOString(),
  commit,
  kubeletApi: c.env.kubeletApi,
  handover: c.handover,
  // The control-plane pods' CPU requests (test/cluster/manifests.ts): kubeadm's, or none (BestEffort).
  requests,
  // How rolling-reboot and the static roll took each node down.
  rollReboot,
  ...(failed ? { error: failed.message } : {}),
};
if (o.out) writeFileSync(o.out, `${JSON.stringify(doc, null, 2)}\n`);
if (o.json) process.stdout.write(`${JSON.stringify(doc)}\n`);
else {
  for (const r of results)
    console.log(
      `${r.case} ${r.round}: recovered ${r.recovered}, goals ${r.goals.map((g) => `${g.met ? 'met' : 'MISSED'}: ${g.goal} (${g.measured})`).join('; ')}; lb served ${r.lbServedAfterS ?? 'never'} s, unavailable ${r.unavailableS} s (${r.lbAvailabilityPct}% of ${r.lbPolls} polls); ${r.nodes.map((n) => `${n.node} api ${n.apiServedAfterS} parent ${n.parentServedAfterS} act ${n.activations}`).join('; ')}`,
    );
  console.log(
    `static limit ${doc.staticLimitS} s (static: ${doc.staticS.join(', ')} s); peak ${resources.peakRssMiB} MiB, ${resources.peakCpuCores} cores; total ${doc.totalS} s`,
  );
}
if (failed) process.exit(2);
