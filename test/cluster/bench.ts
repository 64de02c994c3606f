// npm exec -- tsx test/cluster/bench.ts --add RUN.json [--add RUN.json...] [--source CMD] [--variant TEXT] [--sim FILE]
//
// Gathers `npm run e2e:cluster -- --out RUN.json` documents into bench/cluster.json: every run as
// measured (with its commit, load average, static-pod limit and resources), and per case the
// min/median/max of each figure over all rounds of all runs. A run already there (same
// measuredAt) is replaced. --sim FILE takes the simulator's lines (`CASE {simulate --json}`,
// one a line) as the simulator's side. Runs with kubelets on their own node's api-server and runs
// with kubelets on the load balancer are summed apart. Then `npx biome check --write
// bench/cluster.json` (lint wants biome's layout of the JSON).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { REPO } from '../node/env.js';
import type { CaseResult } from './cases.js';

interface Run {
  cases: CaseResult[];
  staticS: Array<number | null>;
  staticLimitS: number | null;
  resources: Record<string, number>;
  measuredAt: string;
  commit: string;
  /** Whom the kubelets asked: their own node's api-server, or the load balancer (every run before it was recorded). */
  kubeletApi?: 'local' | 'lb';
  /** The self-hosted api-servers' hand-over (every run before it was recorded: overlap). */
  handover?: 'overlap' | 'redirect';
  /** Rolling reboots of the static-pod control plane (`--static-rolling`): its load balancer's failed polls. */
  staticRolling?: Array<{ polls: number; failedPolls: number; failedPct: number; failedS: number; durationS: number }>;
  /** The bed's control-plane CPU requests: kubeadm's, or none (every run before it was recorded). Summed apart: behind the redirect they decide the power loss (docs/real-cluster.md). */
  requests?: 'kubeadm' | 'none';
  /** How rolling-reboot took each node down: orderly (SIGTERM first) or power-off (every run before it was recorded). */
  rollReboot?: 'orderly' | 'power-off';
  /** What this run tried that the shipped code does not do (`--variant`): summed apart. */
  variant?: string;
  source?: string;
  error?: string;
}

interface Bench {
  source: string;
  runs: Run[];
  summary: Record<string, unknown>;
  simulator?: Record<string, unknown>;
}

const FILE = join(REPO, 'bench', 'cluster.json');
const program = new Command('cluster-bench')
  .option('--add <file...>', 'e2e:cluster --out documents to add', [])
  .option('--source <text>', 'the command that measured the added runs')
  .option('--variant <text>', 'the added runs tried something the shipped code does not do (summed apart, under this name)')
  .option('--sim <file>', 'simulator lines: CASE {json}');
program.parse();
const o = program.opts<{ add: string[]; source?: string; variant?: string; sim?: string }>();

const round2 = (x: number) => Math.round(x * 100) / 100;
function stats(xs: Array<number | null | undefined>): { n: number; min: number; median: number; max: number; missing: number } | null {
  const v = xs.filter((x): x is number => typeof x === 'number').sort((a, b) => a - b);
  if (!v.length) return null;
  const m = Math.floor(v.length / 2);
  const median = v.length % 2 ? (v[m] as number) : ((v[m - 1] as number) + (v[m] as number)) / 2;
  return { n: v.length, min: v[0] as number, median: round2(median), max: v[v.length - 1] as number, missing: xs.length - v.length };
}

/** For each goal, how many of the rounds that judged it met it: "met of judged". */
function goalTally(rs: CaseResult[]): Record<string, string> {
  const t = new Map<string, { met: number; of: number }>();
  for (const r of rs) {
    for (const g of r.goals ?? []) {
      const x = t.get(g.goal) ?? { met: 0, of: 0 };
      t.set(g.goal, { met: x.met + (g.met ? 1 : 0), of: x.of + 1 });
    }
  }
  return Object.fromEntries([...t].map(([k, v]) => [k, `${v.met} of ${v.of}`]));
}

const old = JSON.parse(readFileSync(FILE, 'utf8')) as Partial<Bench> & { real?: Run };
const runs: Run[] = old.runs ?? (old.real ? [{ ...old.real, source: old.source }] : []);
for (const f of o.add) {
  const r = JSON.parse(readFileSync(f, 'utf8')) as Run;
  if (!Array.isArray(r.cases) || typeof r.measuredAt !== 'string') throw new Error(`${f}: not an e2e:cluster --out document (no cases or measuredAt)`);
  if (o.source) r.source = o.source;
  if (o.variant) r.variant = o.variant;
  const at = runs.findIndex((x) => x.measuredAt === r.measuredAt);
  if (at >= 0) runs[at] = r;
  else runs.push(r);
}

