// A model kubelet, one per node and boot. What it keeps in memory dies with a reboot; what is on
// disk (the static-pod manifests, containerd's container records) survives. Its timings come from
// the scenario's kubelet model (kubelet-model.ts: `v1.36`, calibrated against a real kubelet, or
// `v1.5`, the kubelet of the background issue). Mechanics that matter for checkpointing:
// - static pods come from the manifest folder, noticed on the periodic file check (v1.5) or a
//   fraction of a second after each change (v1.36, inotify);
// - api-assigned pods are learned only while an api-server is reachable, and forgotten on reboot;
//   once learned they keep running without one. After failing to reach an api-server, a v1.36
//   kubelet lists its pods again only about 20 s after one answers;
// - a container binds its host ports shortly after it starts; a second binder exits;
// - exits are restarted with the kubelet's crash-loop backoff, by the pod worker's first sync after
//   the back-off expires (syncs every 10-15s while backing off). v1.36: a container's first exit
//   with none on record restarts at the next relist (about 1 s), and an exited container left from
//   the previous boot is on record, so after a reboot the first crash already waits 10 s;
// - a removed pod stops serving at once but holds its ports for its graceful termination (stopMs,
//   cut short by SIGKILL at its terminationGracePeriod);
// - container states are pushed to the api-server only while one is reachable, and the kubelet's
//   own pod listing (`/pods`) repeats the last state it managed to push. This is the stale view
//   the old checkpointer trusted (docs/reboot-story.md).
//
// The kubelet v1.5 status cache (scenario `kubelet.staleStatus`, on in the v1.5 model), the two facts of
// the background issue that make the old checkpointer deadlock:
// - `/pods` reports the pod *phase* as last pushed, and a restartPolicy=Always pod whose container
//   has started is phase Running even while it crash-loops ("the last reported state to the api
//   was: apiserver podState=running");
// - a container of an api-assigned pod that exits while the kubelet reaches no api-server is not
//   noticed: its status stays as last reported and the pod worker does not restart it until the
//   kubelet syncs with an api-server again ("the kubelet is not trying to restart the real
//   api-server pod (it had failed to bind prior) - even though it could successfully start now").
//   Exits while connected are noticed and restarted on the crash-loop back-off as usual. Static pods
//   (checkpoint copies, the agent) come from the manifest folder and are always restarted.
import { type KubeletModel, noticeDelayMs } from './kubelet-model.js';
import type { PodRole, PodSpec, SimNode } from './model.js';
import { AGENT_MANIFEST, T } from './model.js';
import type { Rng } from './rng.js';
import type { SidecarProcess } from './sidecar.js';
import type { World } from './world.js';

export type ContainerState = 'waiting' | 'starting' | 'running' | 'terminating';
/** A container state as pushed to the api-server ('running' covers started-but-not-Ready). */
export type ReportedState = 'pending' | 'running' | 'waiting' | 'terminated';

export interface KPod {
  uid: string;
  name: string;
  role: PodRole;
  source: 'static' | 'api';
  manifestFile: string | null;
  /** null for the agent's own pod. */
  spec: PodSpec | null;
  state: ContainerState;
  /** Ports are held (bound) by this container. */
  bound: boolean;
  restarts: number;
  /** Its last exit was the kubelet's `Unknown`: a container left from the previous boot (see add()). */
  lastExitUnknown: boolean;
  /** How long its last run lasted, whole seconds as a kubelet reports them (null: no exit yet, or Unknown). */
  lastExitRanMs: number | null;
  backoffMs: number;
  startedAt: number;
  /** Increments on every container start; stale timers compare it. */
  runId: number;
  removed: boolean;
  /**
   * Deleted in the api-server while its preStop hook runs (a pause before SIGTERM, PodSpec.preStopMs):
   * when the hook ends (null: not in one). It serves meanwhile, as the process has had no signal.
   */
  preStopUntil: number | null;
  /** The state last pushed to an api-server (null: never). */
  reported: ReportedState | null;
  /** The container has started at least once (its pod's phase is past Pending). */
  everStarted: boolean;
  /** Where containerd keeps this pod's containers (static: file and content; api: uid). */
  identity: string;
  /** Exits on record since the back-off was last reset (an exited container of an earlier boot counts, v1.36). */
  exits: number;
  /** staleStatus: the container exited while the kubelet had no api-server; not yet noticed. */
  unnoticed: { why: string; at: number } | null;
  /** Hung (scenario fault `hang`): the process holds its ports and stays "running", but neither serves nor answers. */
  hung: boolean;
  /** The whole pod hangs, its sidecar too (fault `hang` with scope pod): no beat at all. */
  hungWhole: boolean;
  /** Since when the process has been hung without a break, whatever the scope (null: it is not hung). */
  hungSince: number | null;
  /**
   * Starved of CPU (fault `hang` with scope starved): runnable but kept off the CPU, so it answers
   * nothing in time, and its sidecar sees it waiting (Beat.starved).
   */
  starved: boolean;
  /** Starts that crashed so far although the spec is good (PodSpec.crashes). */
  stumbles: number;
  /** Its heartbeat sidecar's process (src/sim/sidecar.ts): SIGTERM on removal, thawed with the pod. */
  sidecar: SidecarProcess | null;
}

