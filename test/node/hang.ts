// A hung api-server on the real node: the self-hosted api-server's main process stopped with
// SIGSTOP (it keeps its share of the port, accepts connections in the kernel and answers nothing,
// as a deadlocked process does) for `hangS`, then continued if it still exists. Measured from the
// stop with the independent /readyz poller: when clients are served again and how many polls fail
// for the rest of the hang; and from the agent's log and /proc, what covered it (the checkpoint's
// activation, the fence: the sidecar's SIGKILL of the stopped process).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Agent } from 'node:https';
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
    // fence: before it the stopped process is still the pod's, and counts as its container).
    if (fencedAt !== null && parentServedAt === null) {
      try {
        if (!tb.checkpointActive('kube-apiserver') && (await tb.daemonPodServing('kube-apiserver', fencedAt)) && (await tb.readyz()))
          parentServedAt = Date.now();
      } catch {
        // the api-server went away between two polls: try again
      }
    }
    if (continued && parentServedAt !== null && Date.now() - parentServedAt >= opts.settleS * 1000) break;
    if (continued && fencedAt === null && Date.now() >= end + opts.settleS * 1000) break;
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
    decisions: records
      .filter((e) => e.msg === 'transition' || e.msg === 'reason noted')
      .map((e) => `${since(e.time)}s ${e.msg === 'transition' ? `${e.from}->${e.to}` : 'noted'} ${e.reason}: ${e.message ?? ''}`),
  };
}

const round = (x: number) => Math.round(x * 100) / 100;