const summary: Record<string, unknown> = {};
const byCase = new Map<string, Array<{ r: CaseResult; run: Run }>>();
// Kubelets on the load balancer and kubelets on their own node's api-server are summed apart: after
// a power loss they start their static pods 20 s apart (docs/real-cluster.md). The redirect
// hand-over is summed apart from port sharing too, a bed whose control-plane pods request kubeadm's
// CPU apart from one whose pods are BestEffort (every run before 2026-12-07), and a run of an
// experiment (`--variant`) apart from the shipped code's, and a rolling reboot of orderly shutdowns
// apart from one of power-offs.
const summaryName = (r: CaseResult, run: Run) =>
  `${
    (run.kubeletApi ?? 'lb') === 'lb'
      ? `${r.case} (kubelets via the load balancer)`
      : (run.handover ?? 'overlap') === 'redirect'
        ? `${r.case} (handover: redirect)`
        : r.case
  }${run.requests === 'kubeadm' ? " (kubeadm's CPU requests)" : ''}${r.case === 'rolling-reboot' && run.rollReboot === 'orderly' ? ' (orderly shutdowns)' : ''}${run.variant ? ` (${run.variant})` : ''}`;
for (const run of runs)
  for (const r of run.cases) {
    const name = summaryName(r, run);
    byCase.set(name, [...(byCase.get(name) ?? []), { r, run }]);
  }
for (const [name, rs] of byCase) {
  const nodes = rs.flatMap(({ r }) => r.nodes);
  summary[name] = {
    rounds: rs.length,
    recovered: rs.filter(({ r }) => r.recovered).length,
    // Rounds measured before the goals were judged in the run have none: counted as not judged.
    goalsMet: rs.filter(({ r }) => r.goalsMet === true).length,
    goalsJudged: rs.filter(({ r }) => Array.isArray(r.goals)).length,
    goals: goalTally(rs.map(({ r }) => r)),
    commits: [...new Set(rs.map(({ run }) => run.commit))],
    lbServedAfterS: stats(rs.map(({ r }) => r.lbServedAfterS)),
    unavailableS: stats(rs.map(({ r }) => r.unavailableS)),
    lbAvailabilityPct: stats(rs.map(({ r }) => r.lbAvailabilityPct)),
    apiServedAfterS: stats(nodes.map((n) => n.apiServedAfterS)),
    parentServedAfterS: stats(nodes.map((n) => n.parentServedAfterS)),
    activations: stats(nodes.map((n) => n.activations)),
    staticLimitS: stats(rs.map(({ run }) => run.staticLimitS)),
    loadAvg1: stats(rs.map(({ r }) => r.loadAvg?.[0])),
    peakRssMiB: stats(rs.map(({ run }) => run.resources?.peakRssMiB)),
    peakCpuCores: stats(rs.map(({ run }) => run.resources?.peakCpuCores)),
  };
}

let simulator = old.simulator;
if (o.sim) {
  // The simulator's answer depends on the tree it ran on: say which (a shared tree may hold others' edits).
  const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const edited = execFileSync('git', ['status', '--porcelain', '--', 'src/sim', 'src/core'], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => l.slice(3));
  simulator = {
    seeds: '1..20',
    command: 'nice -n 10 npm run lastseen -- simulate -f test/cluster/sim/CASE.yaml --seeds 1..20 --json',
    commit: head,
    uncommittedEdits: edited,
    note: 'test/cluster/sim/*.yaml (bad-rollout.yaml since 2026-12-06; before, the named bad-rollout-three-masters-overlap); times from the fault, the focus node',
  };
  for (const line of readFileSync(o.sim, 'utf8').split('\n')) {
    const m = line.match(/^(\S+) (\{.*\})$/);
    if (m?.[1] && m[2]) simulator[m[1]] = JSON.parse(m[2]);
  }
}

const out: Bench = {
  source: 'npm run e2e:cluster -- --case CASE[:ROUNDS] --out FILE, gathered by test/cluster/bench.ts',
  runs,
  summary,
  ...(simulator ? { simulator } : {}),
};
writeFileSync(FILE, `${JSON.stringify(out, null, 2)}\n`);
for (const [name, s] of Object.entries(summary)) console.log(name, JSON.stringify(s));
