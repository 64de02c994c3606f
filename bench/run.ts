// `npm run bench [-- --quick] [-- --only a,b]`: lastseen's benchmark against a real kube-apiserver
// (scripts/control-plane, in a fresh folder) and the simulator. Prints one table per section and
// writes the same figures to bench/results/<timestamp>.json and bench/results/latest.json.
//
// Sections: activation (1, 2), cost (3), footprint (4), scale (5), sim (6, 7), runtime (8: the
// last landing, Node 20 + the b439bbf bundle, against Node 24 + the current bundle). Every figure is
// a median/percentile over trials on a shared 2-core machine; the load average at start and end
// is recorded with them. Not part of `npm test`.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { namedScenario, runSeeds } from '../src/sim/index.js';
import { T } from '../src/sim/model.js';
import { type Baseline, type ControlPlane, controlPlaneUp, delta, ROOT } from './lib/cp.js';
import { buildBundle, killAll, removeTemps, setClockTicks } from './lib/procs.js';
import { fmt, load, progress, ratio, sleep, summarize, table } from './lib/util.js';
import { type ActivationFigures, activation, INTERVAL_MS, LOCAL_POLL_MS, WINDOW_MS } from './sections/activation.js';
import { type CostFigures, heartbeatCost, type IdleAgentFigures, idleAgent } from './sections/apicost.js';
import {
  FOOTPRINT_INTERVAL_MS,
  type FootprintChannel,
  type FootprintFigures,
  footprint,
  type SidecarFigures,
  type StartFigures,
  sidecarFootprint,
  startComparison,
} from './sections/footprint.js';
import { OLD_COMMIT, type RuntimeOptions, type RuntimeSide, runtimeComparison } from './sections/runtime.js';
import { SCALE_INTERVAL_MS, type ScaleFigures, scale } from './sections/scale.js';
import { type ScenarioRow, type SpeedFigures, simScenarios, simSpeed } from './sections/sim.js';

const SECTIONS = ['sim', 'activation', 'cost', 'footprint', 'scale', 'runtime'] as const;
type Section = (typeof SECTIONS)[number];

interface Config {
  mode: 'quick' | 'full';
  activationTrials: number;
  cost: { sizes: number[]; warmupMs: number; measureMs: number; concurrentChannels: boolean };
  idleMs: number;
  footprint: { counts: number[]; measureMs: number; concurrent: boolean; settleMs: number; channel: FootprintChannel };
  startRuns: number;
  sidecar: { runs: number; idleMs: number; settleMs: number };
  scale: { agents: number; warmupMs: number; measureMs: number };
  speed: { sizes: Array<{ nodes: number; hours: number }>; trials: number };
  baselineMs: number;
  runtime: RuntimeOptions;
}

const QUICK: Config = {
  mode: 'quick',
  activationTrials: 3,
  cost: { sizes: [1, 10, 100], warmupMs: 1000, measureMs: 3000, concurrentChannels: true },
  // quick: the idle agent's rate comes from the scale section's no-parent step (10 agents) instead.
  idleMs: 0,
  footprint: { counts: [1, 10, 50], measureMs: 20_000, concurrent: true, settleMs: 2000, channel: 'lease' },
  startRuns: 2,
  sidecar: { runs: 3, idleMs: 20_000, settleMs: 5000 },
  // 5 s: one /readyz period of every agent before calm probing; calm agents probe every
  // 30 s, so with 10 agents the idle rate over 5 s is a sample, not a rate (bench/idle-api.ts is).
  scale: { agents: 10, warmupMs: 2000, measureMs: 5000 },
  speed: {
    sizes: [
      { nodes: 3, hours: 6 },
      { nodes: 30, hours: 0.5 },
      { nodes: 300, hours: 0.2 },
    ],
    trials: 1,
  },
  baselineMs: 6_000,
  runtime: { rounds: 3, idleMs: 20_000, helpRuns: 3, activationTrials: 3 },
};

const FULL: Config = {
  mode: 'full',
  activationTrials: 30,
  cost: { sizes: [1, 10, 100], warmupMs: 3000, measureMs: 15_000, concurrentChannels: false },
  idleMs: 60_000,
  // 200: the largest parent count the README's sizing table covers (RSS over 10 minutes).
  footprint: { counts: [1, 10, 50, 200], measureMs: 120_000, concurrent: false, settleMs: 5000, channel: 'lease' },
  startRuns: 7,
  sidecar: { runs: 5, idleMs: 20_000, settleMs: 5000 },
  scale: { agents: 100, warmupMs: 6000, measureMs: 20_000 },
  speed: {
    // About 0.9, 1.2 and 1.4 million events: each size runs a few seconds.
    sizes: [
      { nodes: 3, hours: 24 },
      { nodes: 30, hours: 4 },
      { nodes: 300, hours: 0.5 },
    ],
    trials: 3,
  },
  baselineMs: 30_000,
  runtime: { rounds: 5, idleMs: 20_000, helpRuns: 5, activationTrials: 10 },
};

