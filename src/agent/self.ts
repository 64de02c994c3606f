// The agent's own checkpoint. After a full reboot no api-server exists to start the agent's
// DaemonSet pod, so the agent keeps a copy of itself permanently in the kubelet's static-pod
// folder: it comes back as a static pod first and acts until the DaemonSet's pod runs again, then
// hands that pod the node lock (run-lock.ts) and stands by. This copy is outside the decision core: it is never silent,
// never handed over and never collected; it is refreshed whenever the agent's own pod spec (or the
// data it mounts) changes, and while the copy itself acts it follows the DaemonSet's pod, so an
// update of the DaemonSet reaches it.
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { capture, type DataResolver } from '../checkpoint/capture.js';
import type { ManifestDir } from '../checkpoint/manifests.js';
import { hashManifest, sanitize } from '../checkpoint/sanitize.js';
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
  /** Reads what the copy mounts (Secrets, ConfigMaps, tokens); by default through `kube()`. */
  resolver?: () => DataResolver;
}

/**
 * On the copy's manifest: a hash of the data the copy mounts, its service-account tokens left out
 * (copyDataHash). A running copy's containers bind-mount its folder, and a store save swaps that
 * folder for a new one and deletes the old: the running copy would be left on a deleted folder,
 * without its service-account token and ca.crt, unless the kubelet restarts it, which it does
 * only when the manifest changes. So the manifest changes whenever the data does, and a capture
 * whose data differs only in its tokens (minted anew on every capture; the token refresher renews
 * them in place) is not saved at all.
 */
export const ANNOTATION_COPY_DATA = 'lastseen.dev/copy-data';

