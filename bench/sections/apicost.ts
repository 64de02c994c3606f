// 3. Api-server cost of heartbeats: requests per beat at steady state for 1, 10 and 100 parents per
// channel (heartbeat loops in-process with startHeartbeat), from kube-apiserver's own
// apiserver_request_total deltas minus its background rate, cross-checked by counting the
// requests the heartbeat's client sends (onRequest). And requests per minute of an idle agent.
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { startHeartbeat } from '../../src/heartbeat/heartbeat.js';
import type { Heartbeat } from '../../src/heartbeat/loop.js';
import { type Baseline, type ControlPlane, delta, net } from '../lib/cp.js';
import { createNamespace, createParentPods } from '../lib/kube.js';
import { agentArgs, healthPortOf, lastseen, tempDirs, writePolicy } from '../lib/procs.js';
import { sleep, waitFor } from '../lib/util.js';
import type { Channel } from '../lib/watch.js';

/** Which apiserver_request_total keys a channel's writes land on. */
const RESOURCE: Record<Channel, ((k: string) => boolean) | null> = {
  lease: (k) => k.endsWith(' leases'),
  annotation: (k) => k.endsWith(' pods'),
  local: null,
};

export interface CostFigures {
  channel: Channel;
  parents: number;
  intervalMs: number;
  seconds: number;
  /** rounds stored (beats) and rounds given up on (failed) in the window */
  beats: number;
  failedRounds: number;
  /** server-side: requests on the channel's resource, background subtracted (per round: stored + failed) */
  serverRequests: number | null;
  serverPerBeat: number | null;
  /** client-side: requests the heartbeat clients sent */
  clientRequests: number;
  clientPerBeat: number | null;
  /** raw server-side deltas by `VERB resource` during the window (background included) */
  byKey: Record<string, number>;
}

export async function heartbeatCost(
  cp: ControlPlane,
  base: Baseline,
  channel: Channel,
  parents: number,
  o: { intervalMs: number; warmupMs: number; measureMs: number },
): Promise<CostFigures> {
  const kc = cp.kc();
  const ns = await createNamespace(kc, `cost-${channel}`);
  const node = `cost-${channel}-${parents}`;
  const dirs = await tempDirs();
  const logger = pino({ level: 'silent' });
  const pods =
    channel === 'annotation'
      ? await createParentPods(kc, ns, node, parents)
      : Array.from({ length: parents }, (_, i) => ({ name: `p${i}-${node}`, uid: randomUUID() }));
  let clientTotal = 0;
  const hbs: Heartbeat[] = pods.map((p, i) =>
    startHeartbeat({
      identity: { node, podName: p.name, namespace: ns, podUid: p.uid, key: `p${i}`, role: 'parent' },
      intervalMs: o.intervalMs,
      channels: [channel],
      probe: 'none',
      heartbeatDir: dirs.heartbeats,
      kubeConfig: kc,
      logger,
      onRequest: () => {
        clientTotal++;
      },
    }),
  );
  const beatsOf = () => hbs.reduce((a, h) => a + (h.stats()[channel]?.written ?? 0), 0);
  const failedOf = () => hbs.reduce((a, h) => a + (h.stats()[channel]?.failed ?? 0), 0);
  try {
    // Our counters are read on both sides of each scrape and averaged: at 100+ beats/s a scrape's
    // own latency would otherwise shift the two windows apart.
    const counters = () => ({ beats: beatsOf(), failed: failedOf(), client: clientTotal, t: performance.now() });
    const snap = async () => {
      const a = counters();
      const m = await cp.requests();
      const b = counters();
      return { m, beats: (a.beats + b.beats) / 2, failed: (a.failed + b.failed) / 2, client: (a.client + b.client) / 2, t: (a.t + b.t) / 2 };
    };
    await sleep(o.warmupMs);
    const s0 = await snap();
    await sleep(o.measureMs);
    const s1 = await snap();
    const before = s0.m;
    const after = s1.m;
    const seconds = (s1.t - s0.t) / 1000;
    const beats = Math.round(s1.beats - s0.beats);
    const failedRounds = Math.round(s1.failed - s0.failed);
    const rounds = beats + failedRounds;
    const clientRequests = s1.client - s0.client;
    const d = delta(before, after);
    const filter = RESOURCE[channel];
    const serverRequests = filter ? net(d, base, seconds, filter) : null;
    return {
      channel,
      parents,
      intervalMs: o.intervalMs,
      seconds,
      beats,
      serverRequests,
      serverPerBeat: serverRequests !== null && rounds > 0 ? serverRequests / rounds : null,
      clientRequests,
      clientPerBeat: rounds > 0 ? clientRequests / rounds : null,
      byKey: Object.fromEntries(d),
      failedRounds,
    };
  } finally {
    await Promise.all(hbs.map((h) => h.stop()));
  }
}

export interface IdleAgentFigures {
  seconds: number;
  requests: number;
  perMinute: number;
  /**
   * The same, counting only the kinds of request the agent makes (its /readyz probe, its reads and
   * watches of pods, Leases, Secrets and ConfigMaps, its NodeCheckpoint, Events, token requests,
   * its Node): the api-server's own traffic (its identity Lease, endpoints, OpenAPI, its informers'
   * watches) is bursty, and a background measured over 20 s subtracts it badly.
   */
  ownKindsPerMinute: number;
  byKey: Record<string, number>;
  backgroundPerMinute: number;
}

const AGENT_READS = new Set(['pods', 'leases', 'secrets', 'configmaps', 'nodes']);
const AGENT_OBJECTS = new Set(['/readyz', 'nodecheckpoints', 'nodecheckpoints/status', 'events', 'serviceaccounts/token']);

/** A request kind ("VERB resource", as ControlPlane.requests keys it) the agent makes. */
export function agentMakes(key: string): boolean {
  const [verb = '', resource = ''] = key.split(' ');
  return AGENT_OBJECTS.has(resource) || (AGENT_READS.has(resource) && ['GET', 'LIST', 'WATCH'].includes(verb));
}

/** One `lastseen agent` (bundle, default probe and watch settings) on a node with no parents. */
export async function idleAgent(cp: ControlPlane, base: Baseline, measureMs: number, extra: string[] = []): Promise<IdleAgentFigures> {
  const kc = cp.kc();
  const ns = await createNamespace(kc, 'idle');
  const dirs = await tempDirs();
  await writePolicy(dirs.policy, '{ interval: 5s, window: 20s }');
  const agent = lastseen(agentArgs({ node: 'idle-node', namespace: ns, kubeconfig: cp.adminKubeconfig, dirs, extra }));
  try {
    const port = await waitFor(() => healthPortOf(agent), 'the idle agent to listen', 60_000);
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 'the idle agent to be ready', 60_000, 100);
    await sleep(1000);
    const before = await cp.requests();
    const t0 = performance.now();
    await sleep(measureMs);
    const after = await cp.requests();
    const seconds = (performance.now() - t0) / 1000;
    const d = delta(before, after);
    const requests = net(d, base, seconds);
    let bg = 0;
    for (const r of base.perSecond.values()) bg += r;
    const own = net(d, base, seconds, agentMakes);
    return {
      seconds,
      requests,
      perMinute: (requests / seconds) * 60,
      ownKindsPerMinute: (own / seconds) * 60,
      byKey: Object.fromEntries(d),
      backgroundPerMinute: bg * 60,
    };
  } finally {
    await agent.stop();
  }
}
