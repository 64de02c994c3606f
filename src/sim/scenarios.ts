// The named scenarios, written in the same structure as scenario files (see schema.ts), so each
// can be exported as YAML and edited. Times are strings as a user would write them.
import { parseScenario, type Scenario, type ScenarioInput } from './schema.js';

/** The api-server itself: its absence *is* the failure, so it is covered when unreachable. */
const apiserver = { key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } } as const;
/**
 * The api-server as deploy/base/policy.yaml recommends running it today: `--permit-port-sharing`
 * (SO_REUSEPORT) and `handover: overlap`, so the checkpoint serves until the parent is Ready.
 */
/**
 * The api-server as deploy/components/parent-kube-apiserver makes it: port sharing, `handover:
 * overlap`, and a 20 s preStop pause (grace 45 s): deleted, it serves on while its copy starts
 * beside it (src/core/deletion.ts).
 */
const sharedApiserver = {
  ...apiserver,
  portSharing: true,
  preStop: '20s',
  terminationGracePeriod: '45s',
  policy: { ...apiserver.policy, handover: 'overlap' },
} as const;
/** A node-level DaemonSet (a CNI agent): losing the api-server is not its death. */
const cni = { key: 'kube-flannel', kind: 'app', policy: { whenApiUnreachable: 'hold' } } as const;

const one = [{ name: 'm1', master: true }];
const three = [
  { name: 'm1', master: true },
  { name: 'm2', master: true },
  { name: 'm3', master: true },
];

/**
 * The kubelet of the background issue (kubelet-model.ts): the two stories whose point is the old
 * checkpointer's deadlock run on it, so the baselines still show that deadlock. Every other scenario
 * runs on the calibrated v1.36 model (the schema's default); `simulate --kubelet` swaps either way.
 */
const v15 = { model: 'v1.5' } as const;