function parseArgs(argv: string[]): { cfg: Config; only: Set<Section> } {
  const quick = argv.includes('--quick');
  const cfg = structuredClone(quick ? QUICK : FULL);
  let only = new Set<Section>(SECTIONS);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--only') {
      const list = (argv[++i] ?? '').split(',').filter(Boolean);
      for (const s of list) if (!(SECTIONS as readonly string[]).includes(s)) throw new Error(`--only: unknown section "${s}" (${SECTIONS.join(', ')})`);
      only = new Set(list as Section[]);
    } else if (a === '--trials') cfg.activationTrials = Number(argv[++i]);
    else if (a === '--footprint') {
      // e.g. --footprint 200:600 : the footprint section for 200 parents only, measured 600 s (one agent at a time);
      // --footprint 200,50:600:local : the parents beat on the local channel (files) instead of Leases
      const [counts, seconds, channel] = (argv[++i] ?? '').split(':');
      if (channel !== undefined && channel !== 'lease' && channel !== 'local') throw new Error(`--footprint: channel "${channel}" is not lease or local`);
      if (channel) cfg.footprint.channel = channel;
      cfg.footprint.counts = (counts ?? '').split(',').map(Number);
      if (cfg.footprint.counts.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--footprint: "${counts}" is not a list of parent counts`);
      if (seconds) cfg.footprint.measureMs = Number(seconds) * 1000;
      cfg.footprint.concurrent = false;
      cfg.startRuns = 0;
      cfg.sidecar.runs = 0;
    } else if (a === '--help' || a === '-h') {
      console.log('npm run bench [-- --quick] [--only sim,activation,cost,footprint,scale,runtime] [--trials N] [--footprint COUNTS[:SECONDS[:lease|local]]]');
      process.exit(0);
    } else if (a !== '--quick') throw new Error(`unknown argument ${a}`);
  }
  return { cfg, only };
}

interface Results {
  startedAt: string;
  finishedAt?: string;
  mode: string;
  machine: { cpus: number; cpuModel: string; node: string; loadStart: number[]; loadEnd?: number[]; commit: string; dirty: boolean };
  settings: Config & { activation: { intervalMs: number; windowMs: number; localPollMs: number }; footprintIntervalMs: number; scaleIntervalMs: number };
  background?: { seconds: number; perMinute: number; byKey: Record<string, number> };
  activation?: ActivationFigures[];
  cost?: { heartbeats: CostFigures[]; idleAgent: IdleAgentFigures | null };
  footprint?: { agents: FootprintFigures[]; start: StartFigures[]; sidecar: SidecarFigures[] };
  scale?: ScaleFigures;
  sim?: { speed: SpeedFigures[]; scenarios: ScenarioRow[] };
  runtime?: RuntimeSide[];
  sectionSeconds: Record<string, number>;
  errors: string[];
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

const out: string[] = [];
function print(s: string): void {
  out.push(s);
  console.log(s);
}

async function main(): Promise<void> {
  const { cfg, only } = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  try {
    setClockTicks(Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100);
  } catch {
    // 100 on every Linux we run on
  }
  const res: Results = {
    startedAt: new Date().toISOString(),
    mode: cfg.mode,
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? '',
      node: process.version,
      loadStart: load(),
      commit: git(['rev-parse', '--short', 'HEAD']),
      dirty: git(['status', '--porcelain', '--', 'src']) !== '',
    },
    settings: {
      ...cfg,
      activation: { intervalMs: INTERVAL_MS, windowMs: WINDOW_MS, localPollMs: LOCAL_POLL_MS },
      footprintIntervalMs: FOOTPRINT_INTERVAL_MS,
      scaleIntervalMs: SCALE_INTERVAL_MS,
    },
    sectionSeconds: {},
    errors: [],
  };
  print(
    `lastseen bench (${cfg.mode}) ${res.startedAt}  commit ${res.machine.commit}${res.machine.dirty ? ' (src has uncommitted changes)' : ''}  ${res.machine.cpus} CPUs  node ${res.machine.node}  load ${res.machine.loadStart.join(' ')}`,
  );

  const needsCluster = only.has('activation') || only.has('cost') || only.has('footprint') || only.has('scale') || only.has('runtime');
  let cp: ControlPlane | null = null;
  const cleanup = () => {
    killAll();
    cp?.down();
    removeTemps();
  };
  const onSignal = (sig: string) => {
    progress(`${sig}: stopping children and the control plane`);
    cleanup();
    process.exit(130);
  };
  process.once('SIGINT', () => onSignal('SIGINT'));
  process.once('SIGTERM', () => onSignal('SIGTERM'));

  const section = async (name: string, fn: () => Promise<void>) => {
    const s = Date.now();
    progress(`${name}…`);
    try {
      await fn();
    } catch (e) {
      const msg = `${name}: ${(e as Error).stack ?? e}`;
      res.errors.push(msg);
      progress(`FAILED ${msg}`);
    }
    res.sectionSeconds[name] = (Date.now() - s) / 1000;
  };

  try {
    let baseline: Baseline = { seconds: 0, perSecond: new Map() };
    let baseStart: { t: number; m: Map<string, number> } | null = null;
    if (needsCluster) {
      await section('control plane', async () => {
        cp = await controlPlaneUp();
        await buildBundle();
        baseStart = { t: performance.now(), m: await cp.requests() };
      });
      if (!cp) throw new Error('no control plane; see errors');
    }
    // The simulator is CPU only: it runs while kube-apiserver's background traffic is measured.
    if (only.has('sim')) await section('sim', () => runSim(cfg, res));
    if (cp && baseStart) {
      const c: ControlPlane = cp;
      const b: { t: number; m: Map<string, number> } = baseStart;
      await section('background', async () => {
        const left = cfg.baselineMs - (performance.now() - b.t);
        if (left > 0) await sleep(left);
        const m = await c.requests();
        const seconds = (performance.now() - b.t) / 1000;
        const d = delta(b.m, m);
        baseline = { seconds, perSecond: new Map([...d].map(([k, v]) => [k, v / seconds])) };
        let tot = 0;
        for (const v of d.values()) tot += v;
        res.background = { seconds, perMinute: (tot / seconds) * 60, byKey: Object.fromEntries(d) };
        print(
          table(
            'kube-apiserver background (no lastseen process running; subtracted from every api figure below)',
            ['seconds', 'requests', 'per minute', 'by verb/resource'],
            [[fmt(seconds, 1), tot, fmt(res.background.perMinute, 1), topKeys(d, 6)]],
          ),
        );
      });
      if (only.has('activation')) await section('activation', async () => runActivation(c, cfg, res));
      if (only.has('cost')) await section('cost', async () => runCost(c, baseline, cfg, res));
      if (only.has('footprint')) await section('footprint', async () => runFootprint(c, cfg, res));
      if (only.has('scale')) await section('scale', async () => runScale(c, baseline, cfg, res));
      if (only.has('runtime')) await section('runtime', async () => runRuntime(c, cfg, res));
    }
  } finally {
    cleanup();
  }
  printIssue14(res);
  res.machine.loadEnd = load();
  res.finishedAt = new Date().toISOString();
  print(
    `\nload average (1/5/15 min): start ${res.machine.loadStart.join(' ')}, end ${res.machine.loadEnd.join(' ')}; took ${((Date.now() - t0) / 1000).toFixed(0)} s; sections ${Object.entries(
      res.sectionSeconds,
    )
      .map(([k, v]) => `${k} ${v.toFixed(0)}s`)
      .join(', ')}`,
  );
  if (res.errors.length) print(`ERRORS:\n${res.errors.join('\n')}`);
  const dir = join(ROOT, 'bench', 'results');
  await mkdir(dir, { recursive: true });
  const stamp = res.startedAt.replace(/[:.]/g, '-');
  const json = `${JSON.stringify({ ...res, tables: out.join('\n') }, null, 2)}\n`;
  await writeFile(join(dir, `${stamp}${cfg.mode === 'quick' ? '-quick' : ''}.json`), json);
  await writeFile(join(dir, 'latest.json'), json);
  progress(`wrote bench/results/${stamp}${cfg.mode === 'quick' ? '-quick' : ''}.json and bench/results/latest.json`);
  // Informers, sockets and timers of in-process heartbeats and agents may linger: exit explicitly.
  process.exit(res.errors.length ? 1 : 0);
}

/**
 * Issue 14's table (figures measured when it was filed, and its goals) beside this run's, for the
 * sections that ran. '-' where this run has no figure (section not run, or quick mode's idle rate).
 */
function printIssue14(res: Results): void {
  const fp = res.footprint;
  const agent = (n: number) => fp?.agents.find((a) => a.parents === n)?.rssMiB.p50;
  const sidecar = (k: SidecarFigures['process']) => fp?.sidecar.find((s) => s.process === k);
  const local = res.activation?.find((a) => a.channel === 'local');
  const rows: Array<[string, string, number | null | undefined, string, string]> = [
    ['agent RSS, 1 parent (MiB)', '93', agent(1), '<= 65', '4'],
    ['agent RSS, 50 parents (MiB)', '116', agent(50), '<= 75', '4'],
    ['spawn -> /readyz 200 (ms)', '274', fp?.start.find((s) => s.runner === 'bundle')?.readyMs.p50, '<= 150', '4b'],
    ['spawn -> /readyz 200, compile cache as the image (ms)', '-', fp?.start.find((s) => s.runner === 'cached')?.readyMs.p50, '<= 150', '4b'],
    ['retire after a Ready beat, local channel, p99 (ms)', '140', local?.retireMs.p99, '<= 20', '2'],
    ['idle agent api requests per minute', '15.7', res.cost?.idleAgent?.perMinute, '<= 4', '3b'],
    ['idle agent api requests per minute, kinds the agent makes', '-', res.cost?.idleAgent?.ownKindsPerMinute, '<= 4', '3b'],
    ['heartbeat sidecar RSS, lease channel (MiB)', 'not measured', sidecar('heartbeat lease')?.rssMiB.p50, '<= 50', '4c'],
    ['heartbeat sidecar RSS, local channel (MiB)', 'not measured', sidecar('heartbeat local')?.rssMiB.p50, '<= 50', '4c'],
    ['heartbeat sidecar CPU per beat, lease channel (ms)', 'not measured', sidecar('heartbeat lease')?.cpuMsPerBeat?.p50, 'measured', '4c'],
    ['Node.js floor, idle node -e (MiB)', '39', sidecar('node floor')?.rssMiB.p50, '-', '4c'],
  ];
  if (rows.every((r) => r[2] === undefined || r[2] === null)) return;
  print(
    table(
      'Issue 14: its figures (bundle, lease channel, when filed), this run, and the goals',
      ['figure', 'issue 14', 'this run', 'goal', 'table'],
      rows.map(([name, then, now, goal, from]) => [name, then, now === undefined || now === null ? '-' : fmt(now, 1), goal, from]),
      [
        "the sidecar runs as parent pods run it: node --max-semi-space-size=1 lastseen-heartbeat.mjs heartbeat (its own bundle, no client-node); the agent in section 4 with the image's flags, elsewhere without.",
        'quick mode measures the idle rate in the scale section instead (bench/idle-api.ts for a rate over minutes); docs/footprint.md has the notes.',
      ],
    ),
  );
}

/** A ratio, unless both are within a few ms of zero (then it says nothing). */
function tinyRatio(a: number | null | undefined, b: number | null | undefined): string {
  if (a !== null && a !== undefined && b !== null && b !== undefined && Math.max(a, b) < 5) return '~ (both < 5 ms)';
  return ratio(a, b);
}

function topKeys(m: Map<string, number> | Record<string, number>, n: number): string {
  const e = m instanceof Map ? [...m] : Object.entries(m);
  return e
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${k}=${Math.round(v)}`)
    .join(' ');
}

