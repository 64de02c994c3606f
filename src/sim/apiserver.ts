// The api-server as the nodes see it, plus the controllers behind it (the DaemonSet controller,
// daemonset.ts). Its state (etcd) survives everything; its *availability* is not a switch but the
// readiness of some api-server instance, a parent pod or a checkpoint copy, on a node that is up
// and not partitioned. A node reaches it only while it is itself up and not partitioned, and
// through an instance its links let it talk to (network.ts).
import type { V1Lease } from '@kubernetes/client-node';
import type { Beat, Channel } from '../core/types.js';
import { DaemonSetController, type RollingUpdate } from './daemonset.js';
import type { PodSpec, SimNode } from './model.js';
import type { World } from './world.js';

const isApiServer = (spec: PodSpec): boolean => spec.apiServer;

export interface ApiPod {
  uid: string;
  name: string;
  node: string;
  spec: PodSpec;
  /** Restarts of its container, as its kubelet last reported them (status.containerStatuses[].restartCount). */
  restarts: number;
  /** Its last exit, as last reported, was the kubelet's `Unknown` (lost with its node). */
  lastExitUnknown: boolean;
  /** How long the run that ended in its last exit lasted (ms; null: no exit, or one the kubelet calls Unknown). */
  lastExitRanMs: number | null;
  /**
   * Its Ready condition as its kubelet last reported it: since when it is True (the kubelet's
   * transition time, true ms), null while False or never reported.
   */
  readySince: number | null;
}

export interface StoredBeat {
  node: string;
  namespace: string;
  key: string;
  beat: Beat;
}

export class ApiServer {
  /** Lease / annotation beats by `${channel}/${namespace}/${name}`. */
  readonly beats = new Map<string, StoredBeat>();
  /** The heartbeat Leases as objects, by `${namespace}/${name}` (src/sim/beat-client.ts writes them). */
  readonly leaseObjects = new Map<string, V1Lease>();
  /** Each pod's annotations, by pod uid (the annotation channel's writes). */
  readonly podAnnotations = new Map<string, Record<string, string>>();
  /** The nodes' Leases in kube-node-lease: node name -> last renewal, on that node's wall clock (its kubelet writes it). */
  readonly nodeLeases = new Map<string, number>();
  private resourceVersion = 0;
  readonly pods = new Map<string, ApiPod>();
  /** DaemonSet specs by parent key. */
  readonly desired = new Map<string, PodSpec>();
  /** The same pods by node, each in creation order (the controller asks per node, every second). */
  private readonly podsByNode = new Map<string, Map<string, ApiPod>>();
  private nextUid = 0;
  readonly daemonsets: DaemonSetController;
  /** Nodes that had an instance when last looked at; only touched nodes are looked at again. */
  private readonly instanceNodes = new Set<SimNode>();

  constructor(private readonly world: World) {
    this.daemonsets = new DaemonSetController(world, this);
  }

  /** A serving api-server instance on `n` that can reach etcd (what a kubelet that asks only its own node's reaches). */
  hasInstance(n: SimNode): boolean {
    if (!n.up || n.net.partitioned) return false;
    const k = this.world.kubelets.get(n.name);
    if (!k) return false;
    // The same measure as the outcomes: a share of the port held by a process that does not serve
    // fails its share of the connections, so the node has no instance to count on.
    return k.answeredBy(isApiServer) !== null;
  }

  /** Nodes with a serving api-server instance that can reach etcd. */
  instances(): SimNode[] {
    const out: SimNode[] = [];
    for (const n of this.world.nodes.values()) if (this.hasInstance(n)) out.push(n);
    return out;
  }

  /**
   * Some instance serves. Asked many times per event, so kept incrementally: only nodes touched
   * since the last event (World.touch) can have gained or lost one (`full` checks walk them all).
   */
  available(): boolean {
    const w = this.world;
    if (w.check === 'full') return this.instances().length > 0;
    for (const n of w.touched) {
      if (this.hasInstance(n)) this.instanceNodes.add(n);
      else this.instanceNodes.delete(n);
    }
    const avail = this.instanceNodes.size > 0;
    if (w.check === 'verify' && avail !== this.instances().length > 0)
      throw new Error(`verify: api-server availability changed at ${w.q.now} ms without a touch`);
    return avail;
  }

  /** The nodes with an instance now (kept as available() keeps them; `full` checks walk them all). */
  private serving(): Iterable<SimNode> {
    if (this.world.check === 'full') return this.instances();
    this.available();
    return this.instanceNodes;
  }

  /** Some instance serving now passes `through` (network.ts: which legs the link faults leave). */
  private through(node: SimNode, passes: (server: string) => boolean): boolean {
    if (!node.up || node.net.partitioned) return false;
    if (this.world.net.whole) return this.available();
    for (const s of this.serving()) if (passes(s.name)) return true;
    return false;
  }

  /** A round trip from the node (a probe, a read, the kubelet's sync) succeeds through some instance. */
  reachableFrom(node: SimNode): boolean {
    const net = this.world.net;
    return this.through(node, (s) => net.requestPasses(node.name, s) && net.answerPasses(s, node.name));
  }

  /** A write from the node lands on some instance (its answer may be lost). */
  writesFrom(node: SimNode): boolean {
    return this.through(node, (s) => this.world.net.requestPasses(node.name, s));
  }

  /** Answers and watch events of some instance reach the node. */
  deliversTo(node: SimNode): boolean {
    return this.through(node, (s) => this.world.net.answerPasses(s, node.name));
  }