/**
 * A container's liveness probe. An api-server has the one kubeadm writes for kube-apiserver (GET
 * /livez every 10 s, 15 s timeout, 8 failures), which self-hosted manifests copy; other parents
 * none. A probe that times out holds the prober for its timeout, so a hung process fails once per
 * max(period, timeout): about two minutes before the kubelet restarts it.
 */
export interface Liveness {
  periodMs: number;
  timeoutMs: number;
  failureThreshold: number;
}
/** The kubelet renews its node's Lease this often (kubelet default: a quarter of nodeLeaseDurationSeconds, 40 s). */
export const NODE_LEASE_RENEW_MS = 10_000;
const APISERVER_LIVENESS: Liveness = { periodMs: 10_000, timeoutMs: 15_000, failureThreshold: 8 };

export function livenessOf(spec: PodSpec): Liveness | null {
  return spec.apiServer ? APISERVER_LIVENESS : null;
}

/** Some redirect of the node takes new connections to `port` (asked per pod, per event: no allocation). */
function redirectsPort(redirects: SimNode['redirects'], port: number | undefined): boolean {
  if (port === undefined) return false;
  for (const r of redirects.values()) if (r.port === port) return true;
  return false;
}

export class Kubelet {
  readonly pods = new Map<string, KPod>();
  private connected = false;
  /** A renewal of the node's Lease is scheduled (renewLease). */
  private leaseTimer = false;
  private nextUid = 0;
  private readonly rng: Rng;
  /** The agent's own start time, its own stream so the kubelet's other draws stay as they were. */
  private readonly agentRng: Rng;
  /** Its own stream, so the notice delays never shift the pod workers' jitter. */
  private readonly noticeRng: Rng;
  /** Its own stream: the liveness probe's phase. */
  private readonly livenessRng: Rng;
  /** Its own stream: the pod reflector's jitter. */
  private readonly reflectorRng: Rng;
  readonly model: KubeletModel;
  /** The kubelet v1.5 status cache (see the header). */
  readonly staleStatus: boolean;
  /**
   * Its pod reflector's retries (kubelet-model.ts `reflectorBackoff`): `failing` while no
   * api-server answers, `next` its next try, `stepMs` the wait before the one after, `lastStart`
   * when the last wait began. The tries are worked out when an api-server answers, not as events.
   */
  private reflector: { failing: boolean; next: number; stepMs: number; lastStart: number } | null = null;
  /** No api pods are listed before this (the reflector's next try after an outage). */
  private listAfter = 0;

  constructor(
    private readonly world: World,
    private readonly node: SimNode,
    private readonly bootId: number,
  ) {
    this.rng = world.rng(`kubelet/${node.name}/${bootId}`);
    this.noticeRng = world.rng(`kubelet/${node.name}/${bootId}/notice`);
    this.agentRng = world.rng(`kubelet/${node.name}/${bootId}/agent-start`);
    this.livenessRng = world.rng(`kubelet/${node.name}/${bootId}/liveness`);
    this.reflectorRng = world.rng(`kubelet/${node.name}/${bootId}/reflector`);
    this.model = world.scenario.kubelet;
    this.staleStatus = this.model.staleStatus;
  }