async function runActivation(cp: ControlPlane, cfg: Config, res: Results): Promise<void> {
  res.activation = [];
  for (const ch of ['lease', 'annotation', 'local'] as const) {
    res.activation.push(await activation(cp, ch, cfg.activationTrials));
    progress(`activation ${ch}: ${res.activation.at(-1)!.trials} trials`);
  }
  const lease = res.activation.find((a) => a.channel === 'lease');
  print(
    table(
      `1. Activation delay (ms): window expiry on the agent's clock -> checkpoint manifest in the manifest dir; interval ${INTERVAL_MS}ms, window ${WINDOW_MS}ms`,
      [
        'channel',
        'trials',
        'p50',
        'p90',
        'p99',
        'max',
        'p50 vs lease',
        'SIGKILL->manifest p50',
        'agent lag p50',
        'expiry->Silent p50',
        'Silent->activate p50',
        'activate->file p50',
      ],
      res.activation.map((a) => [
        a.channel,
        a.trials,
        fmt(a.activationMs.p50),
        fmt(a.activationMs.p90),
        fmt(a.activationMs.p99),
        fmt(a.activationMs.max),
        ratio(a.activationMs.p50, lease?.activationMs.p50),
        fmt(a.fromKillMs.p50),
        fmt(a.agentLagMs.p50),
        fmt(a.expiryToSilentMs.p50),
        fmt(a.silentToActivateMs.p50),
        fmt(a.activateToLandedMs.p50),
      ]),
      [
        "expiry = the agent's own time of the last beat change (NodeCheckpoint status lastSeen, from its monotonic lastChangeAt) + window;",
        'the heartbeat (a process) is SIGKILLed synchronously on the first beat our own watch/inotify sees after the parent is Healthy.',
        `agent lag = agent's last-beat time - our sighting of that beat (local channel: the agent watches the folder, fs.watch, with a ${LOCAL_POLL_MS}ms poll as the safety net).`,
        "breakdown from the agent's log timestamps: expiry->Silent is timer lateness, Silent->activate the live read (none for local), activate->file the atomic write + our detection (inotify, 10ms poll fallback).",
        ...res.activation.flatMap((a) => a.failures.map((f) => `${a.channel} failure: ${f}`)),
      ],
    ),
  );
  print(
    table(
      '2. Retire delay (ms): Ready beat of the restarted heartbeat seen written -> manifest gone',
      ['channel', 'trials', 'p50', 'p90', 'p99', 'max', 'p50 vs lease'],
      res.activation.map((a) => [
        a.channel,
        a.retireMs.n,
        fmt(a.retireMs.p50),
        fmt(a.retireMs.p90),
        fmt(a.retireMs.p99),
        fmt(a.retireMs.max),
        tinyRatio(a.retireMs.p50, lease?.retireMs.p50),
      ]),
      [
        'seen written = first Lease/pod watch event (ours) or inotify event on the local file after the new heartbeat process starts;',
        "the agent's own watch can see it a moment before ours, so 0-1 ms means 'as fast as we can observe'. Local includes the agent's folder poll.",
      ],
    ),
  );
}

