// Checkpointing strategies, pluggable. Each runs as the agent process on a node (started by the
// kubelet from the agent's always-present static manifest, stopped by reboots and restarts).
// - lastseen: the production agent loop (src/agent/agent.ts) on the simulator's ports (./lastseen.ts).
// - kubelet-pods: the checkpointer of docs/reboot-story.md. Every few seconds it
//   asks the local kubelet's `/pods`, which repeats only what the kubelet last managed to report
//   to an api-server; it activates the checkpoint when the parent isn't listed as running and
//   deactivates it when it is. It copies the parent from the api-server whenever it sees it
//   running: no notion of Ready, no hand-over.
// - runtime-poll: judges "running" from the container runtime (the truth, not a report), acts on
//   a 5s poll, activates after 1 min of not running, deactivates as soon as the parent runs.
import { manifestFile, parentId } from '../core/names.js';
import type { StoredBeat } from './apiserver.js';
import { SimLastseen } from './lastseen.js';
import type { SimNode } from './model.js';
import type { World } from './world.js';

export const STRATEGIES = ['lastseen', 'kubelet-pods', 'runtime-poll'] as const;
export type StrategyName = (typeof STRATEGIES)[number];

/** What the world tells a running agent process. */
export interface AgentProcess {
  onApiBeat?(sb: StoredBeat): void;
  /** A local beat file was written on this node (inotify). */
  onLocalBeat?(): void;
  onPodsChanged?(): void;
  onWatchResumed?(): void;
  /** Something other than the agent changed the static-pod folder (inotify). */
  onManifestsChanged?(): void;
}

export type StartAgent = (world: World, node: SimNode, alive: () => boolean) => AgentProcess;

/** How often the old checkpointers polled. */
const POLL_MS = 5_000;
/** runtime-poll: how long a parent must be seen not running before its checkpoint is activated. */
const RUNTIME_GRACE_MS = 60_000;

function pollingAgent(name: string, isRunning: (world: World, node: SimNode, key: string) => boolean, graceMs: number): StartAgent {
  return (world, node, alive) => {
    const downSince = new Map<string, number>();
    world.log(node.name, 'agent', `${name} checkpointer started`);
    const poll = () => {
      if (!alive()) return;
      for (const def of world.parentsOn(node.name)) {
        const id = parentId(def.namespace, def.key);
        const file = manifestFile(def.namespace, def.key);
        const running = isRunning(world, node, def.key);
        const active = node.disk.manifests.has(file);
        const stored = node.disk.checkpoints.get(id);
        const now = world.q.now;
        if (running) {
          downSince.delete(def.key);
          const pod = world.api.reachableFrom(node) ? world.api.podFor(node.name, def.key) : null;
          if (pod && stored?.spec.hash !== pod.spec.hash) {
            node.disk.checkpoints.set(id, { spec: pod.spec });
            world.log(node.name, 'agent', `${name}: parent listed as running; copied generation ${pod.spec.generation} as the checkpoint`, def.key);
          }
          if (active) {
            node.disk.manifests.delete(file);
            world.log(node.name, 'agent', `${name}: parent listed as running; deactivated the checkpoint`, def.key);
          }
          continue;
        }
        if (!downSince.has(def.key)) downSince.set(def.key, now);
        if (!active && stored && now - downSince.get(def.key)! >= graceMs) {
          node.disk.manifests.set(file, { role: 'checkpoint', spec: stored.spec });
          world.log(node.name, 'agent', `${name}: parent not listed as running; activated the checkpoint`, def.key);
        }
      }
      world.q.after(POLL_MS, poll);
    };
    poll();
    return {};
  };
}

const kubeletPods = pollingAgent(
  'kubelet-pods',
  (world, node, key) =>
    world.kubelets
      .get(node.name)!
      .listPods()
      .some((p) => p.key === key && p.role === 'parent' && p.state === 'running'),
  0,
);

const runtimePoll = pollingAgent(
  'runtime-poll',
  (world, node, key) =>
    [...world.kubelets.get(node.name)!.pods.values()].some(
      (p) => p.role === 'parent' && p.spec?.key === key && !p.removed && (p.state === 'starting' || p.state === 'running'),
    ),
  RUNTIME_GRACE_MS,
);

export const startAgentFor: Record<StrategyName, StartAgent> = {
  lastseen: (world, node, alive) => new SimLastseen(world, node, alive),
  'kubelet-pods': kubeletPods,
  'runtime-poll': runtimePoll,
};
