// Random fault schedules: one seed, one short cluster run. The schedule is drawn from the seed's
// own stream, so `random --seeds 17..17` replays run 17 exactly.
import { Rng } from './rng.js';
import { parseScenario, type Scenario, type ScenarioInput } from './schema.js';

type FaultInput = NonNullable<ScenarioInput['faults']>[number];

/** The api-server parent of both sweeps: as deploy/base/policy.yaml has it, or sharing its port with the overlap hand-over. */
const APISERVER = { key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } } as const;
const SHARED_APISERVER = { ...APISERVER, portSharing: true, policy: { ...APISERVER.policy, handover: 'overlap' } } as const;
/** As deploy/components/parent-kube-apiserver writes it: deleted, it serves through a 20 s preStop pause. */
const SHARED_APISERVER_PRESTOP = { ...SHARED_APISERVER, preStop: '20s', terminationGracePeriod: '45s' } as const;
/**
 * Behind the node-local redirect (handover: redirect, docs/decisions/0012-one-listener-per-port.md): the copy on a port of
 * its own; the parent still shares its port with its own successor (a surge).
 */
const redirected = (a: typeof SHARED_APISERVER | typeof SHARED_APISERVER_PRESTOP) =>
  ({ ...a, policy: { ...a.policy, handover: 'redirect', redirect: { port: 6443, copyPort: 16443 } } }) as const;
/**
 * The shared api-server, with its preStop pause in half the seeds, and behind the redirect in a
 * third of them (seed % 3 = 1). By seed, not drawn: the schedules stay those of earlier sweeps.
 */
const shared = (seed: number) => {
  const a = Math.floor(seed / 8) % 2 === 1 ? SHARED_APISERVER_PRESTOP : SHARED_APISERVER;
  return seed % 3 === 1 ? redirected(a) : a;
};

/**
 * Both kubelet models, alternating by seed; the masters' kubelets ask their own node's api-server
 * (kubeadm's local mode) in every other pair of seeds. By seed, not drawn: the schedules stay those
 * of earlier sweeps.
 */
const kubeletOf = (seed: number) => ({
  model: seed % 2 === 0 ? ('v1.5' as const) : ('v1.36' as const),
  ...(Math.floor(seed / 16) % 2 === 1 ? { api: 'local' as const } : {}),
});

/**
 * In every other 32 seeds (by seed, not drawn: schedules unchanged) a bad spec is the real beds'
 * kind: it binds at once, answers nothing and exits after 20 s, holding its share of a shared port
 * silently at every start (bad-rollout-silent-overlap). In the rest it crashes a second after its bind.
 */
const silentBad = (seed: number, healthy: boolean) => (!healthy && Math.floor(seed / 32) % 2 === 1 ? { bindTime: 1_000, startTime: 21_000 } : {});

/** Faults both sweeps draw the same way (the same draws in the same order: every seed's schedule unchanged). */
const reboot = (rng: Rng, at: number, node: string): FaultInput => ({ type: 'reboot', at, node, down: rng.int(20_000, 90_000) });
const partition = (rng: Rng, at: number, node: string): FaultInput => ({ type: 'partition', at, node, duration: rng.int(10_000, 180_000) });

/**
 * A rollout's update strategy (src/sim/daemonset.ts): mostly the DaemonSet defaults, else more nodes
 * at a time (a count or a percentage), or a surge (maxSurge 1, maxUnavailable 0: the new pod
 * beside the old one on a node, both beating on one Lease and file); and minReadySeconds.
 */
function rolloutStrategy(rng: Rng): { maxUnavailable: number | string; maxSurge: number; minReadySeconds: number } {
  const minReadySeconds = rng.pick([0, 0, 10]);
  switch (rng.pick(['default', 'default', 'more', 'percent', 'surge'] as const)) {
    case 'surge':
      return { maxUnavailable: 0, maxSurge: 1, minReadySeconds };
    case 'default':
      return { maxUnavailable: 1, maxSurge: 0, minReadySeconds };
    case 'more':
      return { maxUnavailable: 2, maxSurge: 0, minReadySeconds };
    case 'percent':
      return { maxUnavailable: rng.pick(['34%', '50%', '100%']), maxSurge: 0, minReadySeconds };
  }
}

function scenarioOf(doc: ScenarioInput): Scenario {
  const r = parseScenario(doc);
  if (!r.ok) throw new Error(`${doc.name} is invalid: ${JSON.stringify(r.errors)}`);
  return r.scenario;
}

