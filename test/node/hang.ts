// A hung api-server on the real node: the self-hosted api-server's main process stopped with
// SIGSTOP (it keeps its share of the port, accepts connections in the kernel and answers nothing,
// as a deadlocked process does) for `hangS`, then continued if it still exists. Measured from the
// stop with the independent /readyz poller: when clients are served again and how many polls fail
// for the rest of the hang; and from the agent's log and /proc, what covered it (the checkpoint's
// activation, the fence: the sidecar's SIGKILL of the stopped process).
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Agent } from 'node:https';
import { join } from 'node:path';
import { localBeatFile } from '../../src/core/names.js';
import { log, ReadyzPoller, sleep, type Testbed } from './testbed.js';

/** Clients count as served again by this long after the stop (the goal), and from then on for the rest of the hang. */
export const SERVED_AGAIN_GOAL_S = 30;

export interface HangResult {
  hangS: number;
  /** The stopped process (the DaemonSet pod's kube-apiserver) and its pod. */
  pid: number;
  podUid: string;
  /** Every /readyz poll answered 200 from this many seconds after the stop until the hang's end; null: a poll failed in its last second. */
  servedAgainAfterS: number | null;
  /** Polls from SERVED_AGAIN_GOAL_S after the stop to the hang's end, and how many of them failed. */
  pollsAfterGoal: number;
  failedAfterGoal: number;
  /** Seconds of failed polls during the hang, in all. */
  unavailableS: number;
  /** Stretches of failed polls during the hang ([from, to] s after the stop) and why they failed (distinct reasons). */
  dark: Array<[number, number]>;
  darkWhy: string[][];
  /** The agent's `activating checkpoint` for the api-server, s after the stop (null: none). */
  agentActivatedAfterS: number | null;
  /** The stopped process was gone (fenced: SIGKILL) this long after the stop; null: it was still there at the hang's end. */
  fencedAfterS: number | null;
  /** The DaemonSet pod's api-server serves again with its checkpoint retired, s after the stop (null: not within the limit). */
  parentServedAfterS: number | null;
  /** The agent's transitions and noted reasons for the api-server, "<s from the stop> <from>-><to> <reason>: <message>". */
  decisions: string[];
}

/** The main process of the self-hosted api-server's DaemonSet pod (not its checkpoint's), found by its pod's cgroup. */
export async function apiserverProcess(tb: Testbed): Promise<{ pid: number; podUid: string }> {
  const pods = await tb.apiPods('app.kubernetes.io/name=kube-apiserver');
  const uid = pods.length === 1 ? pods[0]?.metadata.uid : undefined;
  if (!uid) throw new Error(`expected one kube-apiserver DaemonSet pod, found ${pods.length}`);
  const found: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0')[0] !== '/usr/local/bin/kube-apiserver') continue;
      // The kubelet's cgroupfs driver names a pod's cgroup pod<uid>.
      if (readFileSync(`/proc/${d}/cgroup`, 'utf8').includes(`/pod${uid}/`)) found.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  if (found.length !== 1) throw new Error(`expected one kube-apiserver process in pod ${uid}'s cgroup, found ${found.length} (${found.join(', ')})`);
  return { pid: found[0] as number, podUid: uid };
}

const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