/** sha256 over the captured entries (path and bytes, sorted by path) but the tokens at `tokenPaths`. */
export function copyDataHash(data: ReadonlyMap<string, Buffer>, tokenPaths: ReadonlySet<string>): string {
  const h = createHash('sha256');
  for (const path of [...data.keys()].sort()) {
    if (tokenPaths.has(path)) continue;
    const bytes = data.get(path) as Buffer;
    h.update(`${JSON.stringify(path)} ${bytes.length}\n`);
    h.update(bytes);
  }
  return h.digest('hex');
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
 * Set on the copy's agent container (`"true"`): the agent knows it is the copy from its first
 * instant, before any api-server could tell it, so it stands by for its DaemonSet's pod and hands
 * that pod the node lock (run-lock.ts). An env var, not a flag: an older agent (a downgrade) ignores it.
 */
export const COPY_ENV = 'LASTSEEN_AGENT_COPY';

/**
 * The pod the agent's own copy is captured from: the same, but serving its health endpoints on the
 * next port, and told it is the copy (COPY_ENV). Both agents use the host's network and run side by side (the DaemonSet pod as a
 * standby while the copy acts, after a reboot; the copy as a standby otherwise): on one port the
 * second to start could not bind and would crash-loop (found on a real kubelet).
 */
export function copyOfAgentPod(pod: V1Pod): V1Pod {
  const copy = structuredClone(pod);
  for (const c of copy.spec?.containers ?? []) {
    if (c.args?.[0] !== 'agent' && c.command?.[1] !== 'agent') continue;
    c.env = [...(c.env ?? []).filter((e) => e.name !== COPY_ENV), { name: COPY_ENV, value: 'true' }];
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

/** Every container of the pod runs (the kubelet reports one status per container). */
function running(pod: V1Pod): boolean {
  const statuses = pod.status?.containerStatuses ?? [];
  return statuses.length > 0 && statuses.length === (pod.spec?.containers.length ?? 0) && statuses.every((c) => c.state?.running !== undefined);
}

export class SelfCheckpoint {
  private lastHash: string | null = null;
  private busy = false;
  /** Ids of the agent's own copies seen on disk; the caller keeps them away from the core. */
  readonly ids = new Set<string>();

  constructor(private readonly d: SelfCheckpointDeps) {}

  /** The copy's own id once this agent has seen its own pod as a mirror pod: it is the static copy. */
  private copyOf: string | null = null;

  /**
   * Whether the copy is to be captured from this pod: the agent's own pod when it runs from its
   * DaemonSet; when this agent is the copy itself (its own pod is a mirror pod: after a reboot, or
   * when the DaemonSet's pod was replaced and the copy took the node lock), the DaemonSet's agent
   * pod on this node that the copy is a copy of (same id), once its containers run. So a DaemonSet
   * update reaches the copy too: the kubelet restarts the copy on the new spec, and the DaemonSet's
   * new pod, standing by with its standby sign up, takes over (the restarted copy leaves it the
   * lock, run-lock.ts) and becomes Ready: the rollout finishes. Without it the old copy
   * acted on and the new pod stood by, never Ready (found upgrading on a real kubelet). A pod whose
   * containers do not run yet (or cannot: an image that does not pull) is not followed, so the
   * copy never trades the agent that runs for one that may not. Learns which agent it is from the
   * pods it is shown (the caller passes every pod of the node).
   */
  isOwnDaemonSetPod(pod: V1Pod): boolean {
    const md = pod.metadata ?? {};
    if (md.namespace !== this.d.namespace || md.deletionTimestamp) return false;
    if (md.annotations?.[MIRROR_ANNOTATION] !== undefined) {
      if (md.name === this.d.podName) this.copyOf = selfId(pod);
      return false;
    }
    if (md.name === this.d.podName) return true;
    return (
      this.copyOf !== null &&
      isAgentCopy(md.labels) &&
      pod.spec?.nodeName === this.d.node &&
      (md.ownerReferences ?? []).some((o) => o.kind === 'DaemonSet' && o.controller !== false) &&
      selfId(pod) === this.copyOf &&
      running(pod)
    );
  }

  /**
   * Capture the agent's own copy from `pod` and keep it stored and active, when the pod's spec is
   * one not looked at yet. The copy on disk is rewritten only when its manifest (spec, or the data
   * it mounts: ANNOTATION_COPY_DATA) changes; then the kubelet restarts the copy on the new folder.
   * The copy carries what the pod mounts, the service account's token, ca.crt and namespace
   * included (the parent capture path: the `kube-api-access` volume becomes a folder of the copy).
   */
  async refresh(pod: V1Pod): Promise<void> {
    if (this.busy || !this.isOwnDaemonSetPod(pod)) return;
    this.busy = true;
    try {
      const id = selfId(pod);
      this.ids.add(id);
      const key = id.slice(id.indexOf('/') + 1);
      const now = new Date((this.d.wallNow ?? Date.now)()).toISOString();
      const copy = copyOfAgentPod(pod);
      const opts = { parentKey: key, node: this.d.node, checkpointDir: this.d.store.checkpointDir(id), capturedAt: now, lastReadyAt: now };
      // Asked on every publish: without I/O, a spec looked at already is not captured again.
      const looked = sanitize(copy, opts).specHash;
      if (looked === this.lastHash) return;
      const r = await capture(copy, opts, this.d.resolver?.() ?? kubeResolver(this.d.kube(), this.d.node));
      const tokens = new Set((r.capture.tokens ?? []).map((t) => t.relPath));
      const manifest = structuredClone(r.capture.manifest);
      manifest.metadata = { ...manifest.metadata, annotations: { ...manifest.metadata?.annotations, [ANNOTATION_COPY_DATA]: copyDataHash(r.data, tokens) } };
      const specHash = hashManifest(manifest);
      const stored = await this.d.store.load(id).catch(() => null);
      if (stored?.specHash === specHash) {
        // The same copy but for the pod it came from and its tokens: kept, its folder untouched.
        await this.d.manifests.activate(id, stored.manifest);
        this.lastHash = looked;
        return;
      }
      await this.d.store.save(id, { ...r.capture, manifest, specHash }, r.data);
      await this.d.manifests.activate(id, manifest);
      this.lastHash = looked;
      this.d.logger.info(
        { checkpoint: id, specHash, from: pod.metadata?.name, asCopy: this.copyOf !== null },
        this.copyOf !== null
          ? "the agent's own checkpoint follows its DaemonSet's pod: stored and active, the kubelet restarts this copy on it"
          : "the agent's own checkpoint is stored and active",
      );
    } catch (e) {
      this.d.logger.warn({ err: (e as Error).message }, "could not refresh the agent's own checkpoint; the previous copy stays");
    } finally {
      this.busy = false;
    }
  }
}
