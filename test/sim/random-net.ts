// Random network schedules: links cut one way or both, jittery latency per direction, slow beats,
// beside the reboots and partitions they interact with. A sweep of its own (src/sim/random.ts keeps
// the schedules of earlier sweeps); each seed draws from its own stream and replays exactly.
import { parseScenario, type Scenario, type ScenarioInput } from '../../src/sim/index.js';
import { Rng } from '../../src/sim/rng.js';

type FaultInput = NonNullable<ScenarioInput['faults']>[number];

export function randomNetScenario(seed: number): Scenario {
  const rng = new Rng(seed).fork('net-schedule');
  const masters = rng.int(1, 3);
  const nodes = [
    ...Array.from({ length: masters }, (_, i) => ({ name: `m${i + 1}`, master: true, skew: rng.int(-300_000, 300_000) })),
    { name: 'w1', master: false },
  ];
  const names = nodes.map((n) => n.name);
  const ends = [...names, 'api-server'];
  const range = (lo: number, hi: number) => {
    const a = rng.int(lo, hi);
    return rng.chance(0.5) ? a : { min: a, max: a + rng.int(0, hi) };
  };
  const faults: FaultInput[] = [];
  let at = rng.int(60_000, 120_000);
  for (let i = rng.int(1, 4); i > 0; i--) {
    const node = rng.pick(names);
    switch (rng.pick(['link', 'link', 'link', 'latency', 'reboot', 'partition'] as const)) {
      case 'link': {
        const to = rng.pick(ends.filter((e) => e !== node));
        faults.push({ type: 'link', at, from: node, to, direction: rng.pick(['both', 'out', 'in'] as const), duration: rng.int(10_000, 240_000) });
        break;
      }
      case 'latency':
        faults.push({ type: 'latency', at, node, duration: rng.int(10_000, 180_000), toApi: range(0, 2_000), fromApi: range(0, 2_000) });
        break;
      case 'reboot':
        faults.push({ type: 'reboot', at, node, down: rng.int(20_000, 90_000) });
        break;
      case 'partition':
        faults.push({ type: 'partition', at, node, duration: rng.int(10_000, 180_000) });
        break;
    }
    at += rng.int(0, 90_000);
  }
  // The app's sidecar beats at the policy's interval, or slower, up to window - 1s (declared).
  const beatInterval = rng.chance(0.5) ? undefined : rng.pick(['5s', '10s', '15s', '19s']);
  const doc: ScenarioInput = {
    name: `random-net-${seed}`,
    duration: at + 300_000,
    kubelet: { model: seed % 2 === 0 ? 'v1.5' : 'v1.36' },
    nodes,
    parents: [
      rng.chance(0.5)
        ? { key: 'kube-apiserver', kind: 'apiserver', portSharing: true, policy: { whenApiUnreachable: 'activate', handover: 'overlap' } }
        : { key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } },
      { key: 'kube-flannel', kind: 'app', ...(beatInterval ? { beatInterval } : {}) },
    ],
    faults,
  };
  const r = parseScenario(doc);
  if (!r.ok) throw new Error(`random net scenario ${seed} is invalid: ${JSON.stringify(r.errors)}`);
  return r.scenario;
}