export async function hangOnce(tb: Testbed, opts: { hangS: number; limitS: number; settleS: number; pollAgent?: Agent | false }): Promise<HangResult> {
  const { pid, podUid } = await apiserverProcess(tb);
  const poller = new ReadyzPoller(tb, opts.pollAgent ?? false);
  await sleep(2000); // a served baseline first
  const t0 = Date.now();
  process.kill(pid, 'SIGSTOP');
  log(`kube-apiserver pid ${pid} (pod ${podUid}) stopped for ${opts.hangS}s`);
  const end = t0 + opts.hangS * 1000;
  const redirect = tb.handover === 'redirect';
  const since = (t: number) => round((t - t0) / 1000);
  let fencedAt: number | null = null;
  let parentServedAt: number | null = null;
  let continued = false;
  while (Date.now() < t0 + opts.limitS * 1000) {
    if (fencedAt === null) {
      let gone = true;
      try {
        gone = !alive(pid);
      } catch {
        gone = true;
      }
      if (gone) {
        fencedAt = Date.now();
        log(`pid ${pid} gone ${since(fencedAt)}s after the stop`);
      }
    }
    if (!continued && Date.now() >= end) {
      continued = true;
      if (fencedAt === null) {
        try {
          process.kill(pid, 'SIGCONT');
          log(`pid ${pid} continued: it was never fenced`);
        } catch {
          // gone just now
        }
      }
    }
    // The DaemonSet pod's restarted api-server serving, its checkpoint retired (polled only after a
    // fence: before it the stopped process is still the pod's, and counts as its container). Behind
    // the redirect, a process that was not fenced (its fence refused or not yet due) serves again,
    // once continued, and is handed back: that counts too.
    const handBack = redirect && fencedAt === null && continued;
    if ((fencedAt !== null || handBack) && parentServedAt === null) {
      try {
        if (!tb.checkpointActive('kube-apiserver') && (await tb.daemonPodServing('kube-apiserver', fencedAt ?? 0)) && (await tb.readyz()))
          parentServedAt = Date.now();
      } catch {
        // the api-server went away between two polls: try again
      }
    }
    if (continued && parentServedAt !== null && Date.now() - parentServedAt >= opts.settleS * 1000) break;
    if (continued && fencedAt === null && !redirect && Date.now() >= end + opts.settleS * 1000) break;
    await sleep(200);
  }
  if (!continued) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone
    }
  }
  await poller.stop();
  const during = poller.samples.filter((s) => s.t >= t0 && s.t < end);
  let unavailableMs = 0;
  const dark: Array<[number, number]> = [];
  const darkWhy: string[][] = [];
  for (let i = 0; i < during.length; i++) {
    const a = during[i];
    if (!a || a.ok) continue;
    const next = during[i + 1]?.t ?? end;
    unavailableMs += next - a.t;
    const last = dark[dark.length - 1];
    if (last && Math.abs(last[1] - since(a.t)) < 0.001) {
      last[1] = since(next);
      const why = darkWhy[darkWhy.length - 1] as string[];
      if (a.why && !why.includes(a.why)) why.push(a.why);
    } else {
      dark.push([since(a.t), since(next)]);
      darkWhy.push(a.why ? [a.why] : []);
    }
  }
  const lastFailed = [...during].reverse().find((s) => !s.ok);
  const lastOk = during[during.length - 1];
  const servedAgainAfterS = lastFailed === undefined ? 0 : lastOk && lastOk.t > lastFailed.t ? since(lastFailed.t + 100) : null;
  const afterGoal = during.filter((s) => s.t >= t0 + SERVED_AGAIN_GOAL_S * 1000);
  const records = tb.agentRecords('kube-system/kube-apiserver', t0);
  const activatedAt = records.find((e) => e.msg === 'activating checkpoint')?.time ?? null;
  return {
    hangS: opts.hangS,
    pid,
    podUid,
    servedAgainAfterS,
    pollsAfterGoal: afterGoal.length,
    failedAfterGoal: afterGoal.filter((s) => !s.ok).length,
    unavailableS: round(unavailableMs / 1000),
    dark,
    darkWhy,
    agentActivatedAfterS: activatedAt === null ? null : since(activatedAt),
    fencedAfterS: fencedAt === null ? null : since(fencedAt),
    parentServedAfterS: parentServedAt === null ? null : since(parentServedAt),
    decisions: decisionLines(records, t0),
  };
}

/** The agent's transitions and noted reasons, "<s from t0> <from>-><to> <reason>: <message>". */
function decisionLines(records: ReturnType<Testbed['agentRecords']>, t0: number): string[] {
  return records
    .filter((e) => e.msg === 'transition' || e.msg === 'reason noted')
    .map((e) => `${round((e.time - t0) / 1000)}s ${e.msg === 'transition' ? `${e.from}->${e.to}` : 'noted'} ${e.reason}: ${e.message ?? ''}`);
}

const round = (x: number) => Math.round(x * 100) / 100;

/** What a starved api-server's sidecar and the agent did while busy loops took the node's CPUs. */
export interface StarveResult {
  seconds: number;
  hogs: number;
  nice: number;
  /**
   * How the api-server was starved: busy loops in its own container cgroup (pod) or the node's
   * (node), or no loops but a CPU quota on its container cgroup (quota: `quotaPct` of one CPU).
   */
  where: 'pod' | 'node' | 'quota';
  quotaPct?: number;
  /** The api-server's process before the load. */
  pid: number;
  /** It was still there, the same process, at the end (not fenced, not restarted). */
  samePidAfter: boolean;
  /** Distinct sidecar rounds read from its local beat file during the load, and of them the unanswered and the starved ones. */
  rounds: number;
  /** Rounds whose probe failed (not Ready): unanswered ones, and ones answered too late after the TLS handshake (slow, not hung). */
  notReady: number;
  unanswered: number;
  starved: number;
  /** Unanswered rounds the sidecar did not see waiting for a CPU (these count toward a hang). */
  unansweredNotStarved: number;
  /** The agent's `activating checkpoint` and fence requests for the api-server during the load and the settle. */
  activations: number;
  fences: number;
  /** /readyz polls during the load, and how many failed. */
  polls: number;
  failedPolls: number;
  decisions: string[];
}

/**
 * Busy loops at a higher priority than the api-server (`nice`), `hogs` of them, for `seconds`: the
 * api-server has no CPU, holds its port and answers late or not at all, as on an overloaded master.
 * Nothing is stopped: a fence here would kill a healthy process. `where: 'pod'` puts the loops in
 * the api-server container's own cgroup, so they starve it and not the sidecar, the agent or this
 * measurement (on the whole node, 40 loops at nice -19 starved the poller too: it measured nothing).
 */
