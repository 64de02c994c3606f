// The agent's actuators: the real files (checkpoint store, kubelet manifest directory) and the
// real api-server (live reads, secrets for capture, Events). Each call does one thing and either
// resolves or rejects with an error that names the object and the cause; the loop turns a
// rejection into `actionFailed` so the core retries later. Nothing here decides.
import { mkdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { beatFromPod } from '../channels/annotation.js';
import { beatFromLease } from '../channels/lease.js';
import { capture, type DataResolver } from '../checkpoint/capture.js';
import type { ManifestDir } from '../checkpoint/manifests.js';
import { sanitize } from '../checkpoint/sanitize.js';
import type { Store } from '../checkpoint/store.js';
import { leaseName, localBeatFile } from '../core/names.js';
import type { Timers } from '../core/time.js';
import type { Action, Beat, Channel } from '../core/types.js';
import type { KubeClient } from '../kube/client.js';
import { classifyKubeError } from '../kube/errors.js';
import { type Actuators, CollectRefusedError, type LiveRead, type ParentView } from './agent.js';
import { fenceThroughSidecar } from './fence.js';
import { parentsOnNode } from './parents.js';
import type { RedirectTable } from './redirect.js';
import { redirectedProbes } from './redirect-probes.js';

export const COMPONENT = 'lastseen-agent';

/** The flag that lets kube-apiserver (and the scheduler, controller-manager) bind with SO_REUSEPORT. */
const PORT_SHARING_FLAG = /^--permit-port-sharing(=(true|1|t|T|TRUE|True))?$/;

/**
 * The checkpoint's manifest without port sharing: `--permit-port-sharing` (and `=true`) removed
 * from every container's command and args. A copy started from it binds its ports alone, so a
 * crash-looping known-bad parent (which shares) fails to bind instead of taking a share of the
 * connections (Linux refuses a SO_REUSEPORT bind on a port held without it, and vice versa).
 */
export function withoutPortSharing(manifest: V1Pod): V1Pod {
  const strip = (xs: string[] | undefined) => xs?.filter((x) => !PORT_SHARING_FLAG.test(x));
  const copy = structuredClone(manifest);
  for (const c of [...(copy.spec?.containers ?? []), ...(copy.spec?.initContainers ?? [])]) {
    if (c.command) c.command = strip(c.command)!;
    if (c.args) c.args = strip(c.args)!;
  }
  return copy;
}

/** Some container of the manifest binds with port sharing (the flag `withoutPortSharing` removes). */
export function sharesPorts(manifest: V1Pod): boolean {
  return [...(manifest.spec?.containers ?? []), ...(manifest.spec?.initContainers ?? [])].some((c) =>
    [...(c.command ?? []), ...(c.args ?? [])].some((x) => PORT_SHARING_FLAG.test(x)),
  );
}

/**
 * The checkpoint's manifest for `handover: redirect` (docs/decisions/0012-one-listener-per-port.md): the copy serves on
 * `copyPort` instead of the parent's `port`. In every container: `--secure-port=<port>` and the
 * heartbeat sidecar's `--probe=<url>` with `host:<port>` name the copy's port, and probes on the
 * port move with it. Nothing else is rewritten: a URL with the port elsewhere (a service-account
 * issuer such as `https://10.0.0.10:6443`, an audience) is an identity the copy must keep. A
 * kube-apiserver copy runs without its endpoint reconciler, so it never publishes its own port as
 * the `kubernetes` Service's endpoint.
 */
export function withCopyPort(manifest: V1Pod, ports: { port: number; copyPort: number }): V1Pod {
  const { port, copyPort } = ports;
  const copy = structuredClone(manifest);
  const arg = (x: string) =>
    x === `--secure-port=${port}`
      ? `--secure-port=${copyPort}`
      : x.startsWith('--probe=')
        ? x.replace(new RegExp(`([\\w\\].-]):${port}(?=$|[/?#])`), `$1:${copyPort}`)
        : x;
  const probe = (pr: { httpGet?: { port?: unknown }; tcpSocket?: { port?: unknown }; grpc?: { port?: unknown } } | undefined) => {
    for (const h of [pr?.httpGet, pr?.tcpSocket, pr?.grpc]) if (h && h.port === port) h.port = copyPort;
  };
  for (const c of [...(copy.spec?.containers ?? []), ...(copy.spec?.initContainers ?? [])]) {
    if (c.command) c.command = c.command.map(arg);
    if (c.args) c.args = c.args.map(arg);
    probe(c.livenessProbe);
    probe(c.readinessProbe);
    probe(c.startupProbe);
    const all = [...(c.command ?? []), ...(c.args ?? [])];
    if (all.some((x) => /(^|\/)kube-apiserver$/.test(x))) {
      const secure = all.some((x) => x.startsWith('--secure-port='));
      const extra = [...(secure ? [] : [`--secure-port=${copyPort}`]), '--endpoint-reconciler-type=none'];
      const strip = (xs: string[]) => xs.filter((x) => !x.startsWith('--endpoint-reconciler-type'));
      if (c.args) c.args = [...strip(c.args), ...extra];
      else c.command = [...strip(c.command ?? []), ...extra];
    }
  }
  return copy;
}

/** Where the api-server keeps Events about cluster-scoped objects (as it does for Nodes). */
export const CLUSTER_SCOPED_EVENTS_NAMESPACE = 'default';

export interface ActuatorDeps {
  /** The node's redirects (`handover: redirect`); none: this agent cannot redirect. */
  redirects?: RedirectTable;
  node: string;
  /** The agent pod's own name, reported as the Events' reporting instance. */
  instance: string;
  store: Store;
  manifests: ManifestDir;
  /** Null while running without an api-server (file-only tests); api actions then reject. */
  kube: () => KubeClient | null;
  /**
   * A client on fresh connections for one live read, closed after it (default: `kube`). A live read
   * confirms a silence that may be a stalled connection, so it must not ride a kept-alive socket
   * of the pool: when a NAT or conntrack table loses its entries, established flows (the watch, and
   * every pooled socket) are black-holed while new connections work, and a read on a pooled socket
   * would time out, report "unavailable", and under `whenApiUnreachable: activate` cover a parent
   * that is beating. One TLS handshake per confirmation; confirmations happen only on silence.
   */
  freshKube?: () => KubeClient | null;
  logger: Logger;
  wallNow?: () => number;
  /**
   * The node's local heartbeat folder. A retired or collected checkpoint's own beat file is removed
   * from it: left behind, its last beat would be the first thing a later activation of the same
   * parent reads, a "Ready" written by a container that no longer exists.
   */
  heartbeatDir?: string;
  /** Told every manifest written (the manifest observer compares the folder with it: run-recover.ts). */
  onManifestWritten?(id: string, manifest: V1Pod): void;
  /**
   * Timers for the kept Events' retry (EVENT_RETRY_MS). Without them kept Events wait for the next
   * flush asked for (an api-server judged reachable again, a new Event).
   */
  timers?: Timers;
}

/**
 * Kept Events are tried again this often while any are kept: an outage shorter than the agent's
 * reachability verdict (a restarting api-server, seen in gc.test's kill) never says "reachable
 * again", and without a retry its Events waited for the next Event, which may never come.
 */
export const EVENT_RETRY_MS = 10_000;

/**
 * Spec hashes by pod object. Every pod event hands the loop every parent's pod again (the pod watch
 * keeps one object per pod and replaces it when the pod changes), and sanitizing each of them each
 * time made a node's pod events cost O(parents): at 200 parents, the 400 events of their creation
 * and first status were 80,000 sanitized copies, the agent's largest burst of garbage.
 */
const specHashes = new WeakMap<object, Map<string, string>>();

export function specHashOf(deps: Pick<ActuatorDeps, 'node' | 'store'>, id: string, key: string, pod: V1Pod): string {
  const checkpointDir = deps.store.checkpointDir(id);
  const memoKey = `${deps.node}\0${key}\0${checkpointDir}`;
  const memo = specHashes.get(pod);
  const known = memo?.get(memoKey);
  if (known !== undefined) return known;
  let hash: string;
  try {
    hash = sanitize(pod, { parentKey: key, node: deps.node, checkpointDir }).specHash;
  } catch {
    hash = ''; // an unsanitizable pod; capture will fail with the reason
  }
  if (memo) memo.set(memoKey, hash);
  else specHashes.set(pod, new Map([[memoKey, hash]]));
  return hash;
}

export function kubeResolver(k: KubeClient, node: string): DataResolver {
  const read = async <T>(what: string, f: () => Promise<T>): Promise<T | null> => {
    try {
      return await f();
    } catch (e) {
      const err = classifyKubeError(e, what);
      if (err.kind === 'notFound') return null;
      throw new Error(err.message);
    }
  };
  const decode = (m: Record<string, string> | undefined, base64: boolean) =>
    Object.fromEntries(Object.entries(m ?? {}).map(([k2, v]) => [k2, Buffer.from(v, base64 ? 'base64' : 'utf8')]));
  return {
    secret: async (namespace, name) => {
      const s = await read(`secret ${namespace}/${name}`, () => k.core.readNamespacedSecret({ name, namespace }));
      return s ? decode(s.data, true) : null;
    },
    configMap: async (namespace, name) => {
      const c = await read(`configmap ${namespace}/${name}`, () => k.core.readNamespacedConfigMap({ name, namespace }));
      return c ? { ...decode(c.data, false), ...decode(c.binaryData, true) } : null;
    },
    serviceAccountToken: async (namespace, name, audience, expirationSeconds) => {
      const t = await k.core.createNamespacedServiceAccountToken({
        name,
        namespace,
        // Bound to the node, so the copy's token carries the node name the admission policy checks.
        body: {
          spec: {
            audiences: audience ? [audience] : [],
            boundObjectRef: { apiVersion: 'v1', kind: 'Node', name: node },
            ...(expirationSeconds ? { expirationSeconds } : {}),
          },
        },
      });
      const token = t.status?.token;
      if (!token) throw new Error(`TokenRequest for serviceaccount ${namespace}/${name} returned no token`);
      return Buffer.from(token);
    },
  };
}

/** A namespaced object an agent Event can be about. */
export interface EventTarget {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
}

/** Events kept while the api-server does not answer, sent in order once it does; the oldest go first when full. */
export const MAX_EVENT_BACKLOG = 100;

export function makeActuators(d: ActuatorDeps): Actuators<V1Pod> & {
  nodeEvent(e: Extract<Action, { type: 'event' }>, about?: EventTarget): Promise<void>;
  /** Send the Events kept during an outage (called when the api-server is reachable again). */
  flushEvents(): Promise<void>;
  /** No more retries of kept Events (the agent's turn ends). */
  stopEvents(): void;
} {
  const wallNow = d.wallNow ?? Date.now;
  const kube = (what: string): KubeClient => {
    const k = d.kube();
    if (!k) throw new Error(`cannot ${what}: no api-server client`);
    return k;
  };
  const removeCheckpointBeat = async (p: ParentView<V1Pod>): Promise<void> => {
    if (!d.heartbeatDir) return;
    const file = join(d.heartbeatDir, localBeatFile(p.namespace, p.key, 'checkpoint'));
    try {
      await unlink(file);
    } catch (e) {
      // Gone already is the goal; anything else is logged, not fatal: the retire itself happened.
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        d.logger.warn({ parent: p.id, file, err: (e as Error).message }, "could not remove the retired checkpoint's heartbeat file");
    }
  };
  const backlog: Array<{ namespace: string; prefix: string; body: CoreV1Event; kept?: boolean }> = [];
  let flushing: Promise<void> | null = null;
  let again = false;
  let retry: unknown = null;
  let stopped = false;

  return {
    async capture(p, info) {
      const pod = p.pod;
      if (!pod || pod.metadata?.uid !== info.uid)
        throw new Error(`cannot capture ${p.id}: pod ${info.name} (${info.uid}) is no longer the one the api-server shows`);
      const lastReady = p.state.lastChangeAt !== null ? new Date(wallNow()).toISOString() : null;
      const r = await capture(
        pod,
        { parentKey: p.key, node: d.node, checkpointDir: d.store.checkpointDir(p.id), capturedAt: new Date(wallNow()).toISOString(), lastReadyAt: lastReady },
        kubeResolver(kube(`capture ${p.id}`), d.node),
      );
      const written = await d.store.save(p.id, r.capture, r.data);
      d.logger.info({ parent: p.id, specHash: r.capture.specHash, written, warnings: r.warnings }, 'checkpoint captured');
      // Behind a redirect, the parent's own probes must reach the parent (redirect-probes.ts): said at each capture of a spec whose probes do not.
      const policy = p.state.policy;
      const redirected = policy.handover === 'redirect' && policy.redirect ? redirectedProbes(pod, policy.redirect) : [];
      if (redirected.length > 0) {
        const message = `${p.id}: spec ${r.capture.specHash}: ${redirected.join('; ')}`;
        d.logger.warn(
          { parent: p.id, specHash: r.capture.specHash, probes: redirected },
          'probes of the parent that the redirect would send to its checkpoint',
        );
        const involved = { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name, namespace: p.namespace, uid: pod.metadata?.uid };
        // Not awaited: the capture is done, and an Event waits for the api-server (kept while it does not answer).
        void recordEvent(p.namespace, p.key, involved, { type: 'event', eventType: 'Warning', reason: 'ProbeRedirected', message }).catch((e: unknown) =>
          d.logger.warn({ parent: p.id, err: (e as Error).message }, 'could not record the ProbeRedirected Event'),
        );
      }
      return { specHash: r.capture.specHash };
    },
    async activate(p, _reason, exclusive) {
      const c = await d.store.load(p.id);
      if (!c) throw new Error(`cannot activate ${p.id}: no complete checkpoint in ${d.store.checkpointDir(p.id)}`);
      // A folder removed from under the agent is made again: the kubelet watches its path, and a
      // copy that cannot be written covers nothing.
      await mkdir(d.manifests.dir, { recursive: true });
      const pol = p.state.policy;
      if (pol.handover === 'redirect' && !pol.redirect) throw new Error(`cannot activate ${p.id}: handover "redirect" without redirect ports in its policy`);
      const manifest =
        pol.handover === 'redirect' && pol.redirect ? withCopyPort(c.manifest, pol.redirect) : exclusive === true ? withoutPortSharing(c.manifest) : c.manifest;
      await d.manifests.activate(p.id, manifest);
      d.onManifestWritten?.(p.id, manifest);
    },
    async retire(p) {
      await d.manifests.retire(p.id);
      await removeCheckpointBeat(p);
    },
    async collect(p) {
      // The last word before deleting what may be the only copy of a control-plane component:
      // read live, on a fresh connection, that no pod for this key is scheduled here. The watch
      // that started the grace may be older than an outage that began a moment ago.
      const fresh = d.freshKube?.() ?? null;
      const k = fresh ?? d.kube();
      if (!k) throw new CollectRefusedError('no api-server client for the live read');
      try {
        const list = await k.core.listNamespacedPod({ namespace: p.namespace, fieldSelector: `spec.nodeName=${d.node}` });
        if (parentsOnNode(list.items, d.node).has(p.id)) throw new CollectRefusedError('the live read found a pod for this parent scheduled here');
      } catch (e) {
        if (e instanceof CollectRefusedError) throw e;
        throw new CollectRefusedError(`the live read failed: ${classifyKubeError(e, `pods of ${p.namespace} on ${d.node}`).message}`);
      } finally {
        fresh?.close();
      }
      await d.manifests.retire(p.id);
      await removeCheckpointBeat(p);
      await d.store.remove(p.id);
    },
    async redirect(p, on) {
      const t = d.redirects;
      if (!t) throw new Error(`cannot redirect for ${p.id}: this agent has no redirect table (nft)`);
      const r = p.state.policy.redirect;
      if (on && !r) throw new Error(`cannot redirect for ${p.id}: its policy names no redirect ports`);
      await t.set(p.id, on && r ? { parent: p.id, port: r.port, toPort: r.copyPort, exceptAddress: r.exceptAddress } : null);
    },
    redirectStanding: (id) => d.redirects?.holds(id) ?? false,
    async fence(p, podUid, reason, evenIfStarved) {
      if (!d.heartbeatDir) throw new Error("no heartbeat folder: the agent cannot ask a parent's sidecar to fence it (--heartbeat-dir)");
      return fenceThroughSidecar({ heartbeatDir: d.heartbeatDir }, p, podUid, reason, evenIfStarved);
    },
    async readLive(p, channels): Promise<LiveRead> {
      const fresh = d.freshKube?.() ?? null;
      const k = fresh ?? d.kube();
      if (!k) return { unavailable: 'no api-server client' };
      const beats: Beat[] = [];
      try {
        for (const c of channels as Channel[]) {
          if (c === 'lease') {
            const name = leaseName(p.key, d.node);
            try {
              const lease = await k.coordination.readNamespacedLease({ name, namespace: p.namespace });
              const r = beatFromLease(lease, d.node);
              if (r.ok) beats.push(r.beat);
              else d.logger.warn({ parent: p.id, reason: r.reason }, 'live read: lease ignored');
            } catch (e) {
              if (classifyKubeError(e, `lease ${p.namespace}/${name}`).kind !== 'notFound') throw e;
            }
          } else if (c === 'annotation') {
            const podName = p.pod?.metadata?.name;
            if (!podName) continue;
            try {
              const pod = await k.core.readNamespacedPod({ name: podName, namespace: p.namespace });
              const r = beatFromPod(pod, d.node);
              if (r.ok) beats.push(r.beat);
            } catch (e) {
              if (classifyKubeError(e, `pod ${p.namespace}/${podName}`).kind !== 'notFound') throw e;
            }
          }
        }
      } catch (e) {
        const err = classifyKubeError(e, `live read of ${p.id}`);
        if (err.kind === 'unreachable') return { unavailable: err.message };
        throw new Error(err.message);
      } finally {
        fresh?.close();
      }
      return { beats };
    },
    async event(p, e) {
      const pod = p.pod;
      if (pod?.metadata?.uid) {
        await recordEvent(p.namespace, p.key, { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name, namespace: p.namespace, uid: pod.metadata.uid }, e);
        return;
      }
      // No pod to point at (the usual case for an activation or a collection: the parent is gone).
      // The NodeCheckpoint is cluster-scoped, and the api-server accepts an Event about a
      // cluster-scoped object only in the `default` namespace (else HTTP 422: involvedObject.namespace
      // does not match event.namespace). The message names the parent's namespace and key.
      await recordEvent(CLUSTER_SCOPED_EVENTS_NAMESPACE, p.key, { apiVersion: 'lastseen.dev/v1alpha1', kind: 'NodeCheckpoint', name: d.node }, e);
    },
    /**
     * An Event about the node's agent itself (a refused or missing policy): on `about` (the policy
     * ConfigMap or the agent's pod, in the agent's namespace, where an operator looks), else on the
     * cluster-scoped NodeCheckpoint in `default`.
     */
    async nodeEvent(e, about) {
      if (about) await recordEvent(about.namespace, 'lastseen', about, e);
      else await recordEvent(CLUSTER_SCOPED_EVENTS_NAMESPACE, 'lastseen', { apiVersion: 'lastseen.dev/v1alpha1', kind: 'NodeCheckpoint', name: d.node }, e);
    },
    flushEvents,
    stopEvents() {
      stopped = true;
      if (retry !== null) d.timers?.clear(retry);
      retry = null;
    },
  };

  async function recordEvent(namespace: string, prefix: string, involved: CoreV1Event['involvedObject'], e: Extract<Action, { type: 'event' }>): Promise<void> {
    if (!d.kube()) return; // no api-server client at all: the log has the same line
    const now = new Date(wallNow());
    const body: CoreV1Event = {
      metadata: { generateName: `${prefix}.`, namespace, labels: { 'app.kubernetes.io/managed-by': 'lastseen', 'lastseen.dev/node': d.node } },
      involvedObject: involved,
      reason: e.reason,
      message: e.message,
      type: e.eventType,
      source: { component: COMPONENT, host: d.node },
      reportingComponent: `lastseen.dev/${COMPONENT}`,
      reportingInstance: d.instance,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    backlog.push({ namespace, prefix, body });
    if (backlog.length > MAX_EVENT_BACKLOG) {
      const dropped = backlog.splice(0, backlog.length - MAX_EVENT_BACKLOG);
      for (const x of dropped)
        d.logger.warn({ target: `${x.namespace}/${x.prefix}`, reason: x.body.reason }, 'event not recorded: too many kept while the api-server did not answer');
    }
    await flushEvents();
  }

  // The Events an outage kept back (the activation of a master rebooting is decided while its
  // api-server is down): sent in order, with the time they were decided, once the api-server
  // answers. A refusal (invalid, forbidden) drops that one Event; no answer keeps them all.
  async function sendBacklog(): Promise<void> {
    while (backlog.length > 0) {
      const k = d.kube();
      if (!k) return;
      const x = backlog[0]!;
      try {
        await k.core.createNamespacedEvent({ namespace: x.namespace, body: x.body });
      } catch (err) {
        const why = classifyKubeError(err, `event ${x.body.reason}`);
        if (why.kind === 'unreachable') {
          if (!x.kept)
            d.logger.warn(
              { target: `${x.namespace}/${x.prefix}`, reason: x.body.reason, err: why.message },
              'event not recorded yet; kept until the api-server answers',
            );
          x.kept = true;
          return;
        }
        d.logger.warn({ target: `${x.namespace}/${x.prefix}`, reason: x.body.reason, err: why.message }, 'event not recorded');
      }
      // By identity: while it was being sent, a full backlog may have dropped its oldest.
      const at = backlog.indexOf(x);
      if (at >= 0) backlog.splice(at, 1);
    }
  }
  // A flush asked for while a pass is under way (the api-server judged reachable again while a send
  // that began in the outage is still waiting for its failure) runs once more after that pass: the
  // pass may end on that failure and keep the backlog, and nothing else would send it.
  function flushEvents(): Promise<void> {
    if (flushing) {
      again = true;
      return flushing;
    }
    flushing = (async () => {
      try {
        do {
          again = false;
          await sendBacklog();
        } while (again && backlog.length > 0);
      } finally {
        flushing = null;
        // Still kept (no answer): try again later whatever else happens meanwhile.
        if (backlog.length > 0 && retry === null && !stopped && d.timers) {
          retry = d.timers.set(() => {
            retry = null;
            void flushEvents();
          }, EVENT_RETRY_MS);
        }
      }
    })();
    return flushing;
  }
}
