// The api-server as the nodes see it, plus the controllers behind it (a DaemonSet controller per
// parent key). Its state (etcd) survives everything; its *availability* is not a switch but the
// readiness of some api-server instance, a parent pod or a checkpoint copy, on a node that is up
// and not partitioned. A node reaches it only while it is itself up and not partitioned.
import type { Beat, Channel } from '../core/types.js';
import type { PodSpec, SimNode } from './model.js';
import { T } from './model.js';
import type { World } from './world.js';

export interface ApiPod {
  uid: string;
  name: string;
  node: string;
  spec: PodSpec;
  /** Restarts of its container, as its kubelet last reported them (status.containerStatuses[].restartCount). */
  restarts: number;
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
  readonly pods = new Map<string, ApiPod>();
  /** DaemonSet specs by parent key. */
  readonly desired = new Map<string, PodSpec>();
  private nextUid = 0;
  private creating = new Set<string>();

  constructor(private readonly world: World) {}

  /** Nodes with a serving api-server instance that can reach etcd. */
  instances(): SimNode[] {
    const out: SimNode[] = [];
    for (const n of this.world.nodes.values()) {
      if (!n.up || n.net.partitioned) continue;
      const k = this.world.kubelets.get(n.name);
      if (k && [...k.pods.values()].some((p) => p.spec?.apiServer && k.serving(p))) out.push(n);
    }
    return out;
  }

  available(): boolean {
    return this.instances().length > 0;
  }

  reachableFrom(node: SimNode): boolean {
    return node.up && !node.net.partitioned && this.available();
  }

  podsOn(node: string): ApiPod[] {
    return [...this.pods.values()].filter((p) => p.node === node);
  }

  podFor(node: string, key: string): ApiPod | null {
    return [...this.pods.values()].find((p) => p.node === node && p.spec.key === key) ?? null;
  }

  static beatKey(channel: Channel, namespace: string, name: string): string {
    return `${channel}/${namespace}/${name}`;
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
    const pod = { uid, name: `${spec.key}-${uid.slice(4)}`, node, spec, restarts: 0 };
    this.pods.set(uid, pod);
    this.world.onApiPodsChanged(node);
    return pod;
  }

  /** A kubelet pushed a pod's status: its agent's pod watch sees a changed restart count. */
  reportRestarts(uid: string, restarts: number): void {
    const p = this.pods.get(uid);
    if (!p || p.restarts === restarts) return;
    p.restarts = restarts;
    this.world.onApiPodStatus(p.node);
  }

  deletePod(uid: string): void {
    const p = this.pods.get(uid);
    if (!p) return;
    this.pods.delete(uid);
    this.world.onApiPodsChanged(p.node);
  }

  /** The DaemonSet controller: every node in the parent's set gets one pod of the desired spec. */
  reconcile(): void {
    if (!this.available()) return;
    for (const def of this.world.scenario.parents) {
      const spec = this.desired.get(def.key)!;
      for (const node of def.nodes) {
        const pod = this.podFor(node, def.key);
        // Rolling update, delete first: a pod of an old generation is replaced, one node at a time
        // being enough for the model (the old pod goes before the new one exists).
        if (pod && pod.spec.hash !== spec.hash) {
          this.deletePod(pod.uid);
          continue;
        }
        const tag = `${node}/${def.key}`;
        if (pod || this.creating.has(tag)) continue;
        this.creating.add(tag);
        this.world.q.after(T.controllerMs, () => {
          this.creating.delete(tag);
          if (this.available() && !this.podFor(node, def.key)) this.createPod(node, this.desired.get(def.key)!);
        });
      }
    }
  }
}
