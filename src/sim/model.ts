// Shared shapes of the simulated world: pod specs, the node's disk and tmpfs, and the handful of
// timing constants the model's mechanics use (each with the reason for its value).
import type { Beat, Role } from '../core/types.js';
import type { NodeClock } from './clock.js';
import type { Delay } from './network.js';

/** What a container image does, reduced to what matters for checkpointing. */
export interface PodSpec {
  namespace: string;
  key: string;
  /** Spec generation (1, 2, ... per rollout) and its hash. */
  generation: number;
  hash: string;
  /** Serves the api-server: its readiness is the api-server's availability. */
  apiServer: boolean;
  /** Host ports bound at start; a second binder fails and exits (api-server >= 1.5 behaviour). */
  ports: number[];
  /**
   * Binds with SO_REUSEPORT (kube-apiserver's `--permit-port-sharing`): it binds beside another
   * sharer, and both serve. A non-sharer still fails on a port anyone holds, and vice versa.
   */
  portSharing: boolean;
  /** From process start to Ready. */
  startMs: number;
  /** From process start to binding its host ports (at most startMs). */
  bindMs: number;
  /**
   * Between its bind and its start it answers nothing at all (a listener that accepts nothing, as a
   * kube-apiserver waiting for its storage): its sidecar's probe times out (`unanswered`). Absent:
   * it answers, not Ready.
   */
  silentStart?: boolean;
  /**
   * A copy written for `handover: redirect`: it serves on a port of its own and stands in for the
   * parent's port `copyFor`, reached only while the node redirects that port to it.
   */
  copyFor?: number;
  /** A bad build crashes at the end of its start instead of becoming Ready. */
  healthy: boolean;
  /** A good build that stumbles: each pod crashes at the end of its first `crashes` starts (absent: 0). */
  crashes?: number;
  /**
   * Graceful termination: from the kubelet's SIGTERM until the process exits. The container stops
   * being Ready at once (an api-server stops serving), but keeps its host ports bound until it exits.
   */
  stopMs: number;
  /** terminationGracePeriodSeconds: SIGKILL this long after SIGTERM, whatever stopMs says. */
  gracePeriodMs: number;
  /**
   * The main container's preStop pause: deleted, it serves this long before its SIGTERM (within
   * the grace period, which it uses up). 0: none; a checkpoint copy has none.
   */
  preStopMs: number;
}

export type PodRole = Role | 'agent';

/** A stored checkpoint (the sanitized copy on the node's disk). */
export interface StoredCheckpoint {
  spec: PodSpec;
}

/** A static-pod manifest in the kubelet's directory. */
export interface Manifest {
  role: PodRole;
  spec: PodSpec | null;
  /** A checkpoint written without port sharing (the copy's spec then has portSharing false). */
  exclusive?: boolean;
  /** Changed by something other than lastseen (a fault): not what the agent wrote. */
  tampered?: boolean;
}

/**
 * The static-pod folder: a Map that tells its watcher (an inotify kubelet) about every write and
 * removal, whoever makes them.
 */
export class ManifestFolder extends Map<string, Manifest> {
  onChange: (() => void) | null = null;

  override set(file: string, m: Manifest): this {
    super.set(file, m);
    this.onChange?.();
    return this;
  }

  override delete(file: string): boolean {
    const had = super.delete(file);
    if (had) this.onChange?.();
    return had;
  }
}

export interface NodeDisk {
  /** /etc/kubernetes/manifests: file name -> manifest. Survives reboots. */
  manifests: ManifestFolder;
  /**
   * containerd's container records (/var/lib/containerd): pods that have had a container on this
   * node and not been removed since, with its restart count. Survives reboots; an inotify-era kubelet
   * counts such a left-over exited container in its crash-loop back-off, and every kubelet starts it
   * again with the count raised by one, its last exit `Unknown` (measured on the real node).
   */
  containers: Map<string, number>;
  /** /var/lib/lastseen/checkpoints: parent id -> copy. Survives reboots. */
  checkpoints: Map<string, StoredCheckpoint>;
  /**
   * /var/lib/lastseen: the state folder's small files by name (the hand-over record,
   * `handovers.json`, as production's HandoverRecords writes it). Survives reboots.
   */
  handovers: Map<string, string>;
  /** /var/lib/lastseen/boot-id: the boot the agent last started in. Survives reboots. */
  agentBootId?: number;
}

export interface NodeNet {
  partitioned: boolean;
  /**
   * The largest added one-way latency in either direction, ms (for tolerances); the latency of each
   * message is drawn from `toApi` or `fromApi` (network.ts).
   */
  latencyMs: number;
  /** Added latency of messages to the api-server (writes, requests) and from it (responses, watch events). */
  toApi: Delay;
  fromApi: Delay;
  /** The agent's watches stop delivering (live reads still work). */
  watchStalled: boolean;
}