export const NAMED: Record<string, ScenarioInput> = {
  'master-reboot': {
    name: 'master-reboot',
    description:
      'The single master, whose api-server is a self-hosted DaemonSet pod, reboots (the background issue), on the v1.5 kubelet model. With the kubelet v1.5 status cache, kubelet-pods deadlocks; lastseen recovers through hand-overs.',
    // Long enough for the slowest seeds: the hand-over back-off and the kubelet's crash-loop back-off
    // both double, and can stay in step for several rounds (up to about 20 minutes).
    duration: '30m',
    kubelet: v15,
    nodes: one,
    parents: [apiserver],
    faults: [{ type: 'reboot', at: '3m', node: 'm1', down: '40s' }],
    expect: { served: true, parentServed: true },
  },
  'delete-last-apiserver': {
    name: 'delete-last-apiserver',
    description: 'kubectl delete pod on the only api-server: it stops deliberately; the checkpoint covers until the DaemonSet pod is back.',
    duration: '15m',
    kubelet: v15,
    nodes: one,
    parents: [apiserver],
    faults: [{ type: 'delete-pod', at: '3m', key: 'kube-apiserver', node: 'm1' }],
    expect: { served: true, parentServed: true },
  },
  'rollout-delete-first': {
    name: 'rollout-delete-first',
    description: 'A healthy rollout of the api-server that deletes the old pod before the new one exists.',
    duration: '15m',
    nodes: one,
    parents: [apiserver],
    faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: true }],
    focus: { node: 'm1', key: 'kube-apiserver' },
    expect: { served: true, parentServed: true, checkpointGeneration: 2 },
  },
  'bad-rollout': {
    name: 'bad-rollout',
    description: 'A rollout whose new spec never becomes Ready: the checkpoint keeps (and serves) the last good spec.',
    duration: '15m',
    nodes: one,
    parents: [apiserver],
    faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: false }],
    focus: { node: 'm1', key: 'kube-apiserver' },
    expect: { served: true, parentServed: false, checkpointGeneration: 1 },
  },
  'multi-master-one-reboot': {
    name: 'multi-master-one-reboot',
    description: 'Three masters; one reboots while the other two keep the api-server available.',
    duration: '15m',
    nodes: three,
    parents: [apiserver, cni],
    faults: [{ type: 'reboot', at: '3m', node: 'm2', down: '40s' }],
    expect: { served: true, parentServed: true },
  },
  'full-cluster-reboot': {
    name: 'full-cluster-reboot',
    description: 'Every master loses power at once and comes back at slightly different times.',
    duration: '20m',
    nodes: three,
    parents: [apiserver, cni],
    faults: [
      { type: 'reboot', at: '3m', node: 'm1', down: '45s' },
      { type: 'reboot', at: '3m', node: 'm2', down: '60s' },
      { type: 'reboot', at: '3m', node: 'm3', down: '90s' },
    ],
    expect: { served: true, parentServed: true },
  },
  'api-partition': {
    name: 'api-partition',
    description: 'A worker loses the api-server for 10 minutes while its CNI pod is fine: a hold parent is not covered.',
    duration: '20m',
    nodes: [{ name: 'm1', master: true }, { name: 'w1' }],
    parents: [apiserver, cni],
    faults: [{ type: 'partition', at: '3m', node: 'w1', duration: '10m' }],
    focus: { node: 'w1', key: 'kube-flannel' },
    expect: { served: true, parentServed: true, noActivation: true, maxServedAt: '0s' },
  },
  'clock-skew': {
    name: 'clock-skew',
    description: 'Masters whose wall clocks disagree by minutes and drift; one steps back an hour. Nothing may activate.',
    duration: '15m',
    nodes: [
      { name: 'm1', master: true, skew: '-5m', driftPpm: 800 },
      { name: 'm2', master: true, skew: '7m', driftPpm: -800 },
      { name: 'm3', master: true, skew: '0s', driftPpm: 200 },
    ],
    parents: [apiserver, cni],
    faults: [{ type: 'clock-step', at: '3m', node: 'm1', step: '-1h' }],
    focus: { node: 'm1', key: 'kube-apiserver' },
    expect: { noActivation: true, maxServedAt: '0s' },
  },
  'stalled-watch': {
    name: 'stalled-watch',
    description: "The agent's Lease watch stops delivering for 5 minutes; live reads still work. A lease-only parent must not be covered.",
    duration: '15m',
    nodes: three,
    parents: [apiserver, { key: 'kube-scheduler', kind: 'app', policy: { channels: ['lease'] } }],
    faults: [{ type: 'stall-watch', at: '3m', node: 'm1', duration: '5m' }],
    focus: { node: 'm1', key: 'kube-scheduler' },
    expect: { noActivation: true, maxServedAt: '0s' },
  },
  'agent-restart-mid-handover': {
    name: 'agent-restart-mid-handover',
    description: 'The master reboots; the agent is killed while it hands the node back to the real api-server.',
    duration: '20m',
    nodes: one,
    parents: [apiserver],
    faults: [
      { type: 'reboot', at: '3m', node: 'm1', down: '40s' },
      // Reboot + kubelet + agent + checkpoint start (4m01s) + the kubelet's relist, at its pod
      // reflector's next try, 0-30 s later by seed: the hand-over runs from 4m02s-4m27s for 15-20 s.
      // 4m15s is inside it in the default seed and in about half the others (22 of seeds 1..40).
      { type: 'agent-restart', at: '4m15s', node: 'm1' },
    ],
    focus: { node: 'm1', key: 'kube-apiserver' },
    expect: { served: true, parentServed: true },
  },
};

