// What the three-master cases do to the test bed and what they measure (docs/real-cluster.md).
// Every time is in seconds from the case's moment zero: the kubelets' start after a power cycle
// (the earliest of the nodes started together), else the moment the disruption was made.
import { existsSync } from 'node:fs';
import { cp, readdir } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { CONTROL_PLANE, log, sleep } from '../node/testbed.js';
import type { Cluster } from './cluster.js';
import { NODES } from './manifests.js';

export const CASES = ['power-loss', 'hang', 'rolling-reboot', 'partition', 'bad-rollout', 'master-lost'] as const;
export type CaseName = (typeof CASES)[number];
const APISERVER = 'kube-system/kube-apiserver';
const round2 = (x: number) => Math.round(x * 100) / 100;

/** /readyz polled at a fixed pace, every answer kept (time, ok, why it failed). */
export class Poller {
  readonly samples: Array<{ t: number; ok: boolean; why?: string }> = [];
  private on = true;
  private readonly done: Promise<void>;
  constructor(check: () => Promise<boolean | { ok: boolean; why: string }>, everyMs: number) {
    this.done = (async () => {
      while (this.on) {
        const t = Date.now();
        const a = await check();
        this.samples.push(typeof a === 'boolean' ? { t, ok: a } : a.ok ? { t, ok: true } : { t, ok: false, why: a.why });
        const rest = everyMs - (Date.now() - t);
        if (rest > 0) await sleep(rest);
      }
    })();
  }
  async stop(): Promise<void> {
    this.on = false;
    await this.done;
  }
  firstOk(from: number): number | null {
    return this.samples.find((s) => s.t >= from && s.ok)?.t ?? null;
  }
  /**
   * The runs of failed polls from `from` on: when each began and ended (s after `from`), how many
   * polls, and why they failed (count per reason).
   */
  darkStretches(from: number): DarkStretch[] {
    const out: DarkStretch[] = [];
    let cur: DarkStretch | null = null;
    for (let i = 0; i < this.samples.length; i++) {
      const s = this.samples[i]!;
      if (s.t < from) continue;
      if (s.ok) {
        cur = null;
        continue;
      }
      if (cur === null) {
        cur = { fromS: round2((s.t - from) / 1000), toS: 0, polls: 0, why: {} };
        out.push(cur);
      }
      cur.polls++;
      cur.toS = round2(((this.samples[i + 1]?.t ?? Date.now()) - from) / 1000);
      const w = s.why ?? 'failed';
      cur.why[w] = (cur.why[w] ?? 0) + 1;
    }
    return out;
  }

  /** Polls in [from, to): how many, how many failed, and the failed time (each failed poll until the next one). */
  between(from: number, to = Number.POSITIVE_INFINITY): { polls: number; failed: number; failedS: number } {
    let polls = 0;
    let failed = 0;
    let failedMs = 0;
    for (let i = 0; i < this.samples.length; i++) {
      const s = this.samples[i];
      if (!s || s.t < from || s.t >= to) continue;
      polls++;
      if (!s.ok) {
        failed++;
        failedMs += (this.samples[i + 1]?.t ?? Date.now()) - s.t;
      }
    }
    return { polls, failed, failedS: round2(failedMs / 1000) };
  }
}

/** A run of failed load-balancer polls (see Poller.darkStretches). */
export interface DarkStretch {
  fromS: number;
  toS: number;
  polls: number;
  why: Record<string, number>;
}

export interface NodeResult {
  node: string;
  /** The node's own api-server port answers /readyz (whoever serves it: the checkpoint, first). */
  apiServedAfterS: number | null;
  /** power-loss: the node's own port's failed polls (every 500 ms) until it first answered, and why. */
  ownDark?: DarkStretch[];
  /** The node's api-server DaemonSet pod serves (new containers, Ready, /readyz) with its checkpoint retired. */
  parentServedAfterS: number | null;
  /** The agent's `activating checkpoint` records for the api-server on this node. */
  activations: number;
  /** The agent's records about fencing a hung parent (any record whose message names fencing). */
  fenced: number;
  /** The agent's records of redirecting the node's api-server port to the checkpoint's copy (`handover: redirect`). */
  redirected: number;
  partitioned: boolean;
  schedulerBack: boolean;
  controllerManagerBack: boolean;
  agentBack: boolean;
  /** The agent's transitions for the api-server on this node, "<s> <from>-><to> <reason>". */
  decisions: string[];
}