export interface SimNode {
  name: string;
  master: boolean;
  up: boolean;
  /** Increments on every boot; callbacks scheduled in an earlier boot check it and do nothing. */
  bootId: number;
  clock: NodeClock;
  disk: NodeDisk;
  /** /run/lastseen/heartbeats (tmpfs): file name -> beat. Wiped on reboot. */
  files: Map<string, Beat>;
  net: NodeNet;
  /** Host ports: port -> the pods holding it (uid -> binds with port sharing). */
  ports: Map<number, Map<string, boolean>>;
  /**
   * The node's redirects (`handover: redirect`, src/agent/redirect.ts): parent id -> new connections
   * to `port` go to `toPort`. Kernel state: gone with a reboot, kept across an agent restart.
   */
  redirects: Map<string, { port: number; toPort: number }>;
}

/** The agent's own manifest, always present: the agent's checkpoint is always active. */
export const AGENT_MANIFEST = 'lastseen-agent.json';

export const T = {
  /** Kubelet crash-loop backoff: 10s doubling to 5m, reset after 10m of running (kubelet defaults). */
  backoffInitialMs: 10_000,
  backoffMaxMs: 300_000,
  backoffResetMs: 600_000,
  /** A process reads its config before binding its ports; until then it holds none (an app's default bind time). */
  bindDelayMs: 1_000,
  /**
   * A starting kube-apiserver fails its share of a shared port's connections for about a second at
   * most, whatever its start takes: measured here (v1.36.3, docs/simulator-kubelet.md), a second
   * instance failed probes only within about 1 s of its start, and on the real node the parent's
   * start beside its checkpoint left the port dark 0.0-0.1 s per reboot. So an api-server's default
   * bind time is its start time minus this.
   */
  apiserverBindLeadMs: 1_000,
  /** Graceful termination of the agent's own pod (parents and copies use their spec's stopMs). */
  terminationMs: 3_000,
  /**
   * Kubelet pod worker (v1.5 pod_workers.go): while a container sits in crash-loop back-off, its pod
   * is re-synced every backOffPeriod (10s) stretched by up to 50% jitter, and the container is only
   * restarted by the first sync at or after the back-off expires. So a restart comes between the
   * back-off and the back-off plus one stretched sync period (< 15s) late.
   */
  podWorkerBackoffSyncMs: 10_000,
  podWorkerJitter: 0.5,
  /** Kubelet: from boot to running (systemd; the kubelet's own start is in the kubelet model). */
  kubeletStartMs: 3_000,
  /**
   * The agent container's own start, from its container starting to its first decision: drawn
   * uniformly between these on every start. Measured on the real node (test bed, 13 power cycles,
   * `npm run e2e:reboot`: the agent's "activating checkpoint" log line 2.31-3.88 s after the
   * kubelet starts, median 2.5 s, the slow ones while the 2-core machine was loaded), less the
   * model's 0.3 s first manifest read and 0.14 s pod start. It was a fixed, guessed 2 s.
   */
  agentStartMs: { min: 1_850, max: 3_450 },
  /**
   * The heartbeat sidecar's process start, from its container starting to its first round (the
   * bench's sidecar: spawn to first beat written, a few hundred ms). It used to be a random phase
   * of up to a whole interval, which production's loop does not have.
   */
  sidecarStartMs: { min: 200, max: 800 },
  /** Agent: api-server readiness probe period, local heartbeat folder poll period. */
  agentProbeMs: 2_000,
  agentFilePollMs: 1_000,
  /** Agent: the static-pod folder's re-read period (production's MANIFEST_POLL_MS). */
  agentManifestPollMs: 2_000,
  /**
   * Agent: a local beat file written -> the agent scans the folder (fs.watch, inotify; the poll
   * above is only the safety net). Measured by `npm run bench` (activation section, the agent's
   * observation lag of a local beat): p50 5 ms, max under 50 ms on a loaded 2-core machine.
   */
  agentFileNoticeMs: 50,
  /**
   * Agent actuators: writing a manifest or a checkpoint copy. Measured by `npm run bench` (activation
   * section, "activating checkpoint" logged -> manifest in the folder): p50 16-24 ms, max 87 ms over 60
   * trials on a loaded 2-core machine; 100 ms stays above every one (it was a guessed 200 ms).
   */
  actuatorMs: 100,
  /** Base round trip to the api-server before added latency. */
  apiRttMs: 20,
  /** Controller manager: from a missing DaemonSet pod to a created one. */
  controllerMs: 2_000,
} as const;