  private live(): boolean {
    return this.node.up && this.node.bootId === this.bootId;
  }

  /** Every way into the kubelet may change its pods: the world's checks look at this node again. */
  private touch(): void {
    this.world.touch(this.node);
  }

  private after(ms: number, fn: () => void): void {
    this.world.q.after(ms, () => {
      if (!this.live()) return;
      this.touch();
      fn();
    });
  }

  start(): void {
    this.touch();
    const m = this.model;
    if (m.manifestWatch === 'inotify') {
      const folder = this.node.disk.manifests;
      folder.onChange = () => {
        if (this.live()) this.after(noticeDelayMs(m, this.noticeRng.next()), () => this.checkFiles());
      };
      this.after(m.startupMs, () => this.checkFiles());
      return;
    }
    const loop = () => {
      this.checkFiles();
      this.after(m.fileCheckPeriodMs, loop);
    };
    if (m.startupMs > 0) this.after(m.startupMs, loop);
    else loop();
  }

  /** Serving: running and Ready, not being removed. */
  serving(p: KPod): boolean {
    return p.state === 'running' && !p.removed && !p.hung;
  }

  /**
   * Who answers clients on the port of the pods `matches` picks: the one measure of service that
   * outcomes, reachability, lanes and pictures all use. A pod that holds a share of the port
   * (SO_REUSEPORT) without serving (hung, or not Ready yet) takes its share of the new connections
   * and fails them: measured on the real node, a never-Ready api-server beside its checkpoint left
   * /readyz failing 55 of 90 s. So the port counts as failing while such a share is held. (A pod
   * being removed has closed its listener: kube-apiserver stops accepting at once on SIGTERM.)
   */
  answeredBy(matches: (spec: PodSpec) => boolean): 'parent' | 'checkpoint' | null {
    let by: 'parent' | 'checkpoint' | null = null;
    const redirects = this.node.redirects;
    for (const p of this.pods.values()) {
      if (!p.spec || !matches(p.spec)) continue;
      // Behind a redirect: new connections to the parent's port reach the copy on its own port, and
      // nothing else listening on that port (the parent, starting, hung or serving). Without one, a
      // redirect copy listens where no client connects.
      if (redirects.size > 0 || p.spec.copyFor !== undefined) {
        if (redirectsPort(redirects, p.spec.copyFor ?? p.spec.ports[0]) !== (p.spec.copyFor !== undefined)) continue;
      }
      if (!this.serving(p)) {
        if (p.bound && p.spec.portSharing && !p.removed && p.state !== 'terminating') return null;
        continue;
      }
      if (p.role === 'parent') by = 'parent';
      else if (p.role === 'checkpoint' && by === null) by = 'checkpoint';
    }
    return by;
  }

  /** The kubelet's `/pods` listing: every pod it knows, with the state it last managed to report. */
  listPods(): Array<{ key: string | null; role: PodRole; source: 'static' | 'api'; state: ReportedState }> {
    return [...this.pods.values()].map((p) => ({ key: p.spec?.key ?? null, role: p.role, source: p.source, state: p.reported ?? 'pending' }));
  }

  // ---- static pods ----

  private checkFiles(): void {
    const disk = this.node.disk.manifests;
    for (const p of this.pods.values()) {
      if (p.source !== 'static' || p.removed || p.manifestFile === null) continue;
      const m = disk.get(p.manifestFile);
      if (!m) this.kill(p, `manifest ${p.manifestFile} removed`);
      else if (m.spec?.hash !== p.spec?.hash || m.spec?.portSharing !== p.spec?.portSharing || m.spec?.copyFor !== p.spec?.copyFor)
        this.kill(p, `manifest ${p.manifestFile} changed`);
    }
    for (const [file, m] of disk) {
      // The same file is the same static pod name: with staticPodsOneAtATime the new pod waits for
      // the old one's termination (kill() looks at the folder again when it is done).
      const running = [...this.pods.values()].some((p) => p.manifestFile === file && (!p.removed || this.model.staticPodsOneAtATime));
      if (running) continue;
      const name = file === AGENT_MANIFEST ? 'lastseen-agent' : `${m.spec!.key}-checkpoint-${this.node.name}`;
      this.add({
        name,
        role: m.role,
        source: 'static',
        manifestFile: file,
        spec: m.spec,
        // A uid as the channels accept it (letters, digits, dashes): the copy's beats name it.
        uid: `${this.node.name}-static-${++this.nextUid}`,
        identity: `static/${file}/${m.spec?.hash ?? ''}${m.exclusive ? '/exclusive' : ''}${m.spec?.copyFor !== undefined ? '/redirect' : ''}`,
      });
    }
  }