// The same stories with the api-server as deploy/base/policy.yaml recommends running it when it can
// share its port: only the parent definition differs.
NAMED['master-reboot-overlap'] = {
  ...NAMED['master-reboot']!,
  name: 'master-reboot-overlap',
  description:
    'master-reboot with the api-server sharing its port (--permit-port-sharing) and handover: overlap: the parent starts beside its checkpoint, which retires only once the parent is Ready. On the calibrated v1.36 kubelet.',
  kubelet: { model: 'v1.36' },
  parents: [sharedApiserver],
  // The goal for a master reboot is 75 s unserved (the node is down 40 s of it). Seeds
  // 1..200 give p50 62.5 s, max 63.6 s: the node's 40 s, the kubelet's and the agent's start, the
  // copy's 15 s start, and 1 s while the parent, bound beside the copy, is not yet Ready (the
  // api-server binds about 1 s before Ready, measured: src/sim/model.ts apiserverBindLeadMs).
  expect: { served: true, parentServed: true, maxUnserved: '75s', maxParentServedAt: '3m' },
};
// A policy mistake an operator can make: `handover: overlap` for an api-server started without
// --permit-port-sharing. Its own spec then fails to bind beside the checkpoint; the agent says so
// (OverlapUnavailable) and hands over by release, as it would without overlap, instead of keeping
// the node on the checkpoint for good.
NAMED['overlap-without-port-sharing'] = {
  ...NAMED['master-reboot-overlap']!,
  name: 'overlap-without-port-sharing',
  description:
    "master-reboot-overlap with the api-server's port NOT shared although the policy says handover: overlap: after the first failed bind of the parent's own spec the agent falls back to a release hand-over.",
  parents: [{ ...sharedApiserver, portSharing: false }],
  expect: { served: true, parentServed: true, maxParentServedAt: '3m' },
};
// The real-node test bed's reboot (docs/real-node.md), for `npm run bench` to set the simulator's
// prediction beside the measured figures: one node, off about 3 s, the api-server self-hosted with
// port sharing and overlap, starting in about 3 s (etcd, then /readyz) and draining watches 3 s.
NAMED['testbed-reboot'] = {
  name: 'testbed-reboot',
  description:
    "The real-node test bed's power cycle (3 s off), on the calibrated kubelet, with the test bed's api-server (shared port, overlap hand-over, ~3 s start).",
  duration: '10m',
  kubelet: { model: 'v1.36' },
  nodes: one,
  parents: [{ ...sharedApiserver, startTime: '3s', stopTime: '3s' }],
  faults: [{ type: 'reboot', at: '3m', node: 'm1', down: '3s' }],
  expect: { served: true, parentServed: true },
};
NAMED['bad-rollout-overlap'] = {
  ...NAMED['bad-rollout']!,
  name: 'bad-rollout-overlap',
  description:
    'bad-rollout with port sharing and handover: overlap: the crashing spec shares the port and takes its share of the connections until its first exit makes it known-bad; the checkpoint then holds the port without sharing.',
  parents: [sharedApiserver],
  // The goal is 60 s unserved, met (seeds 1..200: 46.4-46.9 s): 15.5 s of the checkpoint's
  // start after the old pod's deletion, 1 s while the bad spec's first run is bound beside it before
  // it crashes (its exit is the verdict), and about 30 s to replace the shared copy by an exclusive
  // one (the old copy's 15 s drain, then the new copy's 15 s start).
  expect: { ...NAMED['bad-rollout']!.expect, maxUnserved: '60s' },
};
// The bad spec the real beds roll out: a kube-apiserver whose etcd address is a dead port binds at
// once, answers nothing while it waits for its storage and exits after about 20 s. Each of its starts
// holds its share of the shared port silently for 20 s (the crash-fast spec above: 1 s), until the
// verdict (its fourth exit, OVERLAP_EXITS_FOR_VERDICT) rewrites the copy without sharing.
NAMED['bad-rollout-silent-overlap'] = {
  ...NAMED['bad-rollout-overlap']!,
  name: 'bad-rollout-silent-overlap',
  description:
    'bad-rollout-overlap with the bad spec of the real beds: it binds at once, answers nothing and exits after 20 s (an api-server with a dead etcd address), holding its share of the port silently at every start until the verdict.',
  faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: false, bindTime: '1s', startTime: '21s' }],
  // Seeds 1..30: 101.2 s unserved in every seed (four silent shares of 20 s, then the rewrite);
  // a guard against it getting worse, not a goal (docs/coverage.md).
  expect: { served: true, parentServed: false, maxUnserved: '120s' },
};
// A start that hangs for good: a new spec that binds, answers nothing and never exits (no startup
// or liveness probe restarts it; under port sharing one that did would pass on the copy's answers).
// Beside the Ready copy it is fenced after START_HUNG_MS of silence (StartHung, src/core/fence.ts);
// each fence is an exit, and the fourth is the spec's verdict.
NAMED['silent-start-overlap'] = {
  ...NAMED['bad-rollout-overlap']!,
  name: 'silent-start-overlap',
  description:
    'A rollout of a spec whose start hangs for good (it binds, answers nothing and never exits), port sharing and handover: overlap: beside its Ready checkpoint it is fenced after a minute of silence, each fence an exit toward its verdict.',
  duration: '20m',
  faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: false, bindTime: '1s', startTime: '2h' }],
  // Seed 1: 273.1 s (four silent minutes, then the verdict's rewrite); before StartHung it never ended.
  expect: { served: true, parentServed: false, maxUnserved: '300s' },
};
NAMED['bad-then-good-rollout-overlap'] = {
  ...NAMED['bad-rollout-overlap']!,
  name: 'bad-then-good-rollout-overlap',
  description:
    'bad-rollout-overlap, then a rollout that fixes it: the verdict ends with the spec, the checkpoint shares its port again and the new spec takes over beside it.',
  duration: '20m',
  faults: [
    { type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: false },
    { type: 'rollout', at: '8m', key: 'kube-apiserver', healthy: true },
  ],
  expect: { served: true, parentServed: true, checkpointGeneration: 3 },
};
// The other stories with the api-server as deploy/base/policy.yaml recommends it (handover: overlap).
NAMED['agent-restart-mid-handover-overlap'] = {
  ...NAMED['agent-restart-mid-handover']!,
  name: 'agent-restart-mid-handover-overlap',
  description:
    'agent-restart-mid-handover with the api-server sharing its port and handover: overlap: the agent is killed while the parent starts beside its checkpoint.',
  parents: [sharedApiserver],
  faults: [
    { type: 'reboot', at: '3m', node: 'm1', down: '40s' },
    // On v1.36 the parent starts beside its checkpoint 62-87 s after the fault (the kubelet's relist,
    // by seed) and is Ready 15 s later: 4m15s is while it starts in the default seed and about half the others.
    { type: 'agent-restart', at: '4m15s', node: 'm1' },
  ],
  expect: { served: true, parentServed: true, maxUnserved: '75s', maxParentServedAt: '3m' },
};
NAMED['full-cluster-reboot-overlap'] = {
  ...NAMED['full-cluster-reboot']!,
  name: 'full-cluster-reboot-overlap',
  description: 'full-cluster-reboot with the api-server sharing its port and handover: overlap.',
  parents: [sharedApiserver, cni],
  // The goal: unserved at most the time the focus node (m1) is down, 45 s, plus 35 s.
  expect: { ...NAMED['full-cluster-reboot']!.expect, maxUnserved: '80s' },
};

