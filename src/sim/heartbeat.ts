// The heartbeat sidecar of a parent pod or of a checkpoint copy, running the real heartbeat logic
// (src/heartbeat/beat.ts). Every interval it probes its main container (Ready: running and past
// its start) and writes one round of beats: the local file on the node's tmpfs, and the Lease or
// annotation into the api-server when the node reaches one. It lives as long as its pod: a native
// sidecar keeps beating `Starting` while the main container crash-loops. On removal it writes a
// last `Stopping` round, as the real sidecar does on SIGTERM. While the main process hangs (fault
// `hang`) it writes nothing: the model's hang is one that stops the heartbeat with the service.
import { leaseName, localBeatFile } from '../core/names.js';
import type { Channel, Role } from '../core/types.js';
import { advance, type BeatCounter, choosePhase, type HeartbeatIdentity, nextBeat } from '../heartbeat/beat.js';
import type { KPod } from './kubelet.js';
import type { SimNode } from './model.js';
import { T } from './model.js';
import { arrivalInOrder } from './network.js';
import type { World } from './world.js';

export function startSidecar(world: World, node: SimNode, pod: KPod): () => void {
  const spec = pod.spec!;
  const def = world.parentDef(spec.key);
  const policy = def.policy;
  const role: Role = pod.role === 'checkpoint' ? 'checkpoint' : 'parent';
  const id: HeartbeatIdentity = { namespace: spec.namespace, podName: pod.name, podUid: pod.uid, key: spec.key, node: node.name, role };
  const bootId = node.bootId;
  let counter: BeatCounter = { sequence: 1 };
  /** When the last write of each channel lands (true time). */
  const landsAt: Partial<Record<Channel, number>> = {};
  let stopped = false;
  const rng = world.rng(`sidecar/${pod.uid}`);

  const round = (stopping: boolean) => {
    // A whole hung pod (fault `hang`, scope pod: frozen with its sidecar) writes nothing, not even a
    // last Stopping beat. A hung process (scope process) leaves its sidecar running: its probe gets
    // no answer, and its beats say so (`unanswered`, src/core/fence.ts).
    if (pod.hung && pod.hungWhole) return;
    const now = world.q.now;
    const unanswered = pod.hung && !pod.removed;
    const ready = !unanswered && pod.state === 'running' && !pod.removed;
    const phase = choosePhase(ready ? { ok: true } : { ok: false, error: unanswered ? 'no answer' : 'main container not ready' }, stopping);
    // A write lands once its request arrives (network.ts); the node's agent sees it only while it
    // talks to the api-server both ways (its probe and its watch).
    const reach = world.api.writesFrom(node);
    for (const channel of policy.channels) {
      const beat = nextBeat(counter, id, channel, phase, node.clock.wall(now), def.beatIntervalMs, false, unanswered);
      if (channel === 'local') {
        node.files.set(localBeatFile(spec.namespace, spec.key, role), beat);
        world.onLocalBeat(node);
        continue;
      }
      if (!reach) continue;
      const name = leaseName(spec.key, node.name, role); // annotation beats are keyed the same way in the model
      // One connection per channel: a write never lands before the one sent before it.
      const at = arrivalInOrder(now, T.apiRttMs / 2 + world.net.toApiMs(node), landsAt[channel] ?? 0);
      landsAt[channel] = at;
      world.q.at(at, () => {
        if (world.api.writesFrom(node)) world.api.writeBeat(channel, name, { node: node.name, namespace: spec.namespace, key: spec.key, beat });
      });
    }
    if (role === 'parent') world.invariants.parentBeat(node, spec.key, phase, reach && (world.net.whole || world.api.reachableFrom(node)));
    counter = advance(counter);
  };

  const loop = () => {
    if (stopped || !node.up || node.bootId !== bootId) return;
    round(false);
    world.q.after(def.beatIntervalMs, loop);
  };
  // Production's loop (src/heartbeat/loop.ts) writes its first round as soon as it runs, then one
  // every interval; the sidecar's own process start comes first.
  world.q.after(rng.between(T.sidecarStartMs.min, T.sidecarStartMs.max), loop);
  return () => {
    if (stopped || !node.up || node.bootId !== bootId) return;
    stopped = true;
    round(true);
  };
}
