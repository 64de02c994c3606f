// 4. Agent footprint: RSS and CPU of the bundled agent (`node lastseen.mjs agent …`) from
// /proc/<pid>/stat and /proc/<pid>/status with 1, 10 and 50 parents beating on its node (lease
// channel, heartbeat loops in this process, so their cost is not the agent's). And bundle versus
// tsx: start time to /readyz 200 and RSS at that moment. And the heartbeat sidecar (`node
// lastseen-heartbeat.mjs heartbeat …`, the sidecar's own bundle, lease and local channel) beside an idle `node -e` (the floor).
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { ANNOTATION_SEQUENCE, leaseName, localBeatFile } from '../../src/core/names.js';
import { startHeartbeat } from '../../src/heartbeat/heartbeat.js';
import type { Heartbeat } from '../../src/heartbeat/loop.js';
import type { ControlPlane } from '../lib/cp.js';
import { ROOT } from '../lib/cp.js';
import { createNamespace, createParentPods } from '../lib/kube.js';
import { agentArgs, currentBundle, healthPortOf, lastseen, type Proc, type Runner, sampleProc, tempDirs, warmCompileCache, writePolicy } from '../lib/procs.js';
import { progress, type Summary, sleep, summarize, waitFor } from '../lib/util.js';

export const FOOTPRINT_INTERVAL_MS = 1000;
/** The channel the parents beat on: `lease` (an api write per beat) or `local` (a file per beat, no api write). */
export type FootprintChannel = 'lease' | 'local';
/**
 * Beats every second, judged with the default window and grace (20 s, 30 s): memory and CPU follow
 * the beat rate, and on a loaded machine a 4 s window turned late beats of the bench's own heartbeat
 * loops into silences, so the agent measured an activation storm instead of its steady state.
 */
const policyFor = (channel: FootprintChannel) => `{ interval: ${FOOTPRINT_INTERVAL_MS}ms, window: 20s, startupGrace: 30s, channels: [${channel}] }`;
const POLICY = policyFor('lease');

/**
 * The Node flags of the image's entrypoint (Dockerfile `ENTRYPOINT ["/nodejs/bin/node", <flags>,
 * "/app/lastseen.mjs"]`) and the final stage's `ENV` lines, so the agent is measured as the
 * DaemonSet runs it.
 */
export async function imageAgentRuntime(): Promise<{ flags: string[]; env: Record<string, string> }> {
  const text = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
  const m = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(text);
  if (!m) throw new Error("Dockerfile: no ENTRYPOINT [...] line to take the agent's Node flags from");
  const argv = JSON.parse(m[1]!) as string[];
  const end = argv.indexOf('/app/lastseen.mjs');
  if (end < 1) throw new Error(`Dockerfile: ENTRYPOINT ${m[1]} does not run /app/lastseen.mjs`);
  const final = text.slice(text.lastIndexOf('\nFROM '));
  const env = Object.fromEntries([...final.matchAll(/^ENV (\w+)=(\S+)$/gm)].map((e) => [e[1]!, e[2]!]));
  return { flags: argv.slice(1, end), env };
}

/** The agent's heap as its /metrics tells it (prom-client's default metrics), MiB. */
export interface HeapSample {
  heapUsed: number;
  heapTotal: number;
  external: number;
}

async function heapOf(port: number): Promise<HeapSample | null> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const v = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN) / 2 ** 20;
    return { heapUsed: v('nodejs_heap_size_used_bytes'), heapTotal: v('nodejs_heap_size_total_bytes'), external: v('nodejs_external_memory_bytes') };
  } catch {
    return null;
  }
}

export interface FootprintFigures {
  parents: number;
  seconds: number;
  /** CPU time / wall time over the window, in % of one core */
  cpuPercent: number;
  rssMiB: Summary;
  /**
   * File-backed part of RSS (RssFile): mostly the Node binary's own pages, clean and shared with any
   * process running the same file; the rest (RSS minus this) is the V8 heap and malloc.
   */
  rssFileMiB: Summary;
  /** RSS over the last quarter of the window: a p50 well above the whole window's is growth, not a sawtooth. */
  rssLastQuarterMiB: Summary;
  /** From the agent's /metrics every 5 s: V8 heap used and total, and external (Buffers) memory. */
  heapUsedMiB: Summary;
  heapTotalMiB: Summary;
  externalMiB: Summary;
  channel: FootprintChannel;
  /** Node flags the agent ran with (the image's). */
  nodeFlags: string[];
  /** Environment the image adds (Dockerfile ENV), as the agent ran with it. */
  imageEnv: Record<string, string>;
  /** Parents the agent reports Healthy at the end (its NodeCheckpoint; the bench keeps only the last 5000 log lines). */
  healthy: number;
  /** Parents by state in the NodeCheckpoint at the end. */
  states: Record<string, number>;
  /** Parents with a stored checkpoint at the end (the NodeCheckpoint's checkpointStored). */
  captured: number;
  /** The agent's NodeCheckpoint as the api-server returns it, in bytes of JSON (at the end). */
  nodeCheckpointBytes: number;
  concurrent: boolean;
}