async function runRuntime(cp: ControlPlane, cfg: Config, res: Results): Promise<void> {
  const sides = await runtimeComparison(cp, cfg.runtime);
  res.runtime = sides;
  const [o, n] = sides as [RuntimeSide, RuntimeSide];
  const row = (what: string, a: number | null | undefined, b: number | null | undefined, runs: number, digits = 1): Array<string | number> => [
    what,
    runs,
    fmt(a, digits),
    fmt(b, digits),
    ratio(b, a),
  ];
  const rows = [
    row('start: spawn -> /readyz 200 (ms)', o.startMs.p50, n.startMs.p50, o.startMs.n, 0),
    row('RSS at ready (MiB)', o.rssAtReadyMiB.p50, n.rssAtReadyMiB.p50, o.rssAtReadyMiB.n),
    row(`RSS after ${cfg.runtime.idleMs / 1000}s idle (MiB)`, o.rssIdleMiB.p50, n.rssIdleMiB.p50, o.rssIdleMiB.n),
  ];
  if (o.helpPeakMiB && n.helpPeakMiB) rows.push(row('agent --help peak RSS (MiB)', o.helpPeakMiB.p50, n.helpPeakMiB.p50, o.helpPeakMiB.n));
  if (o.activation && n.activation) {
    rows.push(
      row(
        `activation delay, lease (ms; window ${WINDOW_MS}ms)`,
        o.activation.activationMs.p50,
        n.activation.activationMs.p50,
        Math.min(o.activation.trials, n.activation.trials),
        0,
      ),
    );
    rows.push(
      row('retire delay, lease (ms)', o.activation.retireMs.p50, n.activation.retireMs.p50, Math.min(o.activation.retireMs.n, n.activation.retireMs.n), 0),
    );
  }
  print(
    table(
      `8. Runtime: last landing (old: ${o.nodeVersion} + bundle ${OLD_COMMIT}, client-node 1.4) vs current (new: ${n.nodeVersion} + this bundle); medians`,
      ['figure', 'runs each', 'old p50', 'new p50', 'new/old'],
      rows,
      [
        `old: ${o.node} ${o.bundle}; new: ${n.node} ${n.bundle}.`,
        'start/RSS rounds interleaved (old,new / new,old), one agent at a time, no parents, lease-only policy; RSS from /proc/<pid>/status VmRSS.',
        "--help peak: GNU time %M (VmHWM). Activation/retire: the activation section's lease measurement, run for old then for new (agent and heartbeat both from the pair).",
        ...[o, n].flatMap((s) => (s.activation?.failures ?? []).map((f) => `${s.name} activation failure: ${f}`)),
      ],
    ),
  );
}