/** A random scenario: 1-3 masters, an api-server and a CNI parent, 1-3 faults in the first minutes; odd seeds on kubelet v1.36, even on v1.5; the api-server shares its port (overlap) in seeds 2-3 modulo 4. */
export function randomScenario(seed: number): Scenario {
  const rng = new Rng(seed).fork('schedule');
  // The rollouts' update strategies come from a stream of their own: the schedules stay as they were.
  const pace = new Rng(seed).fork('rollout-strategy');
  const masters = rng.int(1, 3);
  const nodes = Array.from({ length: masters }, (_, i) => ({
    name: `m${i + 1}`,
    master: true,
    skew: rng.int(-300_000, 300_000),
    driftPpm: rng.int(-500, 500),
  }));
  const names = nodes.map((n) => n.name);
  const faults: FaultInput[] = [];
  const count = rng.int(1, 3);
  let at = rng.int(60_000, 120_000);
  for (let i = 0; i < count; i++) {
    const node = rng.pick(names);
    const kind = rng.pick(['reboot', 'reboot', 'partition', 'stall-watch', 'agent-restart', 'delete-pod', 'latency', 'clock-step', 'rollout'] as const);
    switch (kind) {
      case 'reboot':
        faults.push(reboot(rng, at, node));
        break;
      case 'partition':
        faults.push(partition(rng, at, node));
        break;
      case 'stall-watch':
        faults.push({ type: 'stall-watch', at, node, duration: rng.int(10_000, 180_000) });
        break;
      case 'agent-restart':
        faults.push({ type: 'agent-restart', at, node });
        break;
      case 'delete-pod':
        faults.push({ type: 'delete-pod', at, node, key: rng.pick(['kube-apiserver', 'kube-flannel']) });
        break;
      case 'latency':
        faults.push({ type: 'latency', at, node, latency: rng.int(100, 3000), duration: rng.int(10_000, 120_000) });
        break;
      case 'clock-step':
        faults.push({ type: 'clock-step', at, node, step: rng.int(-3_600_000, 3_600_000) });
        break;
      case 'rollout':
        {
          // The draws in their old order (key, then healthy, then the strategy): schedules unchanged.
          const key = rng.pick(['kube-apiserver', 'kube-flannel']);
          const healthy = rng.chance(0.7);
          faults.push({ type: 'rollout', at, key, healthy, ...rolloutStrategy(pace), ...silentBad(seed, healthy) });
        }
        break;
    }
    at += rng.int(5_000, 90_000);
  }
  const doc: ScenarioInput = {
    name: `random-${seed}`,
    duration: at + 300_000,
    kubelet: kubeletOf(seed),
    nodes,
    // The api-server as deploy/base/policy.yaml recommends it (port sharing, overlap hand-over) in
    // seeds 2-3 modulo 4, so both hand-overs meet both kubelet models (not drawn either).
    parents: [Math.floor(seed / 2) % 2 === 1 ? shared(seed) : APISERVER, { key: 'kube-flannel', kind: 'app' }],
    faults,
  };
  return scenarioOf(doc);
}

/**
 * A random network schedule (`simulate random --net`): 1-3 masters and a worker, 1-4 faults among
 * links cut one way or both (to a node or the api-server), latency per direction (fixed or a
 * range), reboots, partitions, a hung api-server (a third of them starved of CPU instead) or a killed app; the app's sidecar beats at its policy's interval or slower (up
 * to window - 1s, declared). Drawn from the seed's own stream `net-schedule`.
 */
export function randomNetScenario(seed: number): Scenario {
  const rng = new Rng(seed).fork('net-schedule');
  // Whether a hang is a hung process or a starved one comes from a stream of its own, so every
  // seed's schedule is the one it was before starved processes were drawn.
  const hangScope = new Rng(seed).fork('net-hang-scope');
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
    switch (rng.pick(['link', 'link', 'link', 'latency', 'reboot', 'partition', 'hang', 'kill'] as const)) {
      case 'link': {
        const to = rng.pick(ends.filter((e) => e !== node));
        faults.push({ type: 'link', at, from: node, to, direction: rng.pick(['both', 'out', 'in'] as const), duration: rng.int(10_000, 240_000) });
        break;
      }
      case 'latency':
        faults.push({ type: 'latency', at, node, duration: rng.int(10_000, 180_000), toApi: range(0, 2_000), fromApi: range(0, 2_000) });
        break;
      case 'reboot':
        faults.push(reboot(rng, at, node));
        break;
      case 'partition':
        faults.push(partition(rng, at, node));
        break;
      case 'hang':
        faults.push({
          type: 'hang',
          at,
          node: rng.pick(names.filter((n) => n !== 'w1')),
          key: 'kube-apiserver',
          duration: rng.int(10_000, 180_000),
          scope: hangScope.chance(1 / 3) ? 'starved' : 'process',
        });
        break;
      case 'kill':
        faults.push({ type: 'kill', at, node, key: 'kube-flannel' });
        break;
    }
    at += rng.int(0, 90_000);
  }
  // The app's sidecar beats at the policy's interval, or slower, up to window - 1s (declared).
  const beatInterval = rng.chance(0.5) ? undefined : rng.pick(['5s', '10s', '15s', '19s']);
  const doc: ScenarioInput = {
    name: `random-net-${seed}`,
    duration: at + 300_000,
    kubelet: kubeletOf(seed),
    nodes,
    parents: [rng.chance(0.5) ? shared(seed) : APISERVER, { key: 'kube-flannel', kind: 'app', ...(beatInterval ? { beatInterval } : {}) }],
    faults,
  };
  return scenarioOf(doc);
}

export function parseSeedRange(text: string): { from: number; to: number } | null {
  const m = /^(\d+)(?:\.\.(\d+))?$/.exec(text.trim());
  if (!m) return null;
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : Number(m[2]);
  return to >= from ? { from, to } : null;
}