export async function readyAgent(p: Proc): Promise<number> {
  const port = await waitFor(() => healthPortOf(p), 'the agent to listen', 60_000, 10);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 'the agent to be ready', 60_000, 10);
  return Date.now();
}

async function setupFootprint(
  cp: ControlPlane,
  parents: number,
  channel: FootprintChannel,
  nodeFlags: string[],
  env: Record<string, string>,
): Promise<{ agent: Proc; hbs: Heartbeat[]; ns: string; node: string }> {
  const kc = cp.kc();
  const ns = await createNamespace(kc, `fp${parents}${channel === 'lease' ? '' : `-${channel}`}`);
  const node = `fp-node-${parents}-${channel}`;
  const dirs = await tempDirs();
  await writePolicy(dirs.policy, policyFor(channel));
  const agent = lastseen(agentArgs({ node, namespace: ns, kubeconfig: cp.adminKubeconfig, dirs }), 'bundle', {
    node: process.execPath,
    bundle: currentBundle(),
    flags: nodeFlags,
    env,
  });
  await readyAgent(agent);
  progress(`footprint: agent with ${parents} parents ready`);
  const logger = pino({ level: 'silent' });
  const hbs: Heartbeat[] = [];
  const pods = await createParentPods(kc, ns, node, parents, undefined, { ready: true });
  for (let i = 0; i < parents; i++) {
    const pod = pods[i]!;
    hbs.push(
      startHeartbeat({
        identity: { node, podName: pod.name, namespace: ns, podUid: pod.uid || randomUUID(), key: `p${i}`, role: 'parent' },
        intervalMs: FOOTPRINT_INTERVAL_MS,
        channels: [channel],
        heartbeatDir: dirs.heartbeats,
        probe: 'none',
        kubeConfig: kc,
        logger,
      }),
    );
  }
  return { agent, hbs, ns, node };
}

/** The node's NodeCheckpoint as the api-server returns it: its bytes of JSON (0: not there) and its parents by state. */
async function nodeCheckpoint(cp: ControlPlane, node: string): Promise<{ bytes: number; states: Record<string, number>; stored: number }> {
  const { CustomObjectsApi } = await import('@kubernetes/client-node');
  const o = (await cp
    .kc()
    .makeApiClient(CustomObjectsApi)
    .getClusterCustomObject({ group: 'lastseen.dev', version: 'v1alpha1', plural: 'nodecheckpoints', name: node })
    .catch(() => null)) as { status?: { parents?: Array<{ state?: string; checkpointStored?: boolean }> } } | null;
  const states: Record<string, number> = {};
  for (const p of o?.status?.parents ?? []) states[p.state ?? '?'] = (states[p.state ?? '?'] ?? 0) + 1;
  const stored = (o?.status?.parents ?? []).filter((p) => p.checkpointStored === true).length;
  return { bytes: o === null ? 0 : Buffer.byteLength(JSON.stringify(o)), states, stored };
}