async function runCost(cp: ControlPlane, base: Baseline, cfg: Config, res: Results): Promise<void> {
  const hb: CostFigures[] = [];
  for (const n of cfg.cost.sizes) {
    const intervalMs = n >= 100 ? 1000 : 250;
    const o = { intervalMs, warmupMs: cfg.cost.warmupMs, measureMs: cfg.cost.measureMs };
    if (cfg.cost.concurrentChannels)
      hb.push(...(await Promise.all((['lease', 'annotation', 'local'] as const).map((ch) => heartbeatCost(cp, base, ch, n, o)))));
    else for (const ch of ['lease', 'annotation', 'local'] as const) hb.push(await heartbeatCost(cp, base, ch, n, o));
    progress(`cost: ${n} parents measured`);
  }
  const idle: IdleAgentFigures | null = cfg.idleMs > 0 ? await idleAgent(cp, base, cfg.idleMs) : null;
  res.cost = { heartbeats: hb, idleAgent: idle };
  const leaseOf = (n: number) => hb.find((h) => h.channel === 'lease' && h.parents === n);
  print(
    table(
      '3. Api-server requests per heartbeat at steady state (apiserver_request_total deltas, background subtracted)',
      [
        'channel',
        'parents',
        'interval',
        'seconds',
        'beats stored',
        'server req/beat',
        'client req/beat',
        'vs lease',
        'server req/s',
        'failed rounds',
        'raw deltas (incl. background)',
      ],
      hb.map((h) => [
        h.channel,
        h.parents,
        `${h.intervalMs}ms`,
        fmt(h.seconds, 1),
        h.beats,
        h.serverPerBeat === null ? 'n/a' : fmt(h.serverPerBeat, 3),
        fmt(h.clientPerBeat, 3),
        ratio(h.serverPerBeat ?? h.clientPerBeat, leaseOf(h.parents)?.serverPerBeat),
        h.serverRequests === null ? '0 (no api)' : fmt(h.serverRequests / h.seconds, 1),
        h.failedRounds,
        topKeys(
          Object.fromEntries(
            Object.entries(h.byKey).filter(([k]) => (h.channel === 'lease' ? k.endsWith(' leases') : h.channel === 'annotation' ? k.endsWith(' pods') : false)),
          ),
          3,
        ),
      ]),
      [
        'req/beat is per round (stored + failed), so retries and failed rounds count against the beats that made it;',
        "server req/beat counts only the channel's resource (leases for lease, pods for annotation); local writes a file and sends nothing.",
        'client req/beat: requests the heartbeat clients sent (onRequest), the cross-check. Heartbeats run in the bench process.',
        cfg.cost.concurrentChannels
          ? 'quick mode: the three channels ran at the same time (distinct resources, so the counts stay separable).'
          : 'each channel and size measured on its own.',
      ],
    ),
  );
  if (!idle) return;
  print(
    table(
      '3b. Idle agent (bundle, default --api-probe 5s and --api-probe-calm 30s, no parents): api-server requests per minute',
      ['seconds', 'requests (net)', 'per minute', 'of the kinds the agent makes, per minute', 'background per minute', 'raw deltas (incl. background)'],
      [
        [
          fmt(idle.seconds, 1),
          fmt(idle.requests, 1),
          fmt(idle.perMinute, 1),
          fmt(idle.ownKindsPerMinute, 1),
          fmt(idle.backgroundPerMinute, 1),
          topKeys(idle.byKey, 6),
        ],
      ],
      [
        "WATCH requests are counted by kube-apiserver when they end (every 5-10 min by the agent's server-side timeout), so an open watch adds nothing here.",
        "The kinds the agent makes: its /readyz probe, reads and watches of pods, Leases, Secrets, ConfigMaps and its Node, its NodeCheckpoint, Events, token requests (the api-server's own traffic, bursty, is subtracted badly by a 20 s background).",
      ],
    ),
  );
}