  podsOn(node: string): ApiPod[] {
    const on = this.podsByNode.get(node);
    return on ? [...on.values()] : [];
  }

  /** Every pod of the parent on the node, oldest first (two while a rollout surges there). */
  podsFor(node: string, key: string): ApiPod[] {
    const out: ApiPod[] = [];
    const on = this.podsByNode.get(node);
    if (on) for (const p of on.values()) if (p.spec.key === key) out.push(p);
    return out;
  }

  /** The oldest pod of the parent on the node. */
  podFor(node: string, key: string): ApiPod | null {
    const on = this.podsByNode.get(node);
    if (on) for (const p of on.values()) if (p.spec.key === key) return p;
    return null;
  }

  static beatKey(channel: Channel, namespace: string, name: string): string {
    return `${channel}/${namespace}/${name}`;
  }

  /** The next resourceVersion (one counter for every object, as etcd's revision). */
  nextResourceVersion(): number {
    return ++this.resourceVersion;
  }

  writeBeat(channel: Channel, name: string, sb: StoredBeat): void {
    const k = ApiServer.beatKey(channel, sb.namespace, name);
    this.beats.set(k, sb);
    this.world.onApiBeat(sb);
  }

  readBeat(channel: Channel, namespace: string, name: string): Beat | null {
    return this.beats.get(ApiServer.beatKey(channel, namespace, name))?.beat ?? null;
  }

  // ---- objects and the controllers (they act only while the api-server is available) ----

  /** Create the pod directly (cluster bootstrap, before any api-server runs). */
  createPod(node: string, spec: PodSpec): ApiPod {
    const uid = `uid-${++this.nextUid}`;
    const pod = { uid, name: `${spec.key}-${uid.slice(4)}`, node, spec, restarts: 0, lastExitUnknown: false, lastExitRanMs: null, readySince: null };
    this.pods.set(uid, pod);
    let on = this.podsByNode.get(node);
    if (!on) {
      on = new Map();
      this.podsByNode.set(node, on);
    }
    on.set(uid, pod);
    this.world.onApiPodsChanged(node);
    return pod;
  }

  /** A kubelet pushed a pod's status: its agent's pod watch sees a changed restart count. */
  reportRestarts(uid: string, restarts: number, lastExitUnknown: boolean, lastExitRanMs: number | null): void {
    const p = this.pods.get(uid);
    if (!p || (p.restarts === restarts && p.lastExitUnknown === lastExitUnknown && p.lastExitRanMs === lastExitRanMs)) return;
    p.restarts = restarts;
    p.lastExitUnknown = lastExitUnknown;
    p.lastExitRanMs = lastExitRanMs;
    this.world.onApiPodStatus(p.node);
  }

  /**
   * A kubelet pushed a pod's Ready condition (readyAt: when it turned True; null: False). Only the
   * DaemonSet controller reads it; the model agent's pod watch looks at spec and restarts, so a
   * change of Ready alone is not an event for it.
   */
  reportReady(uid: string, readyAt: number | null): void {
    const p = this.pods.get(uid);
    if (p) p.readySince = readyAt;
  }

  /** A new spec generation of the parent (the rollout fault), rolled out with `strategy`. */
  rollout(fault: number, spec: PodSpec, strategy: RollingUpdate): void {
    this.daemonsets.rollout(fault, spec.key, spec.generation, spec.hash, strategy);
    this.desired.set(spec.key, spec);
  }

  /**
   * Delete a pod: gone from every list at once for the kubelets and the DaemonSet controller, as the
   * model always had it, but its object stays, marked as being deleted (a deletionTimestamp), until
   * its kubelet says it has stopped it (podGone): the agents' pod watches see it (deletingFor), and
   * the DaemonSet controller creates no pod without surge on that node meanwhile (as the real one).
   */
  deletePod(uid: string): void {
    const p = this.pods.get(uid);
    if (!p) return;
    this.pods.delete(uid);
    this.podsByNode.get(p.node)?.delete(uid);
    this.deleting.set(uid, p);
    this.deleted.add(`${p.node}/${p.spec.key}`);
    this.world.onApiPodsChanged(p.node);
  }

  /** Node and key of every pod ever deleted (the invariants' evidence for a ParentDeleted activation). */
  private readonly deleted = new Set<string>();

  deletedOn(node: string, key: string): boolean {
    return this.deleted.has(`${node}/${key}`);
  }

  /** Pods being deleted, by uid (see deletePod). */
  private readonly deleting = new Map<string, ApiPod>();

  /** The kubelet stopped a pod being deleted: its object is gone. */
  podGone(uid: string): void {
    const p = this.deleting.get(uid);
    if (!p || !this.available()) return;
    this.deleting.delete(uid);
    this.world.onApiPodsChanged(p.node);
  }

  /** The uids of the pods being deleted on the node. */
  deletingOn(node: string): string[] {
    const out: string[] = [];
    for (const p of this.deleting.values()) if (p.node === node) out.push(p.uid);
    return out;
  }

  /** The pods of the key being deleted on the node, in the order they were deleted. */
  deletingFor(node: string, key: string): ApiPod[] {
    const out: ApiPod[] = [];
    for (const p of this.deleting.values()) if (p.node === node && p.spec.key === key) out.push(p);
    return out;
  }

  /** The DaemonSet controller (daemonset.ts) acts only while an api-server is available. */
  reconcile(): void {
    if (!this.available()) return;
    this.daemonsets.reconcile();
  }
}
