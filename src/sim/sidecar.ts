// The heartbeat sidecar of a parent pod or of a checkpoint copy: production's sidecar (runSidecar,
// src/heartbeat/loop.ts: the heartbeat loop and a parent's fence responder, src/heartbeat/fence.ts)
// on one simulated pod. Only adapters are here, each behind the port production defines:
// - Clock (src/channels/channel.ts, cut from src/core/time.ts's Time): the node's monotonic and
//   wall clocks, timers on the event queue at the true time a monotonic delay ends on this node;
// - BeatWriter `local`: the node's tmpfs (node.files), with the agent's folder notification;
// - BeatClient (src/kube/beat-client.ts) for production's Lease and annotation writers
//   (LeaseChannel, AnnotationChannel): the model api-server's objects, each request landing a
//   one-way trip later and answered a trip after that, given up at the light client's timeout
//   (src/sim/beat-client.ts);
// - the probe: the model container (Ready: running and past its start; a hung process gives no
//   answer, instantly: the model has no probe timeout);
// - FenceFiles: the fence request and answer files in the node's heartbeat folder (fenceFolder
//   (fence-folder.ts, which the agent's fence actuator in lastseen.ts writes and reads);
// - the port's holders and the process killer: the model pod's own container (its run is its pid)
//   and the kubelet's exit.
// The process: it starts a moment after its container (T.sidecarStartMs), gets SIGTERM when its pod
// is removed (the loop's last Stopping round), and dies with the node: after a reboot its timers
// are dropped. While its whole pod is frozen (fault `hang`, scope pod) nothing in it runs: its
// timers and folder notifications wait for the thaw, and nothing it was writing gets out.
import pino from 'pino';
import { AnnotationChannel } from '../channels/annotation.js';
import { type BeatWriter, type Clock, clockOf } from '../channels/channel.js';
import { LeaseChannel, type LeaseTarget } from '../channels/lease.js';
import { localBeatFile } from '../core/names.js';
import type { Time } from '../core/time.js';
import type { Beat, Channel, Role } from '../core/types.js';
import type { HeartbeatIdentity, ProbeResult } from '../heartbeat/beat.js';
import type { FenceDeps } from '../heartbeat/fence.js';
import { MAX_REQUEST_TIMEOUT_MS, REQUEST_TIMEOUT_FRACTION } from '../heartbeat/heartbeat.js';
import { runSidecar } from '../heartbeat/loop.js';
import { simBeatClient } from './beat-client.js';
import { fenceFolder } from './fence-folder.js';
import type { KPod } from './kubelet.js';
import { type SimNode, T } from './model.js';
import type { Scheduled } from './queue.js';
import type { World } from './world.js';

/** The sidecar's own logs stay out of the timeline (the beats show in the agent's). */
const SILENT = pino({ level: 'silent' });

/** What the kubelet holds of a pod's sidecar process. */
export interface SidecarProcess {
  /** SIGTERM: the pod is being removed (the last round says Stopping). */
  stop(): void;
  /** The pod is no longer frozen: what waited runs now. */
  thaw(): void;
}

/** The exit message of a container its sidecar fenced. */
export const FENCED = 'fenced by lastseen (its process held the port without answering): SIGKILL';

/** The probe's answers, made once (a sidecar probes every round). */
const READY = Promise.resolve<ProbeResult>({ ok: true });
const NOT_READY = Promise.resolve<ProbeResult>({ ok: false, error: 'main container not ready' });
const NO_ANSWER = Promise.resolve<ProbeResult>({ ok: false, error: 'main container: no answer within the probe timeout', unanswered: true });
const STARVED = Promise.resolve<ProbeResult>({
  ok: false,
  error: 'main container: no answer within the probe timeout; its process waited for a CPU: starved, not hung',
  unanswered: true,
  starved: true,
});
export const SENT = Promise.resolve();