export interface CaseResult {
  case: CaseName;
  round: number;
  recovered: boolean;
  /** The load balancer answers /readyz (the first poll that succeeded from moment zero on). */
  lbServedAfterS: number | null;
  /** The time the load balancer's /readyz polls (every 100 ms, 1 s timeout) failed, from moment zero to the end. */
  unavailableS: number;
  lbPolls: number;
  lbFailedPolls: number;
  /** Successful polls / all polls, in percent, over the case's window. */
  lbAvailabilityPct: number;
  /** The load balancer's failed polls as stretches, seconds from moment zero, with why they failed. */
  lbDark: DarkStretch[];
  durationS: number;
  /** Moment zero as a wall-clock time, to line the case up with the nodes' logs. */
  startedAt: string;
  /** The machine's load average (1, 5, 15 min) at the case's end: the bed shares two cores with everyone's work. */
  loadAvg: [number, number, number];
  nodes: NodeResult[];
  notes: string[];
  /** The issue's goals for this case, each as measured (a run recovers and still misses one: both are said). */
  goals: Goal[];
  goalsMet: boolean;
}

/** One of the case's goals: what it asks, whether this round met it, and the figure it was judged on. */
export interface Goal {
  goal: string;
  met: boolean;
  measured: string;
}

const goal = (text: string, met: boolean, measured: string): Goal => ({ goal: text, met, measured });
const pct = (b: { polls: number; failed: number }) => (b.polls ? round2((100 * (b.polls - b.failed)) / b.polls) : 0);

interface WatchOpts {
  /** Nodes whose recovery is awaited. */
  nodes: readonly string[];
  t0: number;
  limitS: number;
  settleS: number;
  /** The scheduler, controller-manager and agent pods must have started after this moment (0: running is enough). */
  othersSince: number;
  /** The api-server pod must have started after this moment (0: running is enough). */
  parentSince: number;
  /** Copy each node's api-server checkpoint's and etcd member's pod logs here when its port first answers (the kubelet removes a copy's at the retire). */
  copyLogsTo?: string;
}

interface Watched {
  apiServedAt: Map<string, number>;
  parentServedAt: Map<string, number>;
  schedulerBack: Set<string>;
  controllerManagerBack: Set<string>;
  agentBack: Set<string>;
}

/** Watch the nodes until each one's parent serves and the rest of its control plane runs (then `settleS` more), or the limit. */
async function watchRecovery(c: Cluster, direct: Map<string, Poller>, o: WatchOpts): Promise<Watched> {
  const w: Watched = { apiServedAt: new Map(), parentServedAt: new Map(), schedulerBack: new Set(), controllerManagerBack: new Set(), agentBack: new Set() };
  const deadline = o.t0 + o.limitS * 1000;
  let allAt: number | null = null;
  while (Date.now() < deadline) {
    for (const n of o.nodes) {
      const first = direct.get(n)?.firstOk(o.t0);
      if (first && !w.apiServedAt.has(n)) {
        w.apiServedAt.set(n, first);
        // Not awaited: the copy must not hold up the watch or the pollers it measures with.
        if (o.copyLogsTo) void keepCopyLogs(c, n, join(o.copyLogsTo, n));
      }
    }
    try {
      const s = await c.snapshot();
      const serving = s.serving('kube-apiserver', o.parentSince);
      for (const n of o.nodes) {
        if (w.parentServedAt.has(n) || !w.apiServedAt.has(n)) continue;
        if (!c.checkpointActive(n, 'kube-apiserver') && serving.has(n) && (await c.readyz(n))) w.parentServedAt.set(n, Date.now());
      }
      for (const n of s.serving('kube-scheduler', o.othersSince)) w.schedulerBack.add(n);
      for (const n of s.serving('kube-controller-manager', o.othersSince)) w.controllerManagerBack.add(n);
      for (const n of s.agents(o.othersSince)) w.agentBack.add(n);
    } catch {
      // no api-server answered this time
    }
    const all = o.nodes.every((n) => w.parentServedAt.has(n) && w.schedulerBack.has(n) && w.controllerManagerBack.has(n) && w.agentBack.has(n));
    if (all && allAt === null) allAt = Date.now();
    if (allAt !== null && Date.now() - allAt >= o.settleS * 1000) break;
    await sleep(1000);
  }
  return w;
}