  // ---- api pods ----

  /** Reachability changed (the world tells every kubelet after every event that changes it). */
  setConnected(reachable: boolean): void {
    this.touch();
    if (!reachable && !this.reflector?.failing) this.reflectorFailed(this.world.q.now);
    if (reachable === this.connected) return;
    this.connected = reachable;
    if (reachable) {
      this.renewLease();
      const delay = this.reflectorAnswered(this.world.q.now);
      if (delay > 0) {
        this.listAfter = this.world.q.now + delay;
        this.after(delay, () => this.syncApiPods());
      }
      this.syncApiPods();
      this.finalizeDeleted();
      // The pod workers sync again: exits that happened while nobody was listening are noticed now.
      for (const p of this.pods.values()) {
        if (!p.unnoticed || p.removed) continue;
        const u = p.unnoticed;
        p.unnoticed = null;
        this.restartLater(p, `${u.why} (at ${(u.at / 1000).toFixed(1)}s, noticed after syncing with the api-server)`, u.at);
      }
      for (const p of this.pods.values()) this.report(p);
    }
  }

  /** A try of the pod reflector failed (or its watch ended) at `at`: its next try, after a back-off. */
  private reflectorFailed(at: number): void {
    const b = this.model.reflectorBackoff;
    if (b === null) {
      this.reflector = { failing: true, next: at, stepMs: 0, lastStart: at };
      return;
    }
    const r = this.reflector ?? { failing: true, next: at, stepMs: b.initialMs, lastStart: Number.NEGATIVE_INFINITY };
    if (at - r.lastStart > b.resetMs) r.stepMs = b.initialMs;
    const wait = r.stepMs * (1 + this.reflectorRng.next() * b.jitter);
    r.stepMs = Math.min(r.stepMs * 2, b.capMs);
    r.lastStart = at;
    r.next = at + wait;
    r.failing = true;
    this.reflector = r;
  }

  /** An api-server answers from `now`: every try before now failed; how long until the next one lists. */
  private reflectorAnswered(now: number): number {
    const r = this.reflector;
    if (r === null || !r.failing) return 0;
    if (this.model.reflectorBackoff !== null) while (r.next < now) this.reflectorFailed(r.next);
    r.failing = false;
    return Math.max(0, r.next - now);
  }

  /**
   * The node's Lease (kube-node-lease): renewed with the node's clock when the kubelet connects,
   * then every NODE_LEASE_RENEW_MS while it reaches an api-server (the kubelet's default, a quarter
   * of its 40 s lease). Changes no node state, so it touches nothing.
   */
  private renewLease(): void {
    if (this.leaseTimer) return;
    const renew = () => {
      if (!this.live() || !this.connected) {
        this.leaseTimer = false;
        return;
      }
      this.world.api.nodeLeases.set(this.node.name, this.node.clock.wall(this.world.q.now));
      this.world.q.after(NODE_LEASE_RENEW_MS, renew);
    };
    this.leaseTimer = true;
    renew();
  }

  /** Cluster bootstrap: the temporary control plane hands the kubelet its pods once. */
  adoptApiPods(): void {
    this.touch();
    this.connected = true;
    this.syncApiPods();
    this.connected = false;
  }

  /** The api-server's pods for this node changed (or the kubelet just connected). */
  syncApiPods(): void {
    this.touch();
    if (!this.connected || this.world.q.now < this.listAfter) return;
    const desired = this.world.api.podsOn(this.node.name);
    const uids = new Set(desired.map((d) => d.uid));
    for (const p of this.pods.values()) {
      if (p.source === 'api' && !p.removed && !uids.has(p.uid)) this.kill(p, 'deleted in the api-server');
    }
    for (const d of desired) {
      if (this.pods.has(d.uid)) continue;
      this.add({ name: d.name, role: 'parent', source: 'api', manifestFile: null, spec: d.spec, uid: d.uid, identity: `api/${d.uid}` });
    }
  }

