// 5. Many agents against one api-server: N in-process `runAgent` instances, each its own node name,
// temp folders and health port 0, with 0, N/2 and N parents (one per node, lease channel, heartbeat
// loops in this process). Counted: the lease beats each agent receives (its Agent.beat calls)
// versus the Lease writes for its own node (the heartbeats' own counts), and the api-server's
// request rate (apiserver_request_total, background subtracted).
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { pino } from 'pino';
import { type RunningAgent, runAgent } from '../../src/agent/run.js';
import { startHeartbeat } from '../../src/heartbeat/heartbeat.js';
import type { Heartbeat } from '../../src/heartbeat/loop.js';
import { type Baseline, type ControlPlane, delta, net } from '../lib/cp.js';
import { createNamespace, createNode, createParentPod } from '../lib/kube.js';
import { sampleProc, tempDirs, writePolicy } from '../lib/procs.js';
import { progress, type Summary, sleep, summarize } from '../lib/util.js';

export const SCALE_INTERVAL_MS = 1000;

export interface ScaleStep {
  agents: number;
  parents: number;
  seconds: number;
  /** Lease writes by all heartbeats in the window (what a cluster-wide watch would deliver to every agent). */
  clusterLeaseWrites: number;
  /** Σ over agents of lease beats received */
  received: number;
  /** Σ over agents of Lease writes for its own node */
  ownWrites: number;
  /** per agent: received − own (foreign or duplicate deliveries; ≈ 0 when watches are scoped) */
  excessPerAgent: Summary;
  /** agents that received beats while none were written for their node */
  agentsWithForeignEvents: number;
  requestsPerSecond: number;
  /** Lease writes in the same window as requestsPerSecond */
  leaseWritesInRequestWindow: number;
  requestsPerSecondPerAgent: number;
  byKey: Record<string, number>;
}

export interface ScaleFigures {
  agents: number;
  startSeconds: number;
  benchRssMiB: number;
  steps: ScaleStep[];
  warnings: number;
}

export async function scale(cp: ControlPlane, base: Baseline, agents: number, o: { warmupMs: number; measureMs: number }): Promise<ScaleFigures> {
  const kc = cp.kc();
  const ns = await createNamespace(kc, 'scale');
  const root = await tempDirs('lastseen-bench-scale-');
  const policy = join(root.root, 'policy.yaml');
  await writePolicy(policy, `{ interval: ${SCALE_INTERVAL_MS}ms, window: 4s, startupGrace: 4s, channels: [lease] }`);
  let warnings = 0;
  const logger = pino({ level: 'warn', hooks: { logMethod: () => void warnings++ } });
  const running: RunningAgent[] = [];
  const received: number[] = Array.from({ length: agents }, () => 0);
  const hbs: Array<Heartbeat | null> = Array.from({ length: agents }, () => null);
  const t0 = performance.now();
  try {
    for (let i = 0; i < agents; i++) {
      const d = await tempDirs('lastseen-bench-scale-a-');
      const r = await runAgent({
        node: `scale-${i}`,
        podName: `agent-scale-${i}`,
        namespace: ns,
        kubeconfig: cp.adminKubeconfig,
        manifestDir: d.manifests,
        stateDir: d.state,
        heartbeatDir: d.heartbeats,
        policyFile: policy,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logger,
      });
      const beat = r.agent.beat.bind(r.agent);
      r.agent.beat = (namespace, key, b) => {
        if (b.channel === 'lease' && b.role === 'parent') received[i]!++;
        beat(namespace, key, b);
      };
      running.push(r);
    }
    const startSeconds = (performance.now() - t0) / 1000;
    progress(`scale: ${agents} agents started in ${startSeconds.toFixed(1)} s`);
    const hbLogger = pino({ level: 'silent' });
    const steps: ScaleStep[] = [];
    for (const parents of [...new Set([0, Math.floor(agents / 2), agents])]) {
      const fresh = Array.from({ length: parents }, (_, i) => i).filter((i) => !hbs[i]);
      const pods: Array<{ name: string; uid: string }> = [];
      for (let j = 0; j < fresh.length; j += 10)
        pods.push(
          ...(await Promise.all(
            fresh.slice(j, j + 10).map(async (i) => {
              await createNode(kc, `scale-${i}`);
              return createParentPod(kc, ns, `scale-${i}`, 'p', undefined, { ready: true });
            }),
          )),
        );
      fresh.forEach((i, j) => {
        const node = `scale-${i}`;
        const pod = pods[j]!;
        hbs[i] = startHeartbeat({
          identity: { node, podName: pod.name, namespace: ns, podUid: pod.uid || randomUUID(), key: 'p', role: 'parent' },
          intervalMs: SCALE_INTERVAL_MS,
          channels: ['lease'],
          probe: 'none',
          kubeConfig: kc,
          logger: hbLogger,
        });
      });
      await sleep(o.warmupMs);
      const written = () => hbs.map((h) => h?.stats().lease?.written ?? 0);
      const w0 = written();
      const r0 = [...received];
      // Lease writes counted on both sides of each scrape and averaged, so the request window and
      // the write window match (see apicost.ts).
      const snap = async () => {
        const a = { w: written().reduce((x, y) => x + y, 0), t: performance.now() };
        const m = await cp.requests();
        const b = { w: written().reduce((x, y) => x + y, 0), t: performance.now() };
        return { m, writes: (a.w + b.w) / 2, t: (a.t + b.t) / 2 };
      };
      const before = await snap();
      await sleep(o.measureMs);
      const after = await snap();
      const seconds = (after.t - before.t) / 1000;
      const w1 = written();
      const r1 = [...received];
      const own = w1.map((w, i) => w - w0[i]!);
      const got = r1.map((r, i) => r - r0[i]!);
      const d = delta(before.m, after.m);
      const reqs = net(d, base, seconds);
      const writesInWindow = after.writes - before.writes;
      steps.push({
        agents,
        parents,
        seconds,
        clusterLeaseWrites: own.reduce((a, b) => a + b, 0),
        received: got.reduce((a, b) => a + b, 0),
        ownWrites: own.reduce((a, b) => a + b, 0),
        excessPerAgent: summarize(got.map((g, i) => g - own[i]!)),
        agentsWithForeignEvents: got.filter((g, i) => g > 0 && own[i] === 0).length,
        requestsPerSecond: reqs / seconds,
        leaseWritesInRequestWindow: writesInWindow,
        requestsPerSecondPerAgent: reqs / seconds / agents,
        byKey: Object.fromEntries(d),
      });
      progress(`scale: ${agents} agents, ${parents} parents measured`);
    }
    const mem = await sampleProc(process.pid);
    return { agents, startSeconds, benchRssMiB: mem.rssKiB / 1024, steps, warnings };
  } finally {
    await Promise.all(hbs.map((h) => h?.stop()));
    await Promise.all(running.map((r) => r.stop()));
  }
}
