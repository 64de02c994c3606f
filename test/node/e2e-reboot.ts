// npm run e2e:reboot -- --reboots N [--without-agent] [--json] [--case reboot|delete-pod|bad-rollout|hang|starve]
//
// On a real node (scripts/node: kubelet v1.36.3 + containerd), bootstrap a self-hosted control
// plane with lastseen installed from deploy/, then power-cycle the node N times and measure each
// recovery from the kubelet's start. --without-agent runs the same without lastseen: the baseline,
// which is expected never to come back (the background deadlock). --case delete-pod deletes the
// self-hosted api-server's pod instead (N times); --case bad-rollout rolls out an api-server spec
// that never becomes ready, measures for --limit seconds, then rolls it back and measures the
// recovery. --case hang stops the self-hosted api-server's process (SIGSTOP) for --hang seconds, N
// times in a row, and measures when clients are served again. --case starve runs --hogs busy loops
// at --nice (above the control plane) for --hang seconds, N times: the api-server starved of CPU, which
// must be neither fenced nor covered (decision 0005). --migrate-req sets the node's
// net.ipv4.tcp_migrate_req (scripts/node up; down restores it). --handover redirect runs the
// self-hosted api-server without port sharing, its checkpoint on a port of its own behind the agent's
// nftables redirect (deploy/components/parent-kube-apiserver-redirect). Needs root; see docs/real-node.md.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { loadavg } from 'node:os';
import { Command } from 'commander';
import { FENCE_REPEAT_MS } from '../../src/core/fence.js';
import { type HangResult, hangOnce, SERVED_AGAIN_GOAL_S, type StarveResult, starveOnce } from './hang.js';
import { badRolloutTo, type Disruption, deleteApiserverPod, log, type RebootResult, rebootOnce, sleep, Testbed, undoRollout } from './testbed.js';

const program = new Command('e2e:reboot')
  .option('--reboots <n>', 'power cycles in a row', '3')
  .option('--without-agent', 'the baseline: the same control plane without lastseen')
  .option('--json', 'print one JSON summary on stdout')
  .option('--off <seconds>', 'how long the node stays off', '2')
  .option('--limit <seconds>', 'how long to wait for a recovery (default 240, or 90 for the baseline)')
  .option('--settle <seconds>', 'keep measuring this long after the parent serves again', '15')
  .option('--case <name>', 'reboot, delete-pod, bad-rollout, hang or starve', 'reboot')
  .option('--hogs <n>', 'busy loops (--case starve)', '16')
  .option('--nice <n>', 'their nice value, below 0 to take the CPUs from the api-server (--case starve)', '-10')
  .option(
    '--where <pod|node|quota>',
    "the busy loops in the api-server container's cgroup, or the node's; or no loops but a CPU quota on its container (--case starve)",
    'quota',
  )
  .option('--quota <percent>', 'the quota, in percent of one CPU (--where quota)', '2')
  .option('--hang <seconds>', 'how long the api-server stays stopped (--case hang)', '120')
  .option('--migrate-req <0|1>', "the node's net.ipv4.tcp_migrate_req while it runs", '1')
  .option('--poll <mode>', 'the /readyz poller: fresh (a connection per poll, as new clients) or keepalive (one long-lived client)', 'fresh')
  .option('--out <file>', 'also write every figure, with the date and commit, to this JSON file (bench/real-node.json is what npm run bench reads)')
  .option(
    '--handover <mode>',
    "the self-hosted api-server's hand-over: overlap (port sharing) or redirect (its own port for the copy, the agent's nftables redirect)",
    'overlap',
  )
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
  hang: string;
  hogs: string;
  nice: string;
  where: string;
  quota: string;
  migrateReq: string;
  poll: string;
  handover: string;
  out?: string;
}>();
if (o.handover !== 'overlap' && o.handover !== 'redirect') {
  console.error(`--handover ${o.handover}: expected overlap or redirect`);
  process.exit(2);
}
if (!['reboot', 'delete-pod', 'bad-rollout', 'hang', 'starve'].includes(o.case)) {
  console.error(`--case ${o.case}: expected reboot, delete-pod, bad-rollout, hang or starve`);
  process.exit(2);
}
if (o.migrateReq !== '0' && o.migrateReq !== '1') {
  console.error(`--migrate-req ${o.migrateReq}: expected 0 or 1`);
  process.exit(2);
}
if (o.poll !== 'fresh' && o.poll !== 'keepalive') {
  console.error(`--poll ${o.poll}: expected fresh or keepalive`);
  process.exit(2);
}
if ((o.case === 'hang' || o.case === 'starve') && o.withoutAgent) {
  console.error(`--case ${o.case} measures lastseen: it has no --without-agent`);
  process.exit(2);
}
// scripts/node up reads it.
process.env.LASTSEEN_NODE_TCP_MIGRATE_REQ = o.migrateReq;
const pollAgent = o.poll === 'keepalive' ? new Agent({ keepAlive: true, maxSockets: 1 }) : false;