/**
 * The node's api-server checkpoint's pod-log folders (static pod `kube-apiserver-<suffix>-<node>`)
 * and its etcd member's, copied to `dest` (the bed's `--logs` keeps only the last two runs of each
 * container, and nothing of a retired copy).
 */
async function keepCopyLogs(c: Cluster, n: string, dest: string): Promise<void> {
  const root = join(c.nodeDir(n), 'pod-logs');
  try {
    for (const d of await readdir(root))
      if ((d.startsWith('kube-system_kube-apiserver-') && d.includes(`-${n}_`)) || d.startsWith(`kube-system_etcd-${n}_`))
        await cp(join(root, d), join(dest, d), { recursive: true });
  } catch (e) {
    log(`${n}: the checkpoint's logs were not kept: ${(e as Error).message}`);
  }
}

function nodeResult(c: Cluster, n: string, t0: number, w: Watched | null, partitioned = false): NodeResult {
  const since = (t: number | undefined) => (t === undefined ? null : round2((t - t0) / 1000));
  const records = c.agentRecords(n, t0);
  const mine = records.filter((r) => r.parent === APISERVER);
  return {
    node: n,
    apiServedAfterS: since(w?.apiServedAt.get(n)),
    parentServedAfterS: since(w?.parentServedAt.get(n)),
    activations: mine.filter((r) => r.msg === 'activating checkpoint').length,
    fenced: records.filter((r) => /fenc/i.test(r.msg)).length,
    redirected: mine.filter((r) => r.msg === 'redirecting the node to the copy').length,
    partitioned,
    schedulerBack: w?.schedulerBack.has(n) ?? false,
    controllerManagerBack: w?.controllerManagerBack.has(n) ?? false,
    agentBack: w?.agentBack.has(n) ?? false,
    decisions: mine
      .filter((r) => r.msg === 'transition' || r.msg === 'reason noted' || r.msg === 'activating checkpoint')
      .map((r) => `${round2((r.time - t0) / 1000)}s ${r.msg === 'transition' ? `${r.from}->${r.to}` : r.msg} ${r.reason ?? ''}`.trim()),
  };
}

function pollers(c: Cluster): { lb: Poller; direct: Map<string, Poller> } {
  return { lb: new Poller(() => c.readyzAnswer(), 100), direct: new Map(NODES.map((n) => [n, new Poller(() => c.readyzAnswer(n), 500)])) };
}

/** A poller's failed polls from `t0` until its first answer, as dark stretches (all of them when it never answered). */
function untilFirstAnswer(poller: Poller, t0: number): DarkStretch[] {
  const first = poller.firstOk(t0);
  const stretches = poller.darkStretches(t0);
  return first === null ? stretches : stretches.filter((d) => d.fromS <= (first - t0) / 1000);
}

async function stopAll(p: { lb: Poller; direct: Map<string, Poller> }): Promise<void> {
  await Promise.all([p.lb.stop(), ...[...p.direct.values()].map((d) => d.stop())]);
}

function lbFigures(
  lb: Poller,
  t0: number,
  from = t0,
): Pick<CaseResult, 'lbServedAfterS' | 'unavailableS' | 'lbPolls' | 'lbFailedPolls' | 'lbAvailabilityPct' | 'lbDark'> {
  const first = lb.firstOk(t0);
  const b = lb.between(from);
  return {
    lbServedAfterS: first === null ? null : round2((first - t0) / 1000),
    unavailableS: b.failedS,
    lbPolls: b.polls,
    lbFailedPolls: b.failed,
    lbAvailabilityPct: b.polls ? round2((100 * (b.polls - b.failed)) / b.polls) : 0,
    lbDark: lb.darkStretches(t0),
  };
}

/**
 * How a rolled node goes down: `power-off` (SIGKILL of everything, as a power loss) or `orderly`
 * (`scripts/cluster shutdown`: SIGTERM first, as systemd's shutdown at a `reboot`, so etcd hands its
 * leadership on and kube-apiserver starts its graceful termination; what a rolling OS update does).
 * The first is the default.
 */
export const ROLL_REBOOTS = ['orderly', 'power-off'] as const;
export type RollReboot = (typeof ROLL_REBOOTS)[number];