  // ---- containers ----

  private add(a: Pick<KPod, 'uid' | 'name' | 'role' | 'source' | 'manifestFile' | 'spec' | 'identity'>): void {
    const left = this.node.disk.containers.get(a.identity);
    const p: KPod = {
      ...a,
      exits: this.model.backoffSurvivesReboot && left !== undefined ? 1 : 0,
      state: 'waiting',
      bound: false,
      // A container left from the last boot: the kubelet starts it again as a restart, its last exit Unknown.
      restarts: left !== undefined ? left + 1 : 0,
      lastExitUnknown: left !== undefined,
      lastExitRanMs: null,
      backoffMs: T.backoffInitialMs,
      startedAt: 0,
      runId: 0,
      removed: false,
      preStopUntil: null,
      reported: null,
      everStarted: false,
      unnoticed: null,
      hung: false,
      hungWhole: false,
      hungSince: null,
      starved: false,
      stumbles: 0,
      sidecar: null,
    };
    this.pods.set(p.uid, p);
    this.world.log(this.node.name, 'kubelet', `pod ${p.name} (${p.source}${p.spec ? `, gen ${p.spec.generation}` : ''}) added`, p.spec?.key);
    if (p.spec && p.role !== 'agent') p.sidecar = this.world.startSidecar(this.node, p);
    this.report(p);
    this.after(p.source === 'api' ? this.model.apiPodStartMs : this.model.staticPodStartMs, () => this.startContainer(p));
  }

  private startContainer(p: KPod): void {
    if (p.removed || p.state !== 'waiting') return;
    p.state = 'starting';
    p.hung = false;
    p.everStarted = true;
    p.startedAt = this.world.q.now;
    this.node.disk.containers.set(p.identity, p.restarts);
    const run = ++p.runId;
    this.report(p);
    const same = () => p.runId === run && !p.removed;
    if (p.role === 'agent') {
      this.after(this.agentRng.between(T.agentStartMs.min, T.agentStartMs.max), () => {
        if (!same()) return;
        p.state = 'running';
        this.world.startAgent(this.node, p, () => same() && this.live());
      });
      return;
    }
    const spec = p.spec!;
    this.after(spec.bindMs, () => {
      if (!same()) return;
      // A port is taken unless everyone on it, this pod included, shares it (SO_REUSEPORT).
      const held = spec.ports.find((port) =>
        [...(this.node.ports.get(port) ?? new Map<string, boolean>())].some(([uid, shares]) => uid !== p.uid && !(shares && spec.portSharing)),
      );
      if (held !== undefined) return this.exit(p, `bind :${held}: address already in use`);
      for (const port of spec.ports) {
        const holders = this.node.ports.get(port) ?? new Map<string, boolean>();
        holders.set(p.uid, spec.portSharing);
        this.node.ports.set(port, holders);
      }
      p.bound = true;
      this.after(spec.startMs - spec.bindMs, () => {
        if (!same()) return;
        if (!spec.healthy) return this.exit(p, 'crashed while starting (bad build)');
        if (p.stumbles < (spec.crashes ?? 0)) {
          p.stumbles++;
          return this.exit(p, `crashed while starting (a dependency not ready yet: crash ${p.stumbles} of ${spec.crashes})`);
        }
        p.state = 'running';
        this.world.markReady(this.node, p);
        this.report(p);
      });
    });
  }

  private release(p: KPod): void {
    if (!p.bound) return;
    for (const port of p.spec?.ports ?? []) {
      const holders = this.node.ports.get(port);
      holders?.delete(p.uid);
      if (holders?.size === 0) this.node.ports.delete(port);
    }
    p.bound = false;
  }