async function runFootprint(cp: ControlPlane, cfg: Config, res: Results): Promise<void> {
  const agents = await footprint(cp, cfg.footprint.counts, cfg.footprint.measureMs, cfg.footprint.concurrent, cfg.footprint.settleMs, cfg.footprint.channel);
  const start = cfg.startRuns > 0 ? await startComparison(cp, cfg.startRuns) : [];
  const sidecar = cfg.sidecar.runs > 0 ? await sidecarFootprint(cp, cfg.sidecar.runs, cfg.sidecar.idleMs, cfg.sidecar.settleMs) : [];
  res.footprint = { agents, start, sidecar };
  const one = agents.find((a) => a.parents === 1);
  print(
    table(
      `4. Agent footprint (bundled agent process as the image runs it: ${Object.entries(agents[0]?.imageEnv ?? {})
        .map(([k, v]) => `${k}=${v} `)
        .join(
          '',
        )}node ${agents[0]?.nodeFlags.join(' ') ?? ''} lastseen.mjs; ${cfg.footprint.channel} channel, interval ${FOOTPRINT_INTERVAL_MS}ms; /proc sampled every 1s, /metrics every 5s)`,
      [
        'parents',
        'seconds',
        'CPU % of a core',
        'CPU vs 1 parent',
        'RSS MiB p50',
        'RSS MiB max',
        'of it file-backed p50',
        'RSS p50 last quarter',
        'RSS vs 1 parent',
        'heap used MiB p50/max',
        'heap total MiB max',
        'external MiB max',
        'states at the end',
        'stored',
        'NodeCheckpoint kB',
      ],
      agents.map((a) => [
        a.parents,
        fmt(a.seconds, 1),
        fmt(a.cpuPercent, 2),
        ratio(a.cpuPercent, one?.cpuPercent),
        fmt(a.rssMiB.p50, 1),
        fmt(a.rssMiB.max, 1),
        fmt(a.rssFileMiB.p50, 1),
        fmt(a.rssLastQuarterMiB.p50, 1),
        ratio(a.rssMiB.p50, one?.rssMiB.p50),
        `${fmt(a.heapUsedMiB.p50, 1)}/${fmt(a.heapUsedMiB.max, 1)}`,
        fmt(a.heapTotalMiB.max, 1),
        fmt(a.externalMiB.max, 1),
        Object.entries(a.states)
          .map(([state, n]) => `${state} ${n}`)
          .join(', ') || '-',
        a.captured,
        fmt(a.nodeCheckpointBytes / 1000, 1),
      ]),
      [
        cfg.footprint.concurrent
          ? 'quick mode: the three agents ran at the same time (each measured by its own pid).'
          : 'one agent at a time; heartbeats run in the bench process and are not counted.',
        "file-backed: RssFile, mostly the Node binary's own pages (clean, shared with any process running the same file); the rest of RSS is the V8 heap and malloc.",
      ],
    ),
  );
  const b = start.find((s) => s.runner === 'bundle');
  print(
    table(
      '4b. Bundle vs unbundled agent: spawn -> /readyz 200, and RSS at that moment (alternating order)',
      ['runner', 'runs', 'ready ms p50', 'ready ms max', 'vs bundle', 'RSS MiB p50', 'RSS vs bundle'],
      start.map((s) => [
        { bundle: 'node lastseen.mjs', cached: 'same, compile cache (as the image)', tsx: 'node --import tsx src/cli/main.ts' }[s.runner],
        s.runs,
        fmt(s.readyMs.p50),
        fmt(s.readyMs.max),
        ratio(s.readyMs.p50, b?.readyMs.p50),
        fmt(s.rssAtReadyMiB.p50, 1),
        ratio(s.rssAtReadyMiB.p50, b?.rssAtReadyMiB.p50),
      ]),
    ),
  );
  const floor = sidecar.find((s) => s.process === 'node floor');
  const above = (x: number | null | undefined) => (x === null || x === undefined || !floor?.rssMiB.p50 ? '-' : fmt(x - floor.rssMiB.p50, 1));
  print(
    table(
      `4c. Heartbeat sidecar (its own bundle, as parent pods run it: node --max-semi-space-size=1 lastseen-heartbeat.mjs heartbeat, one channel, interval ${FOOTPRINT_INTERVAL_MS}ms, probe none) beside the agent and the Node.js floor; medians`,
      [
        'process',
        'runs',
        `RSS MiB at ${cfg.sidecar.idleMs / 1000}s p50`,
        'RSS MiB max',
        'above floor',
        'CPU ms per beat p50',
        'CPU ms per beat max',
        'beats counted p50',
        'CPU ms per s p50',
      ],
      [
        ...sidecar.map((s) => [
          s.process,
          s.runs,
          fmt(s.rssMiB.p50, 1),
          fmt(s.rssMiB.max, 1),
          above(s.rssMiB.p50),
          fmt(s.cpuMsPerBeat?.p50, 2),
          fmt(s.cpuMsPerBeat?.max, 2),
          fmt(s.beats?.p50),
          fmt(s.cpuMsPerSecond.p50, 2),
        ]),
        [
          'agent, 1 parent (table 4)',
          1,
          fmt(one?.rssMiB.p50, 1),
          fmt(one?.rssMiB.max, 1),
          above(one?.rssMiB.p50),
          '-',
          '-',
          '-',
          fmt(one ? one.cpuPercent * 10 : null, 2),
        ],
        [
          'agent at /readyz (table 4b, bundle)',
          b?.runs ?? 0,
          fmt(b?.rssAtReadyMiB.p50, 1),
          fmt(b?.rssAtReadyMiB.max, 1),
          above(b?.rssAtReadyMiB.p50),
          '-',
          '-',
          '-',
          '-',
        ],
      ],
      [
        `each run: the lease sidecar, the local sidecar and an idle \`node -e\` (same binary, ${process.version}) spawned together; RSS = VmRSS ${cfg.sidecar.idleMs / 1000}s after spawn.`,
        `CPU per beat = utime+stime (/proc/<pid>/stat, ${'1/CLK_TCK'} resolution) from ${cfg.sidecar.settleMs / 1000}s to ${cfg.sidecar.idleMs / 1000}s after spawn / beats written in between (sequence read back from the Lease or the file).`,
        'goal (issue 14): sidecar RSS <= 50 MiB.',
      ],
    ),
  );
}