export async function starveOnce(
  tb: Testbed,
  opts: { seconds: number; hogs: number; nice: number; where: 'pod' | 'node' | 'quota'; quotaPct?: number; settleS: number; pollAgent?: Agent | false },
): Promise<StarveResult> {
  const { pid } = await apiserverProcess(tb);
  const poller = new ReadyzPoller(tb, opts.pollAgent ?? false);
  await sleep(2000);
  const t0 = Date.now();
  const hogs =
    opts.where === 'quota'
      ? []
      : Array.from({ length: opts.hogs }, () =>
          spawn('nice', ['-n', String(opts.nice), 'sh', '-c', 'while :; do :; done'], { stdio: 'ignore', detached: false }),
        );
  let restoreQuota: (() => void) | null = null;
  if (opts.where === 'quota') {
    // A CPU limit far below what it needs: the kernel throttles it, and throttled time is run-queue
    // time (decision 0005). Its sidecar, the agent and this measurement are not in that cgroup.
    const dir = cpuCgroupDir(pid);
    const file = join(dir, 'cpu.cfs_quota_us');
    const before = readFileSync(file, 'utf8').trim();
    const period = Number(readFileSync(join(dir, 'cpu.cfs_period_us'), 'utf8').trim());
    writeFileSync(file, String(Math.max(1000, Math.round((period * (opts.quotaPct ?? 2)) / 100))));
    restoreQuota = () => {
      try {
        writeFileSync(file, before);
      } catch (e) {
        // The container ended meanwhile (fenced, restarted): its cgroup went with it.
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      }
    };
  }
  if (opts.where === 'pod') {
    // Beware: the pod's other containers (its sidecar) share the pod's CPU share with these loops.
    const dir = cpuCgroupDir(pid);
    for (const h of hogs) writeFileSync(join(dir, 'cgroup.procs'), String(h.pid));
  }
  log(
    opts.where === 'quota'
      ? `kube-apiserver pid ${pid} held to ${opts.quotaPct ?? 2}% of a CPU for ${opts.seconds}s`
      : `${opts.hogs} busy loops at nice ${opts.nice} in the ${opts.where}'s cgroup for ${opts.seconds}s (kube-apiserver pid ${pid})`,
  );
  const file = join('/run/lastseen/heartbeats', localBeatFile('kube-system', 'kube-apiserver'));
  const seen = new Map<number, { ready: boolean; unanswered: boolean; starved: boolean }>();
  try {
    while (Date.now() < t0 + opts.seconds * 1000) {
      try {
        const b = JSON.parse(readFileSync(file, 'utf8')) as { sequence?: number; phase?: string; unanswered?: boolean; starved?: boolean };
        if (typeof b.sequence === 'number')
          seen.set(b.sequence, { ready: b.phase === 'Ready', unanswered: b.unanswered === true, starved: b.starved === true });
      } catch {
        // between two writes, or not yet
      }
      await sleep(200);
    }
  } finally {
    for (const h of hogs) h.kill('SIGKILL');
    restoreQuota?.();
  }
  const end = Date.now();
  await sleep(opts.settleS * 1000);
  await poller.stop();
  let samePidAfter = false;
  try {
    samePidAfter = alive(pid) && (await apiserverProcess(tb)).pid === pid;
  } catch {
    samePidAfter = false;
  }
  const during = poller.samples.filter((s) => s.t >= t0 && s.t < end);
  const records = tb.agentRecords('kube-system/kube-apiserver', t0);
  const rounds = [...seen.values()];
  return {
    seconds: opts.seconds,
    hogs: opts.hogs,
    nice: opts.nice,
    where: opts.where,
    ...(opts.where === 'quota' ? { quotaPct: opts.quotaPct ?? 2 } : {}),
    pid,
    samePidAfter,
    rounds: rounds.length,
    notReady: rounds.filter((r) => !r.ready).length,
    unanswered: rounds.filter((r) => r.unanswered).length,
    starved: rounds.filter((r) => r.starved).length,
    unansweredNotStarved: rounds.filter((r) => r.unanswered && !r.starved).length,
    activations: records.filter((e) => e.msg === 'activating checkpoint').length,
    fences: records.filter((e) => /fenc/i.test(e.msg) || /ParentHung|ParentFenced/.test(e.reason ?? '')).length,
    polls: during.length,
    failedPolls: during.filter((s) => !s.ok).length,
    decisions: decisionLines(records, t0),
  };
}

/**
 * The cpu cgroup folder of process `pid` (its container's, for a pod's process): cgroup v1's cpu
 * controller (this machine: `N:cpu:/…` or `N:cpu,cpuacct:/…`), or v2's one hierarchy (`0::/…`).
 */
function cpuCgroupDir(pid: number): string {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.map((l) => /^\d+:([^:]*):(.*)$/.exec(l)).find((m) => m?.[1]?.split(',').includes('cpu'));
  if (v1) return join('/sys/fs/cgroup', v1[1] === 'cpu' ? 'cpu' : (v1[1] as string), v1[2] as string);
  const v2 = lines.map((l) => /^0::(.*)$/.exec(l)).find((m) => m);
  if (v2) return join('/sys/fs/cgroup', v2[1] as string);
  throw new Error(`no cpu cgroup for pid ${pid}: ${lines.join(' | ')}`);
}
