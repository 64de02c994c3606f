// The speed figure: a cluster of `nodes` nodes, 3 of them masters with the api-server, and a
// DaemonSet parent (a CNI) on every node, run with a fault every 20 virtual minutes from minute 5
// (reboots, partitions, watch stalls, agent restarts in turn, on the nodes in turn), timeline off.
// With 3 nodes it is a 3-master cluster; with hundreds, the cluster a DaemonSet parent makes
// realistic. Runs of 12 virtual minutes and more have at least one fault.
import { runScenario } from './run.js';
import { parseScenario, type Scenario, type ScenarioInput } from './schema.js';

export interface SpeedFigure {
  nodes: number;
  virtualSeconds: number;
  wallSeconds: number;
  virtualSecondsPerWallSecond: number;
  events: number;
  eventsPerWallSecond: number;
  violations: number;
}

/** Masters in the speed cluster (fewer when the cluster is smaller). */
export const SPEED_MASTERS = 3;

/** Node names: masters m1..m3, then workers w4, w5, ... */
export function speedNodeName(i: number): string {
  return i < SPEED_MASTERS ? `m${i + 1}` : `w${i + 1}`;
}

export function speedScenario(nodes: number, hours: number): Scenario {
  const faults: NonNullable<ScenarioInput['faults']> = [];
  const kinds = ['reboot', 'partition', 'stall-watch', 'agent-restart'] as const;
  for (let i = 0, at = 5 * 60_000; at < hours * 3_600_000 - 5 * 60_000; i++, at += 20 * 60_000) {
    const node = speedNodeName(i % nodes);
    const k = kinds[i % kinds.length]!;
    if (k === 'reboot') faults.push({ type: k, at, node, down: 40_000 });
    else if (k === 'agent-restart') faults.push({ type: k, at, node });
    else faults.push({ type: k, at, node, duration: 120_000 });
  }
  const r = parseScenario({
    name: `speed-${nodes}n`,
    duration: hours * 3_600_000,
    nodes: Array.from({ length: nodes }, (_, i) => ({ name: speedNodeName(i), master: i < SPEED_MASTERS })),
    parents: [
      { key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } },
      { key: 'kube-flannel', kind: 'app' },
    ],
    faults,
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

export async function measureSpeed(now: () => number, hours = 24, nodes = SPEED_MASTERS): Promise<SpeedFigure> {
  const t0 = now();
  const res = await runScenario(speedScenario(nodes, hours), { keepLogs: false });
  const wall = (now() - t0) / 1000;
  return {
    nodes,
    virtualSeconds: res.endedAt,
    wallSeconds: wall,
    virtualSecondsPerWallSecond: Math.round(res.endedAt / wall),
    events: res.events,
    eventsPerWallSecond: Math.round(res.events / wall),
    violations: res.invariantViolations.length,
  };
}