// Rollouts on three masters, as the DaemonSet controller does them (src/sim/daemonset.ts): one node
// at a time by node name (maxUnavailable 1, the default), the next only once the new pod is Ready
// in the api-server's view. docs/rollouts.md has their figures.
const rollout3 = (name: string, description: string, parents: ScenarioInput['parents'], healthy: boolean, expect: ScenarioInput['expect']): ScenarioInput => ({
  name,
  description,
  duration: '15m',
  nodes: three,
  parents,
  faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', healthy }],
  focus: { node: 'm1', key: 'kube-apiserver' },
  expect,
});
NAMED['rollout-three-masters'] = rollout3(
  'rollout-three-masters',
  'A healthy rollout of the api-server on three masters: the DaemonSet controller replaces m1, m2, m3 in turn (delete first), each once the last new pod is Ready.',
  [apiserver, cni],
  true,
  { served: true, parentServed: true, checkpointGeneration: 2 },
);
NAMED['bad-rollout-three-masters'] = rollout3(
  'bad-rollout-three-masters',
  'A rollout whose new spec never becomes Ready, on three masters: the controller stalls after m1 (its checkpoint serves the old spec); m2 and m3 keep theirs.',
  [apiserver, cni],
  false,
  { served: true, parentServed: false, checkpointGeneration: 1 },
);
NAMED['rollout-three-masters-overlap'] = rollout3(
  'rollout-three-masters-overlap',
  'rollout-three-masters with the api-server sharing its port and handover: overlap.',
  [sharedApiserver, cni],
  true,
  { served: true, parentServed: true, checkpointGeneration: 2 },
);
NAMED['bad-rollout-three-masters-overlap'] = rollout3(
  'bad-rollout-three-masters-overlap',
  'bad-rollout-three-masters with the api-server sharing its port and handover: overlap.',
  [sharedApiserver, cni],
  false,
  { served: true, parentServed: false, checkpointGeneration: 1 },
);
NAMED['surge-rollout-three-masters'] = {
  ...NAMED['rollout-three-masters-overlap']!,
  name: 'surge-rollout-three-masters',
  description:
    'A healthy rollout with maxSurge 1 (maxUnavailable 0) of an api-server sharing its port: the new pod starts beside the old one, which is deleted once the new one is Ready.',
  faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: true, maxSurge: 1, maxUnavailable: 0 }],
};

// ---- coverage without blind spots: a hung parent, a reboot mid-hand-over, a rollout that stumbles ----