/** Measures the given parent counts, one after another, or all at once (quick mode). */
export async function footprint(
  cp: ControlPlane,
  counts: number[],
  measureMs: number,
  concurrent: boolean,
  settleMs: number,
  channel: FootprintChannel = 'lease',
): Promise<FootprintFigures[]> {
  // BENCH_AGENT_FLAGS adds Node flags for a profile (e.g. --heapsnapshot-signal=SIGUSR2, --trace-gc).
  const image = await imageAgentRuntime();
  const nodeFlags = [...image.flags, ...(process.env.BENCH_AGENT_FLAGS ?? '').split(' ').filter(Boolean)];
  const run = async (setups: Array<{ agent: Proc; hbs: Heartbeat[]; parents: number; node: string }>) => {
    progress('footprint: heartbeats running; measuring');
    await sleep(settleMs); // captures, Events and status writes of the first beats settle
    const first = await Promise.all(setups.map((s) => sampleProc(s.agent.pid)));
    const rss: number[][] = setups.map(() => []);
    const rssFile: number[][] = setups.map(() => []);
    const heaps: HeapSample[][] = setups.map(() => []);
    const ports = setups.map((s) => healthPortOf(s.agent));
    const t0 = performance.now();
    let lastMinute = 0;
    while (performance.now() - t0 < measureMs) {
      await sleep(1000);
      const ss = await Promise.all(setups.map((s) => sampleProc(s.agent.pid)));
      ss.forEach((s, i) => {
        rss[i]!.push(s.rssKiB / 1024);
        rssFile[i]!.push(s.rssFileKiB / 1024);
      });
      if (rss[0]!.length % 5 === 0) {
        const hs = await Promise.all(ports.map((p) => (p === undefined ? null : heapOf(p))));
        hs.forEach((h, i) => {
          if (h) heaps[i]!.push(h);
        });
      }
      const minute = Math.floor((performance.now() - t0) / 60_000);
      if (minute > lastMinute) {
        lastMinute = minute;
        progress(
          `footprint: ${minute} min: ${setups.map((s, i) => `${s.parents} parents RSS max ${summarize(rss[i]!.slice(-60)).max?.toFixed(1)} MiB, heap used ${heaps[i]!.at(-1)?.heapUsed.toFixed(1)} MiB`).join('; ')}`,
        );
      }
    }
    const last = await Promise.all(setups.map((s) => sampleProc(s.agent.pid)));
    const ncs = await Promise.all(setups.map((s) => nodeCheckpoint(cp, s.node)));
    return setups.map(
      (s, i): FootprintFigures => ({
        parents: s.parents,
        seconds: (last[i]!.t - first[i]!.t) / 1000,
        cpuPercent: (100 * (last[i]!.cpuSeconds - first[i]!.cpuSeconds)) / ((last[i]!.t - first[i]!.t) / 1000),
        rssMiB: summarize(rss[i]!),
        rssFileMiB: summarize(rssFile[i]!),
        rssLastQuarterMiB: summarize(rss[i]!.slice(Math.floor((rss[i]!.length * 3) / 4))),
        heapUsedMiB: summarize(heaps[i]!.map((h) => h.heapUsed)),
        heapTotalMiB: summarize(heaps[i]!.map((h) => h.heapTotal)),
        externalMiB: summarize(heaps[i]!.map((h) => h.external)),
        channel,
        nodeFlags,
        imageEnv: image.env,
        healthy: ncs[i]!.states.Healthy ?? 0,
        states: ncs[i]!.states,
        captured: ncs[i]!.stored,
        nodeCheckpointBytes: ncs[i]!.bytes,
        concurrent,
      }),
    );
  };
  const stop = async (s: { agent: Proc; hbs: Heartbeat[] }) => {
    await Promise.all(s.hbs.map((h) => h.stop()));
    await s.agent.stop();
  };
  if (concurrent) {
    const setups = await Promise.all(counts.map(async (n) => ({ ...(await setupFootprint(cp, n, channel, nodeFlags, image.env)), parents: n })));
    try {
      return await run(setups);
    } finally {
      await Promise.all(setups.map(stop));
    }
  }
  const out: FootprintFigures[] = [];
  for (const n of counts) {
    const s = { ...(await setupFootprint(cp, n, channel, nodeFlags, image.env)), parents: n };
    try {
      out.push(...(await run([s])));
    } finally {
      await stop(s);
    }
  }
  return out;
}

export interface StartFigures {
  runner: Runner;
  runs: number;
  readyMs: Summary;
  rssAtReadyMiB: Summary;
}

/** Start-to-/readyz and RSS at ready, bundle and tsx alternating, `runs` of each. */
export async function startComparison(cp: ControlPlane, runs: number): Promise<StartFigures[]> {
  const kc = cp.kc();
  const ns = await createNamespace(kc, 'start');
  await warmCompileCache();
  const runners: Runner[] = ['bundle', 'cached', 'tsx'];
  const r: Record<Runner, { ready: number[]; rss: number[] }> = { bundle: { ready: [], rss: [] }, cached: { ready: [], rss: [] }, tsx: { ready: [], rss: [] } };
  for (let i = 0; i < runs; i++) {
    for (const runner of i % 2 === 0 ? runners : [...runners].reverse()) {
      const dirs = await tempDirs();
      await writePolicy(dirs.policy, POLICY);
      const agent = lastseen(agentArgs({ node: `start-${runner}-${i}`, namespace: ns, kubeconfig: cp.adminKubeconfig, dirs }), runner);
      try {
        const readyAt = await readyAgent(agent);
        const s = await sampleProc(agent.pid);
        r[runner].ready.push(readyAt - agent.startedAt);
        r[runner].rss.push(s.rssKiB / 1024);
      } finally {
        // SIGKILL: a graceful stop this soon after start waits out the agent's first-policy timer (5 s).
        await agent.stop('SIGKILL');
      }
    }
  }
  return runners.map((runner) => ({
    runner,
    runs: r[runner].ready.length,
    readyMs: summarize(r[runner].ready),
    rssAtReadyMiB: summarize(r[runner].rss),
  }));
}

export type SidecarKind = 'heartbeat lease' | 'heartbeat local' | 'node floor';

