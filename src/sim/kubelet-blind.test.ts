// A blind kubelet starts nothing (src/core/boot.ts, KubeletBlind): three masters whose kubelets ask
// their own node's api-server, rebooted one at a time. The agent hears the other two through the
// load balancer; the node's kubelet hears nothing until something serves on its node. The agent
// finds the kubelet's node Lease not renewed since the boot and covers before startupGrace ends.
// With kubelets on the load balancer the kubelet renews at once, and nothing is activated.
import { describe, expect, it } from 'vitest';
import { KUBELET_SETTLE_MS } from '../agent/observe/kubelet-lease.js';
import { runScenario } from './run.js';
import { NAMED } from './scenarios.js';
import { parseScenario } from './schema.js';

const REBOOTS = [
  { node: 'm1', at: 180_000 },
  { node: 'm2', at: 330_000 },
  { node: 'm3', at: 480_000 },
];
const DOWN_MS = 5_000;

function scenario(seed: number, api: 'local' | 'cluster') {
  const base = NAMED['rolling-reboot-local-kubelets']!;
  const r = parseScenario({ ...base, name: `${base.name}-${api}`, seed, kubelet: { model: 'v1.36', api } });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

type Log = { t: number; node: string; kind: string; text: string };
const activations = (logs: Log[], node: string) => logs.filter((l) => l.node === node && l.kind === 'core' && / -> Active: /.test(l.text));
const agentStarts = (logs: Log[], node: string) => logs.filter((l) => l.node === node && l.kind === 'agent' && /^agent started/.test(l.text)).map((l) => l.t);

describe('a blind kubelet starts nothing', () => {
  for (const seed of [1, 2, 3]) {
    it(`local kubelets, rolling reboot (seed ${seed}): every rebooted master covered as KubeletBlind, before startupGrace`, async () => {
      const res = await runScenario(scenario(seed, 'local'));
      expect(res.invariantViolations).toEqual([]);
      expect(res.verdict).toBe('pass');
      for (const { node, at } of REBOOTS) {
        const acts = activations(res.logs, node);
        expect(acts.map((a) => a.text.split(': ')[1])).toEqual(['KubeletBlind']);
        const started = agentStarts(res.logs, node).find((t) => t > at + DOWN_MS)!;
        // The first read of the node's Lease is KUBELET_SETTLE_MS after the agent's start; the live
        // read that confirms the silence takes a round trip.
        expect(acts[0]!.t - started).toBeGreaterThanOrEqual(KUBELET_SETTLE_MS);
        expect(acts[0]!.t - started).toBeLessThan(KUBELET_SETTLE_MS + 2_000);
      }
    }, 120_000);

    it(`kubelets on the load balancer (seed ${seed}): the kubelet renews at once, nothing is activated`, async () => {
      const res = await runScenario(scenario(seed, 'cluster'));
      expect(res.invariantViolations).toEqual([]);
      expect(res.verdict).toBe('pass');
      for (const { node } of REBOOTS) expect(activations(res.logs, node)).toEqual([]);
    }, 120_000);
  }
});