// A kube-apiserver that hangs holding its port (a deadlock, a stuck disk): it neither serves nor
// answers, its sidecar runs on and reports the probe that gets no answer. lastseen fences it
// (src/core/fence.ts): under overlap once its copy serves beside it, under release at once (the
// kubelet restarts it). Without lastseen only the kubelet's liveness probe restarts it (~2 min).
NAMED['apiserver-hang'] = {
  name: 'apiserver-hang',
  description:
    "The only master's api-server (port sharing, handover: overlap) hangs holding its port for 2 minutes; its sidecar reports the probe that gets no answer. lastseen activates the copy and, once it serves, fences the hung process.",
  duration: '15m',
  kubelet: { model: 'v1.36' },
  nodes: one,
  parents: [sharedApiserver],
  faults: [{ type: 'hang', at: '3m', key: 'kube-apiserver', node: 'm1', duration: '2m' }],
  focus: { node: 'm1', key: 'kube-apiserver' },
  expect: { served: true, parentServed: true, maxUnserved: '30s' },
};
NAMED['apiserver-hang-release'] = {
  ...NAMED['apiserver-hang']!,
  name: 'apiserver-hang-release',
  description:
    'apiserver-hang with handover: release: the hung process holds the whole port, so no copy could bind; lastseen fences it at once and the kubelet restarts it.',
  parents: [apiserver],
};
// The same api-server on a node short of CPU: it holds its port and answers nothing in time, as a
// hung one, but its sidecar sees it waiting for a CPU (Beat.starved). Fencing it would free no CPU
// (its restart costs more) and, on the three-node test bed at load 45-70, took every healthy
// api-server from the load balancer. lastseen leaves it alone for 90 s: no fence, no activation.
NAMED['apiserver-starved'] = {
  ...NAMED['apiserver-hang']!,
  name: 'apiserver-starved',
  description:
    "The only master's api-server (port sharing, handover: overlap) is starved of CPU for 90 s: it answers nothing in time, and its sidecar sees it waiting for a CPU. Slow, not hung: lastseen neither fences it nor activates its copy.",
  duration: '10m',
  faults: [{ type: 'hang', at: '3m', key: 'kube-apiserver', node: 'm1', duration: '90s', scope: 'starved' }],
  expect: { served: true, parentServed: true },
};
// A second power cycle while a release hand-over is in progress: the first reboot's recovery hands
// the node back, and the master loses power again while the parent starts. A boot voids deadlines:
// the saved hand-over is not resumed after the second boot.
NAMED['reboot-mid-handover'] = {
  name: 'reboot-mid-handover',
  description:
    'The master reboots; while the release hand-over back to the real api-server is in progress it reboots again. The hand-over saved under the first boot is void after the second.',
  duration: '20m',
  kubelet: { model: 'v1.36' },
  nodes: one,
  parents: [apiserver],
  faults: [
    { type: 'reboot', at: '3m', node: 'm1', down: '40s' },
    // v1.36: the copy serves about 61 s after the fault, and the release hand-over to the starting
    // parent runs from about 80 s to 125 s after it (seed 1: 4m20.7s to 5m05.7s); 4m40s is inside it.
    { type: 'reboot', at: '4m40s', node: 'm1', down: '40s' },
  ],
  focus: { node: 'm1', key: 'kube-apiserver' },
  expect: { served: true, parentServed: true },
};
NAMED['reboot-loop'] = {
  name: 'reboot-loop',
  description: 'A master that reboots every 60 s for 10 minutes (a flapping power supply), then stays up.',
  duration: '25m',
  kubelet: { model: 'v1.36' },
  nodes: one,
  parents: [apiserver],
  faults: Array.from({ length: 10 }, (_, i) => ({ type: 'reboot' as const, at: `${3 + i}m`, node: 'm1', down: '20s' })),
  focus: { node: 'm1', key: 'kube-apiserver' },
  expect: { served: true, parentServed: true },
};
// A rolling OS update of three masters whose kubelets ask their own node's api-server (kubeadm's
// control-plane kubelets since v1.33): after each reboot the other two answer the agent through the
// load balancer, but the node's kubelet learns nothing until something serves on its node. The
// agent finds the kubelet's node Lease not renewed since the boot and covers at once
// (`KubeletBlind`, src/core/boot.ts) instead of waiting out startupGrace for a parent that cannot
// start. The next master goes down once the last one's parent serves again (2m30s apart).
NAMED['rolling-reboot-local-kubelets'] = {
  name: 'rolling-reboot-local-kubelets',
  description:
    "Three masters rebooted one at a time (a rolling OS update), their kubelets asking their own node's api-server: each rebooted node's kubelet is blind until its copy serves.",
  duration: '15m',
  kubelet: { model: 'v1.36', api: 'local' },
  nodes: three,
  parents: [sharedApiserver],
  faults: [
    { type: 'reboot', at: '3m', node: 'm1', down: '5s' },
    { type: 'reboot', at: '5m30s', node: 'm2', down: '5s' },
    { type: 'reboot', at: '8m', node: 'm3', down: '5s' },
  ],
  focus: { node: 'm1', key: 'kube-apiserver' },
  expect: { served: true, parentServed: true },
};
// A good spec that crashes twice while it starts (a dependency not ready yet), then runs: its
// first exit beside the sharing copy is a strike, and probation lets it try again.
NAMED['stumbling-rollout'] = {
  name: 'stumbling-rollout',
  description:
    'A rollout of a good api-server spec (port sharing, handover: overlap) that crashes in its first two starts (a dependency not ready), then runs. Probation, not a ban: it serves alone within minutes.',
  duration: '30m',
  kubelet: { model: 'v1.36' },
  nodes: one,
  parents: [sharedApiserver],
  faults: [{ type: 'rollout', at: '3m', key: 'kube-apiserver', healthy: true, crashes: 2 }],
  focus: { node: 'm1', key: 'kube-apiserver' },
  expect: { served: true, parentServed: true, checkpointGeneration: 2 },
};

