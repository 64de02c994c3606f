// The lastseen agent on one node, wired as in production: observers (api-server readiness probe,
// Lease watch, pod watch, local heartbeat folder) -> the real core (`decide`) -> actuators
// (checkpoint store, manifest folder), each with a small latency. Time is the node's monotonic
// clock; the core's `wakeAt` is turned back into true time to schedule its tick.
import { beatFingerprint, decide, handoverToPersist, initialState } from '../core/decide.js';
import { leaseName, localBeatFile, manifestFile, parentId } from '../core/names.js';
import type { Action, Beat, Channel, Input, ParentState } from '../core/types.js';
import type { StoredBeat } from './apiserver.js';
import type { SimNode } from './model.js';
import { T } from './model.js';
import type { AgentProcess } from './strategies.js';
import type { World } from './world.js';

const API_CHANNELS: Channel[] = ['lease', 'annotation'];

export class LastseenAgent implements AgentProcess {
  readonly states = new Map<string, ParentState>();
  private scheduledWake = new Map<string, number>();
  /** Last beat delivered to the core per key and channel, to answer live reads. */
  private delivered = new Map<string, string>();
  private fileSeen = new Map<string, string>();
  private reachable = false;
  private lastPod = new Map<string, string>();
  /** Started in a new boot (the recorded boot id differs); cleared once an api-server answers. */
  private rebooted: boolean;

  constructor(
    private readonly world: World,
    private readonly node: SimNode,
    readonly alive: () => boolean,
  ) {
    this.rebooted = node.disk.agentBootId !== undefined && node.disk.agentBootId !== node.bootId;
    node.disk.agentBootId = node.bootId;
    for (const def of world.parentsOn(node.name)) if (node.disk.checkpoints.has(parentId(def.namespace, def.key))) this.ensure(def.key);
    world.log(node.name, 'agent', `agent started; ${this.states.size} checkpoint(s) on disk`);
    this.every(T.agentProbeMs, () => this.probe());
    this.every(T.agentFilePollMs, () => this.pollFiles());
  }

  private every(ms: number, fn: () => void): void {
    const loop = () => {
      if (!this.alive()) return;
      fn();
      this.world.q.after(ms, loop);
    };
    loop();
  }

  private later(ms: number, fn: () => void): void {
    this.world.q.after(ms, () => {
      if (this.alive()) fn();
    });
  }

  private mono(): number {
    return this.node.clock.mono(this.world.q.now);
  }

  private ensure(key: string): boolean {
    if (this.states.has(key)) return true;
    const def = this.world.parentDefOrNull(key);
    if (!def?.nodes.includes(this.node.name)) return false;
    const id = parentId(def.namespace, key);
    const cp = this.node.disk.checkpoints.get(id);
    const checkpoint = { stored: !!cp, active: this.node.disk.manifests.has(manifestFile(def.namespace, key)), specHash: cp?.spec.hash ?? null };
    const h = this.node.disk.handovers.get(id);
    const handover = h ? { remainingMs: h.deadlineWall - this.node.clock.wall(this.world.q.now), attempts: h.attempts, nextBackoffMs: h.nextBackoffMs } : undefined;
    this.states.set(key, initialState({ namespace: def.namespace, key, policy: def.policy, now: this.mono(), checkpoint, apiReachable: this.reachable, rebooted: this.rebooted, ...(handover ? { handover } : {}) }));
    this.world.invariants.agentStarted(this.node, key);
    this.feed(key, { type: 'tick' });
    return true;
  }

  feed(key: string, input: Input): void {
    const s = this.states.get(key);
    if (!s) return;
    const now = this.mono();
    const d = decide(s, input, now);
    this.states.set(key, d.state);
    for (const a of d.actions) this.act(key, d.state, a);
    if (d.wakeAt !== null && this.scheduledWake.get(key) !== d.wakeAt) {
      const wake = d.wakeAt;
      this.scheduledWake.set(key, wake);
      const at = Math.max(this.world.q.now + 1, Math.ceil(this.node.clock.trueAt(wake)) + 1);
      this.world.q.at(at, () => {
        if (!this.alive() || this.scheduledWake.get(key) !== wake) return;
        this.scheduledWake.delete(key);
        this.feed(key, { type: 'tick' });
      });
    }
  }

  // ---- observers ----

  private probe(): void {
    const r = this.world.api.reachableFrom(this.node);
    if (r === this.reachable) return;
    this.reachable = r;
    if (r) this.rebooted = false;
    this.world.log(this.node.name, 'agent', r ? 'api-server reachable' : 'api-server unreachable');
    for (const key of this.states.keys()) this.feed(key, { type: 'api', reachable: r });
    if (r) this.relist();
  }

  /** After (re)connecting or a watch restart: list pods and Leases. */
  relist(): void {
    if (!this.reachable) return;
    this.lastPod.clear();
    this.onPodsChanged();
    for (const def of this.world.parentsOn(this.node.name)) {
      for (const role of ['parent', 'checkpoint'] as const) {
        for (const ch of API_CHANNELS) {
          const beat = this.world.api.readBeat(ch, def.namespace, leaseName(def.key, this.node.name, role));
          if (beat) this.deliver(def.key, beat);
        }
      }
    }
  }