  /** The container exited: restart it with the crash-loop backoff (unless nobody notices, above). */
  exit(p: KPod, why: string): void {
    this.touch();
    if (p.removed) return;
    if (p.preStopUntil !== null) {
      // Its pod is being deleted: nothing restarts it; its ports are free now.
      this.release(p);
      p.state = 'waiting';
      p.hung = false;
      p.sidecar?.thaw();
      this.terminate(p, `${why}, during its preStop hook`, 0);
      return;
    }
    this.release(p);
    p.state = 'waiting';
    p.hung = false;
    p.sidecar?.thaw();
    p.runId++;
    if (this.staleStatus && p.source === 'api' && !this.connected) {
      p.unnoticed = { why, at: this.world.q.now };
      this.world.log(
        this.node.name,
        'kubelet',
        `${p.name} exited: ${why}; not noticed (no api-server to sync with): /pods keeps saying ${p.reported ?? 'pending'}, no restart`,
        p.spec?.key,
      );
      return;
    }
    this.restartLater(p, why, this.world.q.now);
  }

  /** Schedule the restart of an exited container: back-off, then the pod worker's next sync. */
  private restartLater(p: KPod, why: string, exitedAt: number): void {
    if (exitedAt - p.startedAt >= T.backoffResetMs) {
      p.backoffMs = T.backoffInitialMs;
      p.exits = 0;
    }
    p.restarts++;
    p.lastExitUnknown = false;
    // startedAt and finishedAt are reported in whole seconds.
    p.lastExitRanMs = (Math.floor(exitedAt / 1000) - Math.floor(p.startedAt / 1000)) * 1000;
    this.node.disk.containers.set(p.identity, p.restarts);
    this.report(p);
    const first = this.model.firstRestartMs !== null && p.exits === 0;
    p.exits++;
    let delay = 0;
    let backoff = 0;
    if (first) delay = this.model.firstRestartMs!;
    else {
      backoff = p.backoffMs;
      p.backoffMs = Math.min(T.backoffMaxMs, p.backoffMs * 2);
      while (delay < backoff) delay += T.podWorkerBackoffSyncMs * (1 + T.podWorkerJitter * this.rng.next());
      delay = Math.round(delay);
    }
    this.world.log(
      this.node.name,
      'kubelet',
      `${p.name} exited: ${why}; restart in ${(delay / 1000).toFixed(1)}s (${first ? 'first exit on record: no back-off' : `back-off ${backoff / 1000}s`})`,
      p.spec?.key,
    );
    const run = p.runId;
    this.after(delay, () => {
      if (p.runId === run) this.startContainer(p);
    });
  }

  /**
   * The process hangs for `ms` (a deadlock, a stuck disk): it keeps its ports and the runtime still
   * sees it running, so the kubelet neither notices nor restarts it, but it stops serving and its
   * heartbeat stops. It resumes after `ms` unless its container ended meanwhile.
   */
  hang(p: KPod, ms: number, whole = false, starved = false): void {
    this.touch();
    if (p.removed || p.state === 'waiting') return;
    // A hang that starts while another goes on continues it: the process has not answered since the first.
    p.hungSince = p.hung && p.hungSince !== null ? p.hungSince : this.world.q.now;
    p.hung = true;
    p.hungWhole = whole;
    p.starved = starved;
    const run = p.runId;
    this.world.log(
      this.node.name,
      'kubelet',
      `${p.name} ${starved ? 'is starved of CPU: holds its ports, answers nothing in time' : 'hangs: holds its ports, neither serves nor answers'}${whole ? ', its sidecar frozen too' : ''} (${ms / 1000}s)`,
      p.spec?.key,
    );
    this.after(ms, () => {
      if (p.runId !== run || p.removed || !p.hung) return;
      p.hung = false;
      p.hungWhole = false;
      p.hungSince = null;
      p.starved = false;
      p.sidecar?.thaw();
      this.world.log(this.node.name, 'kubelet', `${p.name} resumes after its hang${p.state === 'running' ? ': serving again' : ''}`, p.spec?.key);
    });
    // The liveness probe (as kubeadm writes it for kube-apiserver): a hung process fails it until
    // the kubelet restarts the container.
    const live = p.spec ? livenessOf(p.spec) : null;
    if (live && p.role === 'parent') {
      const killAfter = this.livenessRng.next() * live.periodMs + live.failureThreshold * Math.max(live.periodMs, live.timeoutMs);
      if (killAfter < ms) {
        this.after(killAfter, () => {
          if (p.runId !== run || p.removed || !p.hung) return;
          this.exit(p, `liveness probe failed ${live.failureThreshold} times (no answer within ${live.timeoutMs / 1000}s): restarted`);
        });
      }
    }
  }