export interface SidecarFigures {
  process: SidecarKind;
  runs: number;
  /** VmRSS `idleMs` after spawn */
  rssMiB: Summary;
  /** utime+stime between two samples divided by the beats written between them (sequence read back); null for the floor */
  cpuMsPerBeat: Summary | null;
  /** beats counted per run between the two CPU samples */
  beats: Summary | null;
  /** the floor's CPU over the same window, in ms per second, for scale */
  cpuMsPerSecond: Summary;
}

/** The Node.js floor: an idle `node -e` process (same binary as the agent and the sidecar). */
function nodeFloor(): Proc {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    pid: child.pid!,
    startedAt: Date.now(),
    logs: [],
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
    onLog: () => () => {},
  };
}

/**
 * The heartbeat sidecar as a parent pod runs it (`node lastseen-heartbeat.mjs heartbeat …`, one channel per
 * process, interval FOOTPRINT_INTERVAL_MS, probe none) beside the Node.js floor, all three at once
 * in each run: RSS `idleMs` after spawn, and CPU per beat from /proc/<pid>/stat between `settleMs`
 * and `idleMs`, over the beats written in between (sequence read back from the Lease or the file).
 */
export async function sidecarFootprint(cp: ControlPlane, runs: number, idleMs: number, settleMs: number): Promise<SidecarFigures[]> {
  const kc = cp.kc();
  const leases = kc.makeApiClient(CoordinationV1Api);
  const ns = await createNamespace(kc, 'sidecar');
  const kinds: SidecarKind[] = ['heartbeat lease', 'heartbeat local', 'node floor'];
  const r = new Map(kinds.map((k) => [k, { rss: [] as number[], perBeat: [] as number[], beats: [] as number[], perSecond: [] as number[] }]));
  for (let i = 0; i < runs; i++) {
    const node = `sidecar-node-${i}`;
    const dirs = await tempDirs();
    const pods = await createParentPods(kc, ns, node, 2);
    const hbArgs = (ch: 'lease' | 'local', p: number) => [
      'heartbeat',
      ...['--node', node, '--pod-name', pods[p]!.name, '--namespace', ns, '--pod-uid', pods[p]!.uid, '--parent-key', `p${p}`],
      ...[
        '--channels',
        ch,
        '--interval',
        `${FOOTPRINT_INTERVAL_MS}ms`,
        '--probe',
        'none',
        '--heartbeat-dir',
        dirs.heartbeats,
        '--kubeconfig',
        cp.adminKubeconfig,
      ],
    ];
    const sequence: Record<SidecarKind, () => Promise<number>> = {
      'heartbeat lease': async () => {
        const l = await leases.readNamespacedLease({ namespace: ns, name: leaseName('p0', node) });
        return Number(l.metadata?.annotations?.[ANNOTATION_SEQUENCE]);
      },
      'heartbeat local': async () =>
        Number((JSON.parse(await readFile(join(dirs.heartbeats, localBeatFile(ns, 'p1')), 'utf8')) as { sequence: unknown }).sequence),
      'node floor': async () => Number.NaN,
    };
    const procs: Record<SidecarKind, Proc> = {
      'heartbeat lease': lastseen(hbArgs('lease', 0)),
      'heartbeat local': lastseen(hbArgs('local', 1)),
      'node floor': nodeFloor(),
    };
    const t0 = performance.now();
    try {
      await sleep(settleMs);
      const first = await Promise.all(kinds.map(async (k) => ({ s: await sampleProc(procs[k].pid), seq: await sequence[k]() })));
      await sleep(Math.max(0, idleMs - (performance.now() - t0)));
      const last = await Promise.all(kinds.map(async (k) => ({ s: await sampleProc(procs[k].pid), seq: await sequence[k]() })));
      kinds.forEach((k, j) => {
        const a = first[j]!;
        const b = last[j]!;
        const f = r.get(k)!;
        f.rss.push(b.s.rssKiB / 1024);
        const cpuMs = (b.s.cpuSeconds - a.s.cpuSeconds) * 1000;
        f.perSecond.push(cpuMs / ((b.s.t - a.s.t) / 1000));
        const beats = b.seq - a.seq;
        if (Number.isFinite(beats) && beats > 0) {
          f.beats.push(beats);
          f.perBeat.push(cpuMs / beats);
        }
      });
    } finally {
      await Promise.all(kinds.map((k) => procs[k].stop('SIGTERM')));
    }
    progress(`footprint: sidecar run ${i + 1}/${runs} done`);
  }
  return kinds.map((k) => {
    const f = r.get(k)!;
    const floor = k === 'node floor';
    return {
      process: k,
      runs: f.rss.length,
      rssMiB: summarize(f.rss),
      cpuMsPerBeat: floor ? null : summarize(f.perBeat),
      beats: floor ? null : summarize(f.beats),
      cpuMsPerSecond: summarize(f.perSecond),
    };
  });
}