async function runScale(cp: ControlPlane, base: Baseline, cfg: Config, res: Results): Promise<void> {
  const s = await scale(cp, base, cfg.scale.agents, { warmupMs: cfg.scale.warmupMs, measureMs: cfg.scale.measureMs });
  res.scale = s;
  const idle = s.steps.find((x) => x.parents === 0);
  print(
    table(
      `5. Scale: ${s.agents} in-process agents (runAgent) against one api-server; lease channel, interval ${SCALE_INTERVAL_MS}ms, one parent per node`,
      [
        'parents',
        'seconds',
        'lease writes',
        'beats received (all agents)',
        'received / own-node writes',
        'if watches were cluster-wide',
        'excess per agent p50/max',
        'agents w/ foreign',
        'api req/s',
        'req/s per agent',
        'extra req per lease write',
      ],
      s.steps.map((x) => [
        x.parents,
        fmt(x.seconds, 1),
        x.clusterLeaseWrites,
        x.received,
        ratio(x.received, x.ownWrites, 3),
        x.clusterLeaseWrites * x.agents,
        `${fmt(x.excessPerAgent.p50)}/${fmt(x.excessPerAgent.max)}`,
        x.agentsWithForeignEvents,
        fmt(x.requestsPerSecond, 2),
        fmt(x.requestsPerSecondPerAgent, 3),
        x.parents > 0 && idle && x.leaseWritesInRequestWindow > 0
          ? fmt(((x.requestsPerSecond - idle.requestsPerSecond) * x.seconds) / x.leaseWritesInRequestWindow, 3)
          : '-',
      ]),
      [
        idle
          ? `idle agent (no parents, default --api-probe 5s, 30s while calm): ${fmt(idle.requestsPerSecondPerAgent * 60, 1)} requests per minute per agent.`
          : '',
        `agents started in ${fmt(s.startSeconds, 1)} s; bench process RSS with them ${fmt(s.benchRssMiB, 0)} MiB; ${s.warnings} agent warnings logged.`,
        "received = Agent.beat calls for lease beats; own-node writes = the heartbeats' stored rounds for that agent's node. Window edges can shift a beat either way.",
        "api req/s includes the heartbeats' Lease writes and the agents' /readyz probes (every 5 s, every 30 s while their watches are open), background subtracted; extra req per lease write = (req/s - req/s with no parents) x seconds / Lease writes in that window.",
      ],
    ),
  );
}

async function runSim(cfg: Config, res: Results): Promise<void> {
  const speed: SpeedFigures[] = await simSpeed(cfg.speed.sizes, cfg.speed.trials);
  const scenarios = await simScenarios();
  res.sim = { speed, scenarios };
  const three = speed.find((s) => s.nodes === 3);
  print(
    table(
      '6. Simulator speed as the cluster grows (3 masters with the api-server, a DaemonSet parent on every node, a fault every 20 virtual minutes from minute 5, timeline off)',
      ['nodes', 'virtual hours', 'trials', 'events/s p50', 'min', 'max', 'vs 3 nodes', 'virtual s per wall s p50', 'events', 'violations'],
      speed.map((s) => [
        s.nodes,
        s.virtualHours,
        s.trials,
        fmt(s.eventsPerWallSecond.p50),
        fmt(s.eventsPerWallSecond.min),
        fmt(s.eventsPerWallSecond.max),
        ratio(s.eventsPerWallSecond.p50, three?.eventsPerWallSecond.p50),
        fmt(s.virtualSecondsPerWallSecond.p50, 1),
        s.events,
        s.violations,
      ]),
      [
        'events/s: simulated events per wall second (the cost per event; a bigger cluster has more events per virtual second). Trials interleave the sizes; min / p50 / max over them.',
        "A fault restarts a third of a 3-node cluster's processes but one in 300's, and restarts are dear events (3 nodes run about 12% more events per CPU second without faults): a small cluster need not be the fastest per event.",
        'The invariants after each event are checked incrementally (src/sim/invariants.ts): the same checks as a walk over every node and parent, shown equal by src/sim/invariants-incremental.test.ts.',
      ],
    ),
  );
  const names = [...new Set(scenarios.map((r) => r.scenario))];
  const get = (n: string, s: string) => scenarios.find((r) => r.scenario === n && r.strategy === s);
  const v = (x: number | null | undefined) => (x === null ? 'never' : x === undefined ? '-' : String(x));
  const seeds = scenarios[0]?.seeds ?? 0;
  // One row per scenario and figure; each strategy's cell is "min / p50 / p90 / max" over the seeds.
  const cell = (r: ScenarioRow | undefined, f: keyof ScenarioRow['outcome']) =>
    r ? `${v(r.outcome[f].min)} / ${v(r.outcome[f].p50)} / ${v(r.outcome[f].p90)} / ${v(r.outcome[f].max)}` : '-';
  const rows: Array<Array<string | number>> = [];
  for (const n of names) {
    const [l, k, r] = [get(n, 'lastseen'), get(n, 'kubelet-pods'), get(n, 'runtime-poll')];
    for (const f of ['servedAt', 'parentServedAt', 'unservedSeconds'] as const) {
      rows.push([
        f === 'servedAt' ? n : '',
        f,
        cell(l, f),
        cell(k, f),
        cell(r, f),
        f === 'servedAt' ? `${l?.violations ?? '-'}/${k?.violations ?? '-'}/${r?.violations ?? '-'}` : '',
      ]);
    }
  }
  print(
    table(
      `7. Named scenarios, strategies side by side over seeds 1..${seeds} (virtual seconds after the first fault: min / p50 / p90 / max over seeds; never = not within the scenario, ranked worst)`,
      ['scenario', 'figure', 'lastseen', 'kubelet-pods', 'runtime-poll', 'seeds with violations ls/kp/rp'],
      rows,
      [
        `ls = lastseen, kp = kubelet-pods (the checkpointer of the background issue), rp = runtime-poll. ${seeds} seeds per cell; one seed replays with \`lastseen simulate NAME --seed N --strategy S\`, the whole cell with \`--seeds 1..${seeds}\`.`,
      ],
    ),
  );
  await realNodeBeside();
}

