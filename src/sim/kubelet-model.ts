// The two kubelets the simulator can model, as named, documented variants (docs/simulator-kubelet.md
// gives the measurements behind every figure).
//
// - `v1.36`: calibrated against a real kubelet v1.36.3 with containerd 1.6 on the project's test
//   machines. It watches the static-pod folder with inotify, starts a pod in a fraction of a second,
//   reports container states honestly, relists its api pods about 20 s after an api-server answers
//   again, and counts an exited container left over from the previous boot in its crash-loop
//   back-off.
// - `v1.5`: the kubelet of the background issue (docs/reboot-story.md), as the simulator modelled it
//   before the calibration: the manifest folder is re-read every `fileCheckPeriod` (20 s), and its
//   status cache (`staleStatus`) repeats the last pushed phase and misses exits of api pods while no
//   api-server is reachable. The old checkpointer's deadlock needs it.
//
// Everything else the kubelet does (crash-loop back-off 10 s doubling to 5 min, the pod worker's
// 10-15 s re-syncs while backing off, ports held through graceful termination) is common to both and
// lives in model.ts (T).

export const KUBELET_MODELS = ['v1.36', 'v1.5'] as const;
export type KubeletModelName = (typeof KUBELET_MODELS)[number];

export interface KubeletModel {
  name: KubeletModelName;
  /** From the kubelet process starting to its first read of the static-pod folder. */
  startupMs: number;
  /**
   * How a change in the static-pod folder is noticed: `poll` re-reads it every fileCheckPeriodMs
   * (`--file-check-frequency`); `inotify` notices each write or removal after a short delay drawn
   * from noticeMs (skewed towards its minimum, as measured).
   */
  manifestWatch: 'poll' | 'inotify';
  fileCheckPeriodMs: number;
  noticeMs: { min: number; max: number };
  /** From noticing a static pod until its container process starts (sandbox, container create). */
  staticPodStartMs: number;
  /** From learning of an api pod until its container process starts. */
  apiPodStartMs: number;
  /** The v1.5 status cache (kubelet.ts header). */
  staleStatus: boolean;
  /**
   * The first exit of a container with no exit on record is restarted at the next PLEG relist,
   * after this long, instead of after the crash-loop back-off (null: back-off from the first exit).
   */
  firstRestartMs: number | null;
  /**
   * An exited container of the same pod from an earlier boot (containerd keeps its record across a
   * reboot) counts as an exit: the first crash after a reboot already waits the initial back-off.
   */
  backoffSurvivesReboot: boolean;
  /**
   * After the kubelet failed to reach an api-server, it learns its api pods at its pod reflector's
   * next try once one answers again (null: at once). client-go's reflector retries on an
   * exponential back-off: `initialMs` doubling up to `capMs`, each wait stretched by up to
   * `jitter` of itself, started afresh when the last wait began more than `resetMs` ago
   * (`wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)` in reflector.go). So a kubelet
   * that failed for a few seconds lists within seconds of an api-server's answer, and one that
   * failed for minutes up to a minute after it.
   */
  reflectorBackoff: { initialMs: number; capMs: number; resetMs: number; jitter: number } | null;
  /** From deciding to stop a container to the SIGTERM reaching it. */
  killMs: number;
  /**
   * Static pods of the same full name start one at a time: a changed manifest's new pod waits until
   * the old one has terminated (pod_workers.go, `waitingToStartStaticPodsByFullname`, kubelet
   * >= 1.22). Without it the new pod starts at once, beside the old one still holding its ports.
   */
  staticPodsOneAtATime: boolean;
  /**
   * Which api-server the kubelet asks (its kubeconfig, not its version; the scenario sets it):
   * `cluster`, any that serves (a load balancer in front of them all); `local`, a master's asks only its own
   * node's (kubeadm's control-plane kubelets, `ControlPlaneKubeletLocalMode`, default since v1.33)
   * and reaches none while nothing serves on its node; a worker's still asks the cluster's.
   */
  api: 'cluster' | 'local';
}

/** Measured with a real kubelet v1.36.3 on the project's test machines (docs/simulator-kubelet.md). */
export const KUBELET_V1_36: KubeletModel = {
  name: 'v1.36',
  // Kubelet healthy 0.32 s after its start; the first static pod serves 0.58 s after it.
  startupMs: 300,
  manifestWatch: 'inotify',
  // Not used by inotify (fileCheckFrequency made no difference); kept at the kubelet default.
  fileCheckPeriodMs: 20_000,
  // Manifest written -> container serving 0.18 / 0.19 / 0.62 s (min / median / max) for a server
  // that binds at once: notice + start. The start is the floor (0.14 s), the notice the spread.
  noticeMs: { min: 40, max: 480 },
  staticPodStartMs: 140,
  // `kubectl apply` of a pod with nodeName -> serving 0.39 s (the watch round trip is apiRttMs).
  apiPodStartMs: 350,
  staleStatus: false,
  // "With no back-off the kubelet restarts a killed container in about 1 s."
  firstRestartMs: 1_000,
  // Repeated kills after a reboot: back-off 10, 20, 40, 80 s, the first crash included.
  backoffSurvivesReboot: true,
  // client-go's reflector back-off (reflector.go). Measured: the real node's parent pod served
  // 6-9 s after its checkpoint answered in most reboots, the three-node bed's kubelet started the
  // parent 3-4 s after its copy served (docs/simulator-kubelet.md); one trial with the api-server
  // down for longer waited 19.5 s.
  reflectorBackoff: { initialMs: 800, capMs: 30_000, resetMs: 120_000, jitter: 1 },
  // Manifest removed -> port free 0.01 / 0.02 / 1.04 s for a process that exits on SIGTERM.
  killMs: 20,
  // Not measured: the kubelet's source (pod_workers.go, allowStaticPodStart) since 1.22.
  staticPodsOneAtATime: true,
  api: 'cluster',
};

/** The kubelet of the background issue, as the simulator modelled it before the calibration. */
export const KUBELET_V1_5: KubeletModel = {
  name: 'v1.5',
  startupMs: 0,
  manifestWatch: 'poll',
  fileCheckPeriodMs: 20_000,
  noticeMs: { min: 0, max: 0 },
  staticPodStartMs: 1_000,
  apiPodStartMs: 1_000,
  staleStatus: true,
  firstRestartMs: null,
  backoffSurvivesReboot: false,
  reflectorBackoff: null,
  killMs: 0,
  staticPodsOneAtATime: false,
  api: 'cluster',
};

export const KUBELET_MODEL_BY_NAME: Record<KubeletModelName, KubeletModel> = { 'v1.36': KUBELET_V1_36, 'v1.5': KUBELET_V1_5 };

/** The longest the kubelet takes to notice a change in its static-pod folder (for liveness bounds). */
export function noticeBoundMs(m: KubeletModel): number {
  return m.manifestWatch === 'poll' ? m.fileCheckPeriodMs : m.noticeMs.max;
}

/** A notice delay drawn from `u` in [0, 1): skewed to the minimum (u^4: the median is min + 6% of the range). */
export function noticeDelayMs(m: KubeletModel, u: number): number {
  return Math.round(m.noticeMs.min + (m.noticeMs.max - m.noticeMs.min) * u ** 4);
}

/** The longest a kubelet may wait after an api-server answers before it lists its pods (bounds.ts). */
export function relistBoundMs(m: KubeletModel): number {
  const b = m.reflectorBackoff;
  return b === null ? 0 : b.capMs * (1 + b.jitter);
}