export function startSidecar(world: World, node: SimNode, pod: KPod): SidecarProcess {
  const spec = pod.spec!;
  const role: Role = pod.role === 'checkpoint' ? 'checkpoint' : 'parent';
  const def = world.parentDef(spec.key);
  const bootId = node.bootId;
  const identity: HeartbeatIdentity = { namespace: spec.namespace, podName: pod.name, podUid: pod.uid, key: spec.key, node: node.name, role };
  const alive = () => node.up && node.bootId === bootId;
  const frozen = () => pod.hung && pod.hungWhole;
  /** Timers and notifications that came while the pod was frozen, in order. */
  let parked: Array<() => void> = [];
  /** Every way into the process: a dead one runs nothing, a frozen one waits, and what runs may continue in promise callbacks. */
  const enter = (fn: () => void) => {
    if (!alive()) return;
    if (frozen()) {
      parked.push(fn);
      return;
    }
    fn();
    world.promised();
  };

  const time: Time = {
    now: () => node.clock.mono(world.q.now),
    wallNow: () => node.clock.wall(world.q.now),
    set: (fn, ms) => world.q.at(node.clock.trueAt(node.clock.mono(world.q.now) + ms), () => enter(fn)),
    clear: (h) => (h as Scheduled).cancel(),
  };

  const probe = (): Promise<ProbeResult> => {
    if (pod.hung && !pod.removed) return pod.starved ? STARVED : NO_ANSWER;
    if (spec.silentStart && pod.bound && pod.state !== 'running' && !pod.removed) return NO_ANSWER;
    return pod.state === 'running' && !pod.removed ? READY : NOT_READY;
  };

  /**
   * The probed port is held by the main container's process (its pid: the container's current run):
   * a host port once bound, or, for a pod without host ports, one in its own network namespace
   * while its process runs.
   */
  const holdsProbedPort = () => !pod.removed && pod.state !== 'waiting' && (spec.ports.length === 0 || pod.bound);

  const clock = clockOf(time);
  const writers = def.policy.channels.map((channel) =>
    channel === 'local' ? localWriter(world, node, pod, role) : apiWriter(world, node, pod, role, channel, clock, enter),
  );
  const fence: FenceDeps | null =
    role === 'parent' && def.policy.channels.includes('local')
      ? {
          files: fenceFolder(world, node).filesOf(spec.namespace, spec.key, enter),
          podUid: pod.uid,
          probe,
          portHolders: () => (holdsProbedPort() ? [pod.runId] : []),
          kill: (pid) => {
            const k = world.kubelets.get(node.name);
            if (k?.pods.get(pod.uid) !== pod || pod.runId !== pid || !holdsProbedPort())
              throw Object.assign(new Error(`kill ${pid}: no such process`), { code: 'ESRCH' });
            k.exit(pod, FENCED);
          },
        }
      : null;

  let sidecar: { stop(): Promise<void> } | null = null;
  let stopped = false;
  // The sidecar's own process start comes first; production's loop then writes its first round at once.
  const startMs = world.rng(`sidecar/${pod.uid}`).between(T.sidecarStartMs.min, T.sidecarStartMs.max);
  world.q.after(startMs, () =>
    enter(() => {
      if (stopped) return;
      sidecar = runSidecar({ identity, intervalMs: def.beatIntervalMs, writers, probe, clock, logger: SILENT, fence });
    }),
  );
  return {
    stop: () =>
      enter(() => {
        stopped = true;
        void sidecar?.stop();
      }),
    thaw: () => {
      const waiting = parked;
      parked = [];
      for (const fn of waiting) enter(fn);
    },
  };
}

/** The local channel: the beat file on the node's tmpfs, and the agent's folder notification. */
function localWriter(world: World, node: SimNode, pod: KPod, role: Role): BeatWriter {
  const spec = pod.spec!;
  const file = localBeatFile(spec.namespace, spec.key, role);
  return {
    channel: 'local',
    write: (beat: Beat) => {
      if (pod.hung && pod.hungWhole) return SENT;
      node.files.set(file, beat);
      world.onLocalBeat(node);
      if (role === 'parent') world.invariants.parentBeat(node, spec.key, beat.phase, true);
      return SENT;
    },
  };
}

/** A Lease or annotation channel: production's writer, its requests answered by the model api-server. */
function apiWriter(world: World, node: SimNode, pod: KPod, role: Role, channel: Channel, clock: Clock, enter: (fn: () => void) => void): BeatWriter {
  const spec = pod.spec!;
  const def = world.parentDef(spec.key);
  // The sidecar's own request timeout (src/heartbeat/heartbeat.ts).
  const requestTimeoutMs = Math.min(MAX_REQUEST_TIMEOUT_MS, Math.floor(def.beatIntervalMs * REQUEST_TIMEOUT_FRACTION));
  const makeClient = () => simBeatClient({ world, node, pod, role, requestTimeoutMs, enter });
  const rng = world.rng(`sidecar/${pod.uid}/${channel}`);
  const random = () => rng.next();
  if (channel === 'lease') {
    const target: LeaseTarget = { namespace: spec.namespace, key: spec.key, node: node.name, role, windowMs: def.policy.windowMs };
    return new LeaseChannel({ target, makeClient, clock, random });
  }
  return new AnnotationChannel({ namespace: spec.namespace, podName: pod.name, makeClient, clock, random });
}