  /**
   * Remove a pod: its preStop hook first (an api pod's main container that serves; a copy has none,
   * production's sanitize drops it), then graceful termination, then the ports are free.
   */
  kill(p: KPod, why: string): void {
    this.touch();
    if (p.removed || p.preStopUntil !== null) return;
    const preStopMs = p.source === 'api' && p.spec && p.state === 'running' && !p.hung ? Math.min(p.spec.preStopMs, p.spec.gracePeriodMs) : 0;
    if (preStopMs <= 0) {
      this.terminate(p, why, 0);
      return;
    }
    p.preStopUntil = this.world.q.now + preStopMs;
    this.world.log(
      this.node.name,
      'kubelet',
      `pod ${p.name} removed: ${why}; its preStop hook pauses ${preStopMs / 1000}s before SIGTERM, serving meanwhile`,
      p.spec?.key,
    );
    const run = p.runId;
    this.after(preStopMs, () => {
      if (p.runId !== run || p.removed || p.preStopUntil === null) return;
      this.terminate(p, 'its preStop hook ended', preStopMs);
    });
  }

  /**
   * SIGTERM (after `usedMs` of the grace period went to the preStop hook), SIGKILL at the end of the
   * grace period. The heartbeat sidecar is a native sidecar: the kubelet stops it only once the main
   * container has exited, so its last round (Stopping) comes then, not at the delete.
   */
  private terminate(p: KPod, why: string, usedMs: number): void {
    p.removed = true;
    p.preStopUntil = null;
    p.runId++;
    p.unnoticed = null;
    const wasUp = p.state !== 'waiting';
    const stopMs = this.model.killMs + (p.spec ? Math.max(0, Math.min(p.spec.stopMs, p.spec.gracePeriodMs - usedMs)) : T.terminationMs);
    const holds = wasUp && p.bound;
    this.world.log(
      this.node.name,
      'kubelet',
      `${usedMs > 0 ? `${p.name} gets SIGTERM: ${why}` : `pod ${p.name} removed: ${why}`}${holds ? `; stops serving, holds its ports until it exits (${stopMs / 1000}s)` : ''}`,
      p.spec?.key,
    );
    p.state = 'terminating';
    this.after(wasUp ? stopMs : 0, () => {
      if (holds) this.world.log(this.node.name, 'kubelet', `${p.name} terminated; ports released`, p.spec?.key);
      this.release(p);
      p.sidecar?.stop();
      this.pods.delete(p.uid);
      this.node.disk.containers.delete(p.identity);
      this.report(p);
      if (p.source === 'api') this.finalizeDeleted();
      // A static pod of the same name may have been waiting for this one to end.
      if (p.source === 'static' && this.model.staticPodsOneAtATime) this.checkFiles();
    });
  }

  /**
   * The pods the api-server still lists as being deleted on this node that this kubelet no longer
   * runs are gone: it says so (it needs an api-server for that; it says so again when it connects).
   */
  private finalizeDeleted(): void {
    if (!this.connected) return;
    for (const uid of this.world.api.deletingOn(this.node.name)) if (!this.pods.has(uid)) this.world.api.podGone(uid);
  }

  /** Push a container state to the api-server, if one is reachable. */
  private report(p: KPod): void {
    if (!this.connected) return;
    // The pod's status in the api-server: its restart count (containerStatuses[].restartCount).
    if (p.source === 'api') this.world.api.reportRestarts(p.uid, p.restarts, p.lastExitUnknown, p.lastExitRanMs);
    // Its Ready condition (the status manager's), with the time it turned True: the DaemonSet controller waits on it.
    if (p.source === 'api') this.world.api.reportReady(p.uid, p.state === 'running' && !p.removed ? p.startedAt + p.spec!.startMs : null);
    if (this.staleStatus) {
      // The pod phase: Pending until a container starts, then Running, crash loops included.
      p.reported = p.removed ? 'terminated' : p.everStarted ? 'running' : 'pending';
      return;
    }
    const state: ReportedState = p.state === 'waiting' ? (p.restarts > 0 ? 'waiting' : 'pending') : p.state === 'terminating' ? 'terminated' : 'running';
    p.reported = state;
  }
}
