// The agent's own checkpoint. After a full reboot no api-server exists to start the agent's
// DaemonSet pod, so the agent keeps a copy of itself permanently in the kubelet's static-pod
// folder: it comes back as a static pod first, and the node lock (lock.ts) keeps the DaemonSet pod
// as a standby while the copy acts. This copy is outside the decision core: it is never silent,
// never handed over and never collected; it is refreshed whenever the agent's own pod spec changes.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { capture } from '../checkpoint/capture.js';
import type { ManifestDir } from '../checkpoint/manifests.js';
import type { Store } from '../checkpoint/store.js';
import { parentId, parentKey } from '../core/names.js';
import type { KubeClient } from '../kube/client.js';
import { kubeResolver } from './actuators.js';

const MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

export interface SelfCheckpointDeps {
  node: string;
  podName: string;
  namespace: string;
  store: Store;
  manifests: ManifestDir;
  kube: () => KubeClient;
  logger: Logger;
  wallNow?: () => number;
}

/** The parent id under which the agent keeps its own copy, derived from its pod (DaemonSet name). */
export function selfId(pod: V1Pod): string {
  const md = pod.metadata ?? {};
  const key = parentKey({
    name: md.name ?? '',
    labels: md.labels ?? {},
    ownerReferences: (md.ownerReferences ?? []).map((o) => ({ kind: o.kind, name: o.name, controller: o.controller ?? true })),
  });
  return parentId(md.namespace ?? '', key);
}

/** A stored checkpoint that is a copy of a lastseen agent (its pod labels say so). */
export function isAgentCopy(labels: Record<string, string> | undefined): boolean {
  return labels?.['app.kubernetes.io/name'] === 'lastseen' && labels?.['app.kubernetes.io/component'] === 'agent';
}

const HEALTH_PORT_FLAG = /^--health-port=(\d+)$/;
/** The agent's health port when its pod names none (run.ts DEFAULT_HEALTH_PORT; not imported, run.ts imports this file). */
const DEFAULT_PORT = 9870;

/**
 * The pod the agent's own copy is captured from: the same, but serving its health endpoints on the
 * next port. Both agents use the host's network and run side by side (the DaemonSet pod as a
 * standby while the copy acts, after a reboot; the copy as a standby otherwise): on one port the
 * second to start could not bind and would crash-loop (found on a real kubelet).
 */
export function copyOfAgentPod(pod: V1Pod): V1Pod {
  const copy = structuredClone(pod);
  for (const c of copy.spec?.containers ?? []) {
    if (c.args?.[0] !== 'agent' && c.command?.[1] !== 'agent') continue;
    const args = c.args ?? [];
    const at = args.findIndex((a) => HEALTH_PORT_FLAG.test(a));
    const port = at >= 0 ? Number(HEALTH_PORT_FLAG.exec(args[at] as string)?.[1]) : DEFAULT_PORT;
    if (port === 0) continue; // any free port: nothing to move
    const next = `--health-port=${port + 1}`;
    if (at >= 0) args[at] = next;
    else args.push(next);
    c.args = args;
    const named = new Set((c.ports ?? []).filter((p) => p.containerPort === port).map((p) => p.name));
    for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
      const get = probe?.httpGet;
      if (get && (get.port === port || named.has(get.port as unknown as string))) get.port = port + 1;
    }
    c.ports = (c.ports ?? []).filter((p) => p.containerPort !== port);
    if (c.ports.length === 0) delete c.ports;
  }
  return copy;
}

export class SelfCheckpoint {
  private lastHash: string | null = null;
  private busy = false;
  /** Ids of the agent's own copies seen on disk; the caller keeps them away from the core. */
  readonly ids = new Set<string>();

  constructor(private readonly d: SelfCheckpointDeps) {}

  /**
   * Whether the copy is to be captured from this pod: the agent's own pod, run from its DaemonSet
   * (not its static copy's mirror pod). The static copy does not capture from the DaemonSet's pod:
   * a copy captured by the copy could not reach the api-server (no service-account files), and on
   * the real node the copy then took the node lock after a pod deletion and never handed the
   * api-server back. So an agent upgrade does not yet reach a copy that holds the lock (a known
   * limit, docs/install.md).
   */
  isOwnDaemonSetPod(pod: V1Pod): boolean {
    const md = pod.metadata ?? {};
    return md.name === this.d.podName && md.namespace === this.d.namespace && md.annotations?.[MIRROR_ANNOTATION] === undefined && !md.deletionTimestamp;
  }

  /** Capture and activate the agent's own copy from its pod, when the spec is new. */
  async refresh(pod: V1Pod): Promise<void> {
    if (this.busy || !this.isOwnDaemonSetPod(pod)) return;
    this.busy = true;
    try {
      const id = selfId(pod);
      this.ids.add(id);
      const key = id.slice(id.indexOf('/') + 1);
      const now = new Date((this.d.wallNow ?? Date.now)()).toISOString();
      const r = await capture(
        copyOfAgentPod(pod),
        { parentKey: key, node: this.d.node, checkpointDir: this.d.store.checkpointDir(id), capturedAt: now, lastReadyAt: now },
        kubeResolver(this.d.kube(), this.d.node),
      );
      if (r.capture.specHash === this.lastHash) return;
      await this.d.store.save(id, r.capture, r.data);
      await this.d.manifests.activate(id, r.capture.manifest);
      this.lastHash = r.capture.specHash;
      this.d.logger.info({ checkpoint: id, specHash: r.capture.specHash }, "the agent's own checkpoint is stored and active");
    } catch (e) {
      this.d.logger.warn({ err: (e as Error).message }, "could not refresh the agent's own checkpoint; the previous copy stays");
    } finally {
      this.busy = false;
    }
  }
}