  onPodsChanged(): void {
    if (!this.reachable) return;
    this.later(T.apiRttMs / 2 + this.node.net.latencyMs, () => {
      if (!this.reachable) return;
      for (const def of this.world.parentsOn(this.node.name)) {
        const pod = this.world.api.podFor(this.node.name, def.key);
        const sig = pod ? `${pod.uid}/${pod.spec.hash}` : 'none';
        if (this.lastPod.get(def.key) === sig) continue;
        if (!this.states.has(def.key) && !pod) continue;
        if (!this.ensure(def.key)) continue;
        this.lastPod.set(def.key, sig);
        this.feed(def.key, { type: 'pod', pod: pod ? { uid: pod.uid, name: pod.name, specHash: pod.spec.hash } : null });
      }
    });
  }

  onApiBeat(sb: StoredBeat): void {
    if (!this.reachable || this.node.net.watchStalled) return;
    this.later(T.apiRttMs / 2 + this.node.net.latencyMs, () => {
      if (this.reachable && !this.node.net.watchStalled) this.deliver(sb.key, sb.beat);
    });
  }

  onWatchResumed(): void {
    this.relist();
  }

  private pollFiles(): void {
    for (const def of this.world.parentsOn(this.node.name)) {
      for (const role of ['parent', 'checkpoint'] as const) {
        const file = localBeatFile(def.namespace, def.key, role);
        const beat = this.node.files.get(file);
        if (!beat) continue;
        const fp = beatFingerprint(beat);
        if (this.fileSeen.get(file) === fp) continue;
        this.fileSeen.set(file, fp);
        this.deliver(def.key, beat);
      }
    }
  }

  private deliver(key: string, beat: Beat): void {
    if (!this.ensure(key)) return;
    if (beat.role === 'parent') this.delivered.set(`${key}/${beat.channel}`, beatFingerprint(beat));
    this.feed(key, { type: 'beat', beat });
  }

  // ---- actuators ----

  private act(key: string, s: ParentState, a: Action): void {
    const node = this.node;
    const w = this.world;
    const id = s.id;
    const file = manifestFile(s.namespace, key);
    switch (a.type) {
      case 'transition': {
        // As the real agent does (src/agent/run.ts): a hand-over's deadline survives a restart.
        const keep = handoverToPersist(s, this.mono());
        if (keep) node.disk.handovers.set(id, { deadlineWall: node.clock.wall(w.q.now) + keep.remainingMs, attempts: keep.attempts, nextBackoffMs: keep.nextBackoffMs });
        else node.disk.handovers.delete(id);
        w.onTransition(node, key, a.from, a.to, a.reason, s);
        return;
      }
      case 'event':
        w.log(node.name, 'event', `${a.eventType} ${a.reason}: ${a.message}`, key);
        return;
      case 'confirm':
        this.later(T.apiRttMs + 2 * node.net.latencyMs, () => {
          if (!w.api.reachableFrom(node)) return this.feed(key, { type: 'confirmed', outcome: 'unavailable' });
          for (const ch of a.channels) {
            const beat = w.api.readBeat(ch, s.namespace, leaseName(key, node.name));
            if (beat && beatFingerprint(beat) !== this.delivered.get(`${key}/${ch}`)) {
              this.delivered.set(`${key}/${ch}`, beatFingerprint(beat));
              return this.feed(key, { type: 'confirmed', outcome: 'changed', beat });
            }
          }
          this.feed(key, { type: 'confirmed', outcome: 'unchanged' });
        });
        return;
      case 'capture':
        this.later(T.actuatorMs + T.apiRttMs + node.net.latencyMs, () => {
          const pod = w.api.pods.get(a.pod.uid);
          if (!w.api.reachableFrom(node) || !pod) {
            return this.feed(key, { type: 'actionFailed', action: 'capture', error: pod ? 'api-server unreachable' : 'pod gone' });
          }
          node.disk.checkpoints.set(id, { spec: pod.spec });
          w.invariants.checkpointStored(node, key, pod.spec);
          w.log(node.name, 'agent', `captured ${id} generation ${pod.spec.generation} (${a.reason})`, key);
          this.feed(key, { type: 'captured', specHash: pod.spec.hash });
        });
        return;
      case 'activate':
        w.invariants.activating(node, key, a.reason);
        this.later(T.actuatorMs, () => {
          const cp = node.disk.checkpoints.get(id);
          if (!cp) return this.feed(key, { type: 'actionFailed', action: 'activate', error: 'no stored checkpoint' });
          node.disk.manifests.set(file, { role: 'checkpoint', spec: cp.spec });
          w.log(node.name, 'agent', `wrote manifest ${file} (generation ${cp.spec.generation})`, key);
          this.feed(key, { type: 'activated' });
        });
        return;
      case 'retire':
        this.later(T.actuatorMs, () => {
          node.disk.manifests.delete(file);
          w.log(node.name, 'agent', `removed manifest ${file}`, key);
          this.feed(key, { type: 'retired' });
        });
        return;
      case 'collect':
        w.invariants.collecting(node, key);
        this.later(T.actuatorMs, () => {
          node.disk.manifests.delete(file);
          node.disk.checkpoints.delete(id);
          w.log(node.name, 'agent', `collected checkpoint ${id}`, key);
          this.feed(key, { type: 'collected' });
        });
        return;
    }
  }
}
