// The speed figure: a 3-master cluster (api-server and CNI parents) for 24 virtual hours with a
// fault every 20 minutes (reboots, partitions, watch stalls, agent restarts in turn), timeline off.
import { runScenario } from './run.js';
import { parseScenario, type ScenarioInput } from './schema.js';

export interface SpeedFigure {
  virtualSeconds: number;
  wallSeconds: number;
  virtualSecondsPerWallSecond: number;
  events: number;
  violations: number;
}

export async function measureSpeed(now: () => number, hours = 24): Promise<SpeedFigure> {
  const faults: NonNullable<ScenarioInput['faults']> = [];
  const kinds = ['reboot', 'partition', 'stall-watch', 'agent-restart'] as const;
  for (let i = 0, at = 20 * 60_000; at < hours * 3_600_000 - 20 * 60_000; i++, at += 20 * 60_000) {
    const node = `m${(i % 3) + 1}`;
    const k = kinds[i % kinds.length]!;
    if (k === 'reboot') faults.push({ type: k, at, node, down: 40_000 });
    else if (k === 'agent-restart') faults.push({ type: k, at, node });
    else faults.push({ type: k, at, node, duration: 120_000 });
  }
  const r = parseScenario({
    name: 'speed-24h',
    duration: hours * 3_600_000,
    nodes: [1, 2, 3].map((i) => ({ name: `m${i}`, master: true })),
    parents: [
      { key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } },
      { key: 'kube-flannel', kind: 'app' },
    ],
    faults,
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const t0 = now();
  const res = await runScenario(r.scenario, { keepLogs: false });
  const wall = (now() - t0) / 1000;
  return {
    virtualSeconds: res.endedAt,
    wallSeconds: wall,
    virtualSecondsPerWallSecond: Math.round(res.endedAt / wall),
    events: res.events,
    violations: res.invariantViolations.length,
  };
}