/**
 * 8. The real-node test bed's reboots (measured by `npm run e2e:reboot -- --out
 * bench/real-node.json`, which needs root and takes minutes, so it is read from that file
 * rather than run here) beside the simulator's prediction for the same reboot (`testbed-reboot`,
 * seeds 1..30, calibrated kubelet), both counted from the node's power-on.
 */
async function realNodeBeside(): Promise<void> {
  const file = join(ROOT, 'bench', 'real-node.json');
  let real: {
    measuredAt: string;
    commit: string;
    offS: number;
    reboots: Array<{ apiServedAfterS: number | null; parentServedAfterS: number | null; unavailableS: number; recovered: boolean }>;
  } | null = null;
  try {
    real = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    real = null;
  }
  const sim = await runSeeds(namedScenario('testbed-reboot')!, 1, 30, 'lastseen');
  // From the kubelet's start, as the real node counts: the scenario's `down` (3 s) plus the model's
  // boot before its kubelet starts.
  const shiftS = 3 + T.kubeletStartMs / 1000;
  const fromOn = (x: number | null) => (x === null ? null : Math.round((x - shiftS) * 10) / 10);
  const spread = (xs: Array<number | null>) => {
    if (xs.length === 0) return '-';
    if (xs.some((x) => x === null)) return `never in ${xs.filter((x) => x === null).length} of ${xs.length}`;
    const s = summarize(xs as number[]);
    return `${fmt(s.min, 1)} / ${fmt(s.p50, 1)} / ${fmt(s.max, 1)}`;
  };
  const o = sim.outcome;
  const simCell = (f: 'servedAt' | 'parentServedAt' | 'unservedSeconds', shift: boolean) => {
    const t = (x: number | null) => (shift ? fromOn(x) : x);
    return `${t(o[f].min) ?? 'never'} / ${t(o[f].p50) ?? 'never'} / ${t(o[f].max) ?? 'never'}`;
  };
  const r = real?.reboots ?? [];
  print(
    table(
      "8. A reboot on the real node beside the simulator (seconds from the kubelet's start: min / median / max)",
      ['figure', `real node (${r.length} reboots)`, `simulator (testbed-reboot, ${sim.seeds} seeds)`],
      [
        ['api-server answers', spread(r.map((x) => x.apiServedAfterS)), simCell('servedAt', true)],
        ['parent serves, checkpoint retired', spread(r.map((x) => x.parentServedAfterS)), simCell('parentServedAt', true)],
        ['unavailable after the kubelet started', spread(r.map((x) => x.unavailableS)), simCell('unservedSeconds', true)],
        ['recovered', `${r.filter((x) => x.recovered).length} of ${r.length}`, `${sim.seeds - sim.violations} of ${sim.seeds} without violations`],
      ],
      [
        real
          ? `real: ${file} (measured ${real.measuredAt} at ${real.commit}, node off ${real.offS} s plus the kill); refresh with \`sudo npm run e2e:reboot -- --reboots 10 --out bench/real-node.json\`.`
          : `real: no figures in ${file}: run \`sudo npm run e2e:reboot -- --reboots 10 --out bench/real-node.json\` (root; a real kubelet, see docs/real-node.md).`,
        `both count from the kubelet's start (the model's kubelet starts ${T.kubeletStartMs / 1000} s after its node is up); the simulator column is min / p50 / max over the seeds.`,
      ],
    ),
  );
}

main().catch((e) => {
  killAll();
  console.error(e);
  process.exit(1);
});