/**
 * Power off the given nodes at once (after an orderly shutdown if asked; `said` gets what each
 * shutdown took and what it had to kill), `offS` later power them on at once; moment zero is the
 * earliest kubelet start.
 */
async function powerCycle(c: Cluster, nodes: readonly string[], offS: number, how: RollReboot = 'power-off', said?: string[]): Promise<number> {
  const out = await c.script(how === 'orderly' ? 'shutdown' : 'kill', ...nodes);
  said?.push(...out.split('\n').filter((l) => l.trim()));
  await sleep(offS * 1000);
  await c.script('start', ...nodes);
  return Math.min(...nodes.map((n) => c.kubeletStartedAt(n)));
}

/** What the load balancer's polls saw over a static-pod control plane's rolling reboot. */
export interface StaticRoll {
  polls: number;
  failedPolls: number;
  failedPct: number;
  failedS: number;
  durationS: number;
  lbDark: DarkStretch[];
  /** Orderly shutdowns: what each node's took, and what was still running at the grace's end. */
  shutdowns: string[];
}

/**
 * The static-pod control plane rolled as `rolling-reboot` rolls lastseen's: each node rebooted
 * (`how`) in turn, the next once its own api-server answers again, then `settleS` more. What its load
 * balancer's polls lose is what the bed's reboots cost any control plane (a dead or terminating
 * backend until haproxy's checks take it out, an etcd member lost, a leader elected again), beside
 * which lastseen's roll is judged.
 */
export async function staticRollingReboot(c: Cluster, offS: number, settleS: number, how: RollReboot): Promise<StaticRoll> {
  const p = pollers(c);
  const t0 = Date.now();
  const shutdowns: string[] = [];
  for (const n of NODES) {
    await powerCycle(c, [n], offS, how, shutdowns);
    await c.waitFor(`${n}'s static api-server after its power cycle`, 600, () => c.readyz(n));
  }
  await sleep(settleS * 1000);
  await stopAll(p);
  const roll = p.lb.between(t0);
  return {
    polls: roll.polls,
    failedPolls: roll.failed,
    failedPct: round2(100 - pct(roll)),
    failedS: roll.failedS,
    durationS: round2((Date.now() - t0) / 1000),
    lbDark: p.lb.darkStretches(t0),
    shutdowns,
  };
}

/** The static-pod control plane power-cycled: when the load balancer and each node's api-server answer again. */
export async function staticPowerLoss(c: Cluster, offS = 2): Promise<{ lbServedAfterS: number | null; nodes: Record<string, number | null> }> {
  const p = pollers(c);
  const t0 = await powerCycle(c, NODES, offS);
  await c.waitFor('the static api-servers after the power cycle', 600, async () => {
    for (const n of NODES) if (!(await c.readyz(n))) return false;
    return true;
  });
  // haproxy takes a backend in after two passed checks a second apart (`inter 1s rise 2`): up to
  // about 2 s after the first node answers, which all three may have done within a second (found
  // in CI, where the load balancer's first answer came after the polling had stopped).
  await c.waitFor('the load balancer after the power cycle', 60, () => p.lb.firstOk(t0) !== null);
  await stopAll(p);
  const nodes: Record<string, number | null> = {};
  for (const n of NODES) {
    const f = p.direct.get(n)?.firstOk(t0) ?? null;
    nodes[n] = f === null ? null : round2((f - t0) / 1000);
  }
  return { lbServedAfterS: lbFigures(p.lb, t0).lbServedAfterS, nodes };
}

function finish(name: CaseName, round: number, t0: number, lb: Poller, nodes: NodeResult[], recovered: boolean, notes: string[], goals: Goal[]): CaseResult {
  const loadAvg = loadavg().map(round2) as [number, number, number];
  const all = [goal('recovered', recovered, String(recovered)), ...goals];
  return {
    case: name,
    round,
    recovered,
    ...lbFigures(lb, t0),
    durationS: round2((Date.now() - t0) / 1000),
    startedAt: new Date(t0).toISOString(),
    loadAvg,
    nodes,
    notes,
    goals: all,
    goalsMet: all.every((g) => g.met),
  };
}

const recoveredAll = (nodes: NodeResult[]) => nodes.every((n) => n.parentServedAfterS !== null && n.schedulerBack && n.controllerManagerBack && n.agentBack);