// The same stories with the api-server behind the node-local redirect (`handover: redirect`,
// docs/decisions/0012-one-listener-per-port.md): the copy serves on a port of its own, the parent binds its port without
// the copy beside it, and the node sends new connections to the copy while the parent is not
// proven Ready. The parent still binds with SO_REUSEPORT, for its own successor: a DaemonSet surge
// starts the new pod beside the old one. Only the parent definition differs (and what each story
// is expected to show).
const redirectApiserver = {
  ...apiserver,
  portSharing: true,
  preStop: '20s',
  terminationGracePeriod: '45s',
  policy: { ...apiserver.policy, handover: 'redirect', redirect: { port: 6443, copyPort: 16443 } },
} as const;
// A bad spec behind the redirect receives no connection: its rollout costs the node's clients
// nothing (seeds 1..30: 0 s unserved in every seed, where overlap costs 46-101 s).
const heldRollout = { served: true, parentServed: false, maxUnserved: '5s' } as const;
const REDIRECT_VARIANTS: Array<[string, string, ScenarioInput['expect']?]> = [
  ['master-reboot-overlap', 'master-reboot-redirect'],
  ['bad-rollout-overlap', 'bad-rollout-redirect', heldRollout],
  ['bad-rollout-silent-overlap', 'bad-rollout-silent-redirect', heldRollout],
  ['silent-start-overlap', 'silent-start-redirect', heldRollout],
  ['apiserver-hang', 'apiserver-hang-redirect'],
  ['reboot-mid-handover', 'reboot-mid-handover-redirect'],
  ['reboot-loop', 'reboot-loop-redirect'],
  ['rolling-reboot-local-kubelets', 'rolling-reboot-local-kubelets-redirect'],
  ['stumbling-rollout', 'stumbling-rollout-redirect'],
  ['full-cluster-reboot-overlap', 'full-cluster-reboot-redirect'],
  ['bad-rollout-three-masters-overlap', 'bad-rollout-three-masters-redirect'],
];
for (const [from, name, expect] of REDIRECT_VARIANTS) {
  const base = NAMED[from]!;
  NAMED[name] = {
    ...base,
    name,
    description: `${from} with the api-server behind the node-local redirect (handover: redirect): its copy serves on a port of its own, and the node sends new connections to it while the parent is not proven Ready.`,
    parents: base.parents.map((x) => (x.key === 'kube-apiserver' ? redirectApiserver : x)),
    ...(expect ? { expect } : {}),
  };
}

export const SCENARIO_NAMES = Object.keys(NAMED);

export function namedScenario(name: string): Scenario | null {
  const doc = NAMED[name];
  if (!doc) return null;
  const r = parseScenario(doc);
  if (!r.ok) throw new Error(`named scenario ${name} is invalid: ${r.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`);
  return r.scenario;
}