const withAgent = !o.withoutAgent;
// The commit the test bed's images are built from (at `node up`, below), not the one checked out when it ends.
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const tb = new Testbed(o.handover === 'redirect' ? 'redirect' : 'overlap');
const t0 = Date.now();
const results: RebootResult[] = [];
const hangs: HangResult[] = [];
const starves: StarveResult[] = [];
/** The load average (1, 5, 15 min) at each run's end: the machine is shared. */
const load: number[][] = [];
const loadNow = () => loadavg().map((x) => Math.round(x * 100) / 100);
let failed: Error | null = null;
/** The node's kubelet as it reports itself (the figures differ by kubelet: docs/real-node.md). */
let kubeletVersion: string | null = null;
try {
  await tb.node('down');
  await tb.node('up');
  log(`node up after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  await tb.bootstrap(withAgent);
  kubeletVersion = (await tb.kubeletVersion()) || null;
  const limitS = Number(o.limit ?? (withAgent ? 240 : 90));
  if (o.case === 'starve') {
    for (let i = 1; i <= Number(o.reboots); i++) {
      const r = await starveOnce(tb, {
        seconds: Number(o.hang),
        hogs: Number(o.hogs),
        nice: Number(o.nice),
        where: o.where === 'node' ? 'node' : o.where === 'pod' ? 'pod' : 'quota',
        quotaPct: Number(o.quota),
        settleS: Number(o.settle),
        pollAgent,
      });
      starves.push(r);
      load.push(loadNow());
      log(`starve ${i}: ${JSON.stringify(r)} load ${load[load.length - 1]?.join(' ')}`);
    }
  } else if (o.case === 'hang') {
    let lastFenceAt = 0;
    for (let i = 1; i <= Number(o.reboots); i++) {
      // The same pod is fenced at most once per FENCE_REPEAT_MS: the next hang starts after that.
      const wait = lastFenceAt + FENCE_REPEAT_MS + 5000 - Date.now();
      if (wait > 0) {
        log(`waiting ${Math.round(wait / 1000)}s: the pod was fenced less than ${FENCE_REPEAT_MS / 1000}s ago`);
        await sleep(wait);
      }
      const t = Date.now();
      const h = await hangOnce(tb, { hangS: Number(o.hang), limitS: Number(o.limit ?? Number(o.hang) + 120), settleS: Number(o.settle), pollAgent });
      if (h.fencedAfterS !== null) lastFenceAt = t + 2000 + h.fencedAfterS * 1000;
      hangs.push(h);
      load.push(loadNow());
      log(`hang ${i}: ${JSON.stringify(h)} load ${load[load.length - 1]?.join(' ')}`);
    }
  } else if (o.case === 'bad-rollout') {
    // N bad rollouts in a row, each of another spec (a verdict on one says nothing about the next),
    // each rolled back and recovered before the next.
    for (let i = 1; i <= Number(o.reboots); i++) {
      const bad = await rebootOnce(tb, { offS: 0, limitS: Number(o.limit ?? 90), settleS: 0, withAgent, disrupt: badRolloutTo(8 + i), pollAgent });
      load.push(loadNow());
      log(`bad rollout ${i}, ${o.limit ?? 90} s: ${JSON.stringify(bad)} load ${load[load.length - 1]?.join(' ')}`);
      results.push(bad);
      const undo: Disruption = async (t) => {
        const t0 = Date.now();
        await undoRollout(t);
        return t0;
      };
      const back = await rebootOnce(tb, { offS: 0, limitS, settleS: Number(o.settle), withAgent, disrupt: undo, pollAgent });
      load.push(loadNow());
      log(`rolled back ${i}: ${JSON.stringify(back)} load ${load[load.length - 1]?.join(' ')}`);
      results.push(back);
    }
  } else {
    for (let i = 1; i <= Number(o.reboots); i++) {
      const disrupt = o.case === 'delete-pod' ? deleteApiserverPod : undefined;
      const r = await rebootOnce(tb, { offS: Number(o.off), limitS, settleS: Number(o.settle), withAgent, pollAgent, ...(disrupt ? { disrupt } : {}) });
      results.push(r);
      load.push(loadNow());
      log(`${o.case} ${i}: ${JSON.stringify(r)} load ${load[load.length - 1]?.join(' ')}`);
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
    failedAfterServed: r.failedAfterServed,
    recovered: r.recovered,
    repairStallS: r.repairStallS,
  })),
  ...(o.case === 'hang'
    ? {
        hangs: hangs.map((h) => ({
          servedAgainAfterS: h.servedAgainAfterS,
          failedAfterGoal: h.failedAfterGoal,
          pollsAfterGoal: h.pollsAfterGoal,
          unavailableS: h.unavailableS,
          agentActivatedAfterS: h.agentActivatedAfterS,
          fencedAfterS: h.fencedAfterS,
          parentServedAfterS: h.parentServedAfterS,
        })),
      }
    : {}),
  ...(o.case === 'starve' ? { starves } : {}),
  baseline: !withAgent,
  migrateReq: Number(o.migrateReq),
  poll: o.poll,
  handover: o.handover,
  load,
  commit,
  kubeletVersion,
  ...(o.case === 'reboot' ? {} : { case: o.case }),
};
if (o.out) {
  writeFileSync(
    o.out,
    `${JSON.stringify(
      {
        measuredAt: new Date().toISOString(),
        commit,
        kubeletVersion,
        case: o.case,
        baseline: !withAgent,
        offS: Number(o.off),
        migrateReq: Number(o.migrateReq),
        poll: o.poll,
        handover: o.handover,
        load,
        reboots: results,
        ...(o.case === 'hang' ? { hangS: Number(o.hang), hangs } : {}),
        ...(o.case === 'starve' ? { starves } : {}),
      },
      null,
      2,
    )}\n`,
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
  if (o.case === 'hang') {
    console.log(`lastseen: ${hangs.length} hang(s) of ${o.hang} s, the api-server's process stopped (SIGSTOP)`);
    console.log(`  served again (every poll answered from then to the hang's end): ${spread(hangs.map((h) => h.servedAgainAfterS))} after the stop`);
    console.log(
      `  failed polls from ${SERVED_AGAIN_GOAL_S} s to the hang's end: ${hangs.map((h) => `${h.failedAfterGoal} of ${h.pollsAfterGoal}`).join(', ')}`,
    );
    console.log(`  fenced (the stopped process killed): ${spread(hangs.map((h) => h.fencedAfterS))} after the stop`);
    console.log(`  parent serves, checkpoint retired: ${spread(hangs.map((h) => h.parentServedAfterS))} after the stop`);
    console.log(`  load average at each end: ${load.map((l) => l.join(' ')).join('; ')}`);
  }
  if (o.case === 'starve') {
    console.log(
      `lastseen: ${starves.length} run(s) of ${o.hang} s, ${o.where === 'quota' ? `the api-server held to ${o.quota}% of a CPU` : `${o.hogs} busy loops at nice ${o.nice} in the ${o.where}'s cgroup`}`,
    );
    for (const r of starves)
      console.log(
        `  rounds ${r.rounds}: unanswered ${r.unanswered} (starved ${r.starved}, not ${r.unansweredNotStarved}); fences ${r.fences}, activations ${r.activations}; same api-server process after: ${r.samePidAfter}; failed polls ${r.failedPolls} of ${r.polls}`,
      );
    console.log(`  load average at each end: ${load.map((l) => l.join(' ')).join('; ')}`);
  }
  if (o.case !== 'hang' && o.case !== 'starve') {
    console.log(`${withAgent ? 'lastseen' : 'baseline (no agent)'}: ${results.filter((r) => r.recovered).length} of ${results.length} reboots recovered`);
    console.log(`  api-server answers: ${spread(results.map((r) => r.apiServedAfterS))}`);
    console.log(`  parent serves, checkpoint retired: ${spread(results.map((r) => r.parentServedAfterS))}`);
    console.log(`  unavailable after the kubelet started: ${spread(results.map((r) => r.unavailableS))}`);
    console.log(
      `  failed polls after the first answer: ${results.map((r) => r.failedAfterServed).join(', ')} (net.ipv4.tcp_migrate_req=${o.migrateReq}, ${o.poll} poller)`,
    );
    if (withAgent && o.case === 'reboot') console.log(`  agent decided to run the checkpoint: ${spread(results.map((r) => r.agentActivatedAfterS))}`);
  }
  console.log(`  total ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}
if (failed) process.exit(2);