/** Nothing of lastseen's left running on any node (no checkpoint manifest in a kubelet's folder). */
function activeCheckpoints(c: Cluster): string[] {
  return NODES.flatMap((n) => CONTROL_PLANE.filter((k) => c.checkpointActive(n, k)).map((k) => `${n}/${k}`));
}

export interface CaseOpts {
  offS: number;
  limitS: number;
  settleS: number;
  /** How long a partition, a hang or a bad rollout lasts. */
  holdS: number;
  /** Twice the static-pod control plane's time to answer after a power loss (power-loss's goal; null: not measured). */
  staticLimitS?: number | null;
  /** rolling-reboot: how each node goes down (default the first of ROLL_REBOOTS). */
  rollReboot?: RollReboot;
  /** power-loss: keep each node's api-server checkpoint's and etcd member's logs under this folder (`<dir>/power-loss-<round>/<node>/`), as its port first answers. */
  copyLogsTo?: string;
}

export async function runCase(c: Cluster, name: CaseName, round: number, o: CaseOpts): Promise<CaseResult> {
  const p = pollers(c);
  try {
    switch (name) {
      case 'power-loss': {
        const t0 = await powerCycle(c, NODES, o.offS);
        const copyLogsTo = o.copyLogsTo ? join(o.copyLogsTo, `power-loss-${round}`) : undefined;
        const w = await watchRecovery(c, p.direct, { nodes: NODES, t0, limitS: o.limitS, settleS: o.settleS, othersSince: t0, parentSince: t0, copyLogsTo });
        await stopAll(p);
        // Why each node's own port failed until it first answered: what its copy waited on.
        const nodes = NODES.map((n) => ({ ...nodeResult(c, n, t0, w), ownDark: untilFirstAnswer(p.direct.get(n)!, t0) }));
        const lbAt = lbFigures(p.lb, t0).lbServedAfterS;
        const limit = o.staticLimitS ?? null;
        return finish(
          name,
          round,
          t0,
          p.lb,
          nodes,
          recoveredAll(nodes),
          [],
          [
            goal(
              'the load balancer answers within the static-pod limit',
              lbAt !== null && limit !== null && lbAt <= limit,
              `${lbAt ?? 'never'} s, limit ${limit ?? 'not measured'} s`,
            ),
            goal(
              "every node's own api-server pod serves, its copy retired, within 60 s",
              nodes.every((n) => n.parentServedAfterS !== null && n.parentServedAfterS <= 60),
              nodes.map((n) => `${n.node} ${n.parentServedAfterS ?? 'never'} s`).join(', '),
            ),
          ],
        );
      }
      case 'rolling-reboot': {
        const t0 = Date.now();
        const nodes: NodeResult[] = [];
        const notes: string[] = [];
        for (const n of NODES) {
          const tn = await powerCycle(c, [n], o.offS, o.rollReboot ?? ROLL_REBOOTS[0], notes);
          const w = await watchRecovery(c, p.direct, { nodes: [n], t0: tn, limitS: o.limitS, settleS: 0, othersSince: tn, parentSince: tn });
          const r = nodeResult(c, n, tn, w);
          nodes.push(r);
          notes.push(`${n} rebooted at ${round2((tn - t0) / 1000)}s; its parent served ${r.parentServedAfterS ?? 'never'} s after its kubelet started`);
          if (r.parentServedAfterS === null) break;
        }
        await sleep(o.settleS * 1000);
        await stopAll(p);
        const roll = p.lb.between(t0);
        return finish(name, round, t0, p.lb, nodes, nodes.length === NODES.length && recoveredAll(nodes), notes, [
          goal(
            "at most 1% of the load balancer's 100 ms polls fail over the whole roll",
            roll.polls > 0 && roll.failed <= roll.polls / 100,
            `${roll.failed} of ${roll.polls} failed (${round2(100 - pct(roll))}%), ${roll.failedS} s`,
          ),
        ]);
      }
      case 'partition': {
        const victim = 'm2';
        // The parent's process: the api-server processes running before the cut (the copy is not among them).
        const parentPids = (await c.script('apiserver-pids', victim)).split(/\s+/).filter(Boolean);
        const t0 = Date.now();
        await c.script('partition', victim);
        await sleep(o.holdS * 1000);
        const during = NODES.map((n) => nodeResult(c, n, t0, null, n === victim));
        const parentAlive = parentPids.length > 0 && parentPids.every((pid) => existsSync(`/proc/${pid}`));
        const tHeal = Date.now();
        await c.script('heal', victim);
        const w = await watchRecovery(c, p.direct, { nodes: NODES, t0: tHeal, limitS: o.limitS, settleS: o.settleS, othersSince: 0, parentSince: 0 });
        await c.waitFor('no checkpoint active after the heal', o.limitS, () => activeCheckpoints(c).length === 0).catch(() => 0);
        await stopAll(p);
        const left = activeCheckpoints(c);
        const nodes = NODES.map((n) => ({ ...nodeResult(c, n, t0, w, n === victim), parentServedAfterS: nodeResult(c, n, tHeal, w).parentServedAfterS }));
        const cut = p.lb.between(t0, tHeal);
        const victimDuring = during.find((d) => d.node === victim);
        return finish(
          name,
          round,
          t0,
          p.lb,
          nodes,
          recoveredAll(nodes) && left.length === 0,
          [
            `${victim} cut off for ${o.holdS}s; load balancer during the cut: ${cut.polls - cut.failed}/${cut.polls} polls served (${pct(cut)}%)`,
            `activations during the cut: ${during.map((d) => `${d.node} ${d.activations}`).join(', ')}`,
            `${victim}'s api-server processes before the cut (${parentPids.join(' ') || 'none found'}) ${parentAlive ? 'all still alive' : 'not all alive'} at the heal`,
            `apiServedAfterS from the cut to the first answer after the heal; parentServedAfterS counted from the heal; checkpoints still active at the end: ${left.join(', ') || 'none'}`,
          ],
          [
            goal(
              "no checkpoint activated on the partitioned node while its parent's process lives",
              !parentAlive || victimDuring?.activations === 0,
              `${victimDuring?.activations ?? '?'} activations on ${victim} during the cut, its parent's process ${parentAlive ? 'alive' : 'not alive'} throughout`,
            ),
            goal('the other two keep the load balancer at ≥ 99% during the cut', pct(cut) >= 99, `${pct(cut)}% of ${cut.polls} polls`),
            goal('nothing left active after the heal', left.length === 0, left.join(', ') || 'none'),
          ],
        );
      }
      case 'hang': {
        const victim = 'm2';
        const t0 = Date.now();
        const frozen = (await c.script('freeze', victim)).trim();
        await sleep(o.holdS * 1000);
        const tThaw = Date.now();
        await c.script('thaw', victim);
        const own = p.direct.get(victim) as Poller;
        const ownDuring = own.between(t0, tThaw);
        // Served again: from the first answered poll after the hang's last failed one, every poll
        // answered until the thaw (polls answered before the stop took hold say nothing); none
        // failed: served throughout (0 s).
        const during = own.samples.filter((s) => s.t >= t0 && s.t < tThaw);
        const lastFailed = during.findLast((s) => !s.ok);
        const ownBackAt = lastFailed === undefined ? t0 : (during.find((s) => s.t > lastFailed.t && s.ok)?.t ?? null);
        const w = await watchRecovery(c, p.direct, { nodes: NODES, t0: tThaw, limitS: o.limitS, settleS: o.settleS, othersSince: 0, parentSince: 0 });
        await c.waitFor('no checkpoint active after the thaw', o.limitS, () => activeCheckpoints(c).length === 0).catch(() => 0);
        await stopAll(p);
        const cut = p.lb.between(t0, tThaw);
        const nodes = NODES.map((n) => nodeResult(c, n, t0, w));
        const left = activeCheckpoints(c);
        const ownBackS = ownBackAt === null ? null : round2((ownBackAt - t0) / 1000);
        const fencedVictim = nodes.find((n) => n.node === victim)?.fenced ?? 0;
        const redirectedVictim = nodes.find((n) => n.node === victim)?.redirected ?? 0;
        return finish(
          name,
          round,
          t0,
          p.lb,
          nodes,
          recoveredAll(nodes) && left.length === 0,
          [
            `${victim}'s kube-apiserver processes (${frozen}) stopped with SIGSTOP for ${o.holdS}s`,
            `load balancer during the hang: ${cut.polls - cut.failed}/${cut.polls} polls served (${pct(cut)}%)`,
            `${victim}'s own port during the hang: ${ownDuring.polls - ownDuring.failed}/${ownDuring.polls} polls served; first served ${ownBackS ?? 'never'} s after the stop`,
            `apiServedAfterS and parentServedAfterS from the stop, first looked for after the thaw (so never below the hold); checkpoints still active at the end: ${left.join(', ') || 'none'}`,
          ],
          [
            goal('the load balancer keeps ≥ 99% during the hang', pct(cut) >= 99, `${pct(cut)}% of ${cut.polls} polls`),
            // The hung process is fenced in both modes (src/core/fence.ts): its established
            // connections, the kubelet's among them, end only with it. Under `handover: redirect`
            // new connections go to the copy (docs/decisions/0012-one-listener-per-port.md).
            goal(`lastseen fences the hung parent on ${victim}`, fencedVictim > 0, `${fencedVictim} fence records on ${victim}`),
            ...(c.handover === 'redirect'
              ? [
                  goal(
                    `lastseen redirects ${victim}'s clients from the hung parent to its copy`,
                    redirectedVictim > 0,
                    `${redirectedVictim} redirect records on ${victim}`,
                  ),
                ]
              : []),
            goal(`${victim}'s own clients served again within 30 s of the stop`, ownBackS !== null && ownBackS <= 30, `${ownBackS ?? 'never'} s`),
            goal('nothing left active after the thaw', left.length === 0, left.join(', ') || 'none'),
          ],
        );
      }
      case 'bad-rollout': {
        const bad = await badRollout(c);
        const t0 = bad.t0;
        await sleep(o.holdS * 1000);
        const pods = await c.apiPods('app.kubernetes.io/name=kube-apiserver').catch(() => []);
        const ds = JSON.parse(await c.kubectlRetry(['-n', 'kube-system', 'get', 'daemonset', 'kube-apiserver', '-o', 'json'])).status;
        const during = p.lb.between(t0);
        const tUndo = Date.now();
        // The rollback: the template as it was (a patch to a given value, so a retry after a dropped
        // connection cannot roll back twice, as a repeated `rollout undo` would).
        await c.kubectlRetry(bad.patch(bad.original));
        const w = await watchRecovery(c, p.direct, { nodes: NODES, t0: tUndo, limitS: o.limitS, settleS: o.settleS, othersSince: 0, parentSince: 0 });
        await c
          .waitFor('the rollback rolled out', o.limitS, async () => {
            const s = JSON.parse(await c.kubectlRetry(['-n', 'kube-system', 'get', 'daemonset', 'kube-apiserver', '-o', 'json'])).status;
            return s.updatedNumberScheduled === NODES.length && s.numberReady === NODES.length;
          })
          .catch(() => 0);
        await stopAll(p);
        const nodes = NODES.map((n) => ({ ...nodeResult(c, n, t0, w), parentServedAfterS: nodeResult(c, n, tUndo, w).parentServedAfterS }));
        const left = activeCheckpoints(c);
        return finish(
          name,
          round,
          t0,
          p.lb,
          nodes,
          recoveredAll(nodes) && left.length === 0,
          [
            `after ${o.holdS}s of the bad spec: DaemonSet updatedNumberScheduled ${ds.updatedNumberScheduled}, numberReady ${ds.numberReady}, numberUnavailable ${ds.numberUnavailable ?? 0}; pods ${pods.map((x) => `${x.spec?.nodeName}:${x.metadata.name}`).join(' ')}`,
            `load balancer during the bad spec: ${during.polls - during.failed}/${during.polls} polls served (${pct(during)}%)`,
            `parentServedAfterS counted from the rollback; checkpoints still active at the end: ${left.join(', ') || 'none'}`,
          ],
          [
            goal(
              'the rollout stalls on the first node',
              ds.updatedNumberScheduled === 1 && (ds.numberUnavailable ?? 0) <= 1,
              `updatedNumberScheduled ${ds.updatedNumberScheduled}, numberUnavailable ${ds.numberUnavailable ?? 0}`,
            ),
            goal('the load balancer stays ≥ 99% during the bad spec', pct(during) >= 99, `${pct(during)}% of ${during.polls} polls`),
            goal('nothing left active after the rollback', left.length === 0, left.join(', ') || 'none'),
          ],
        );
      }
      case 'master-lost': {
        const victim = 'm3';
        const others = NODES.filter((n) => n !== victim);
        // The NodeCheckpoint must be there, owned by its Node, before the Node goes: else "gone" proves nothing.
        const before = await c
          .kubectlRetry(['get', 'nodecheckpoints.lastseen.dev', victim, '-o', 'json'])
          .then((out) => JSON.parse(out) as { metadata: { ownerReferences?: Array<{ kind: string; name: string }> } })
          .catch(() => null);
        const owners = before?.metadata.ownerReferences ?? [];
        const ownedByNode = owners.some((r) => r.kind === 'Node' && r.name === victim);
        const t0 = Date.now();
        await c.script('kill', victim);
        await c.kubectlRetry(['delete', 'node', victim, '--wait=false', '--ignore-not-found']);
        const tDeleted = Date.now();
        const gone = await c
          .waitFor(`NodeCheckpoint ${victim} collected`, o.limitS, async () => {
            const out = await c.kubectl(['get', 'nodecheckpoints.lastseen.dev', '-o', 'name']);
            return !out.split('\n').some((l) => l.trim() === `nodecheckpoint.lastseen.dev/${victim}`);
          })
          .then((s) => s)
          .catch(() => null);
        await sleep(o.settleS * 1000);
        await stopAll(p);
        const nodes = NODES.map((n) => nodeResult(c, n, t0, null));
        const servedPct = (n: string) => {
          const b = p.direct.get(n)?.between(t0) ?? { polls: 0, failed: 0 };
          return b.polls ? (100 * (b.polls - b.failed)) / b.polls : 0;
        };
        return finish(
          name,
          round,
          t0,
          p.lb,
          nodes,
          before !== null && ownedByNode && gone !== null && others.every((n) => servedPct(n) >= 99),
          [
            `${victim} powered off for good and its Node deleted ${round2((tDeleted - t0) / 1000)}s in`,
            `NodeCheckpoint ${victim} before: ${before === null ? 'absent' : `present, owners ${owners.map((r) => `${r.kind}/${r.name}`).join(', ') || 'none'}`}`,
            `NodeCheckpoint ${victim} removed by the garbage collector: ${gone === null ? `not within ${o.limitS}s` : `${round2(gone)}s after the delete`}`,
            `the others' own api-servers: ${others.map((n) => `${n} ${JSON.stringify(p.direct.get(n)?.between(t0))}`).join(', ')}`,
          ],
          [
            goal(
              'the other two keep serving (own ports ≥ 99%)',
              others.every((n) => servedPct(n) >= 99),
              others.map((n) => `${n} ${round2(servedPct(n))}%`).join(', '),
            ),
            goal(
              `NodeCheckpoint ${victim} removed by the garbage collector`,
              before !== null && ownedByNode && gone !== null,
              `${before === null ? 'absent before the delete; ' : ownedByNode ? '' : 'not owned by its Node; '}${gone === null ? `not removed within ${o.limitS} s` : `gone ${round2(gone)} s after the delete`}`,
            ),
          ],
        );
      }
    }
  } finally {
    await stopAll(p);
  }
}

/**
 * A rollout of an api-server spec that never becomes Ready (its only etcd is one nobody serves);
 * moment zero is the patch. Returns the flag it replaced and the kubectl arguments that set it.
 */
async function badRollout(c: Cluster): Promise<{ t0: number; original: string; patch: (value: string) => string[] }> {
  const ds = JSON.parse(await c.kubectlRetry(['-n', 'kube-system', 'get', 'daemonset', 'kube-apiserver', '-o', 'json']));
  const command: string[] = ds.spec.template.spec.containers[0].command;
  const at = command.findIndex((a) => a.startsWith('--etcd-servers='));
  if (at < 0) throw new Error('the kube-apiserver DaemonSet has no --etcd-servers flag to break');
  const patch = (value: string) => [
    '-n',
    'kube-system',
    'patch',
    'daemonset',
    'kube-apiserver',
    '--type=json',
    '-p',
    JSON.stringify([{ op: 'replace', path: `/spec/template/spec/containers/0/command/${at}`, value }]),
  ];
  const t0 = Date.now();
  await c.kubectlRetry(patch('--etcd-servers=http://127.0.0.1:9'));
  log('bad api-server spec rolled out');
  return { t0, original: command[at] as string, patch };
}
