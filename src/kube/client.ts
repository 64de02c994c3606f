// Api clients for the heartbeat and the agent, over @kubernetes/client-node 2.x (undici fetch).
//
// Two things client-node does not do by itself, and why we need them:
// - A request timeout. client-node sends with no deadline, so a half-open TCP connection can hang
//   a heartbeat for minutes. Every request here carries an AbortSignal that fires after
//   `requestTimeoutMs` (callers pick it shorter than their interval).
// - A connection pool that can be thrown away. client-node 2.0 builds a new undici Agent (a new
//   pool) inside every request's authentication step, so no connection is reused: a TLS handshake
//   per beat (1.4 did the same with https.Agent). Each KubeClient here owns one keep-alive
//   undici Agent; `makeKubeClient` again gives a fresh pool, which is what the kubelet's lease
//   controller does after repeated failures (a connection stuck to a dead api-server endpoint is
//   dropped).
//
// Authentication stays client-node's (tokens, exec plugins, client certificates, impersonation);
// only the dispatcher and the signal are replaced, in a middleware that runs after it.

import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  createConfiguration,
  KubeConfig,
  type RequestContext,
  ServerConfiguration,
} from '@kubernetes/client-node';
import { Agent, type Dispatcher } from 'undici';
import type { BeatClient } from './beat-client.js';
import { KubeConfigError } from './light-config.js';
import { jsonPatchOptions, mergePatchOptions } from './patch.js';

/**
 * Sockets per client. A heartbeat sends one request per channel per beat; the agent a few watches
 * plus reads. Eight leaves room for both without letting a retry storm open hundreds.
 */
const MAX_SOCKETS = 8;

export { KubeConfigError };

/**
 * Load a KubeConfig: the given file, else $KUBECONFIG, else ~/.kube/config, else in-cluster. Each
 * failure names the source it tried (a missing $KUBECONFIG file is not "the default"), and finding
 * none at all says so, instead of client-node's fallback to http://localhost:8080.
 */
export function loadKubeConfig(kubeconfigPath?: string, env: NodeJS.ProcessEnv = process.env, home: string = homedir()): KubeConfig {
  const kc = new KubeConfig();
  const fromEnv = env.KUBECONFIG?.split(delimiter).filter(Boolean) ?? [];
  const homeConfig = join(home, '.kube', 'config');
  let source: string;
  if (kubeconfigPath) {
    source = `${kubeconfigPath} (--kubeconfig)`;
    if (!existsSync(kubeconfigPath)) throw new KubeConfigError(`kubeconfig ${source} does not exist`);
  } else if (fromEnv.length > 0) {
    source = `${env.KUBECONFIG} ($KUBECONFIG)`;
    if (!fromEnv.some((f) => existsSync(f))) throw new KubeConfigError(`kubeconfig ${source} does not exist`);
  } else if (existsSync(homeConfig)) {
    source = homeConfig;
  } else if (env.KUBERNETES_SERVICE_HOST) {
    source = 'in-cluster (service account)';
  } else {
    throw new KubeConfigError(
      `no kubeconfig: --kubeconfig not given, $KUBECONFIG unset, ${homeConfig} missing, and not in a pod (KUBERNETES_SERVICE_HOST unset); pass --kubeconfig FILE`,
    );
  }
  try {
    if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
    else kc.loadFromDefault();
  } catch (e) {
    throw new KubeConfigError(`cannot load kubeconfig ${source}: ${(e as Error).message}`);
  }
  if (!kc.getCurrentCluster()) throw new KubeConfigError(`no current cluster in kubeconfig ${source}`);
  return kc;
}

export interface KubeClientOptions {
  /** Abort each request after this long (ms). Pick it shorter than the interval it serves. */
  requestTimeoutMs: number;
  /** Called as each request is sent (tests and metrics count requests per beat with it). */
  onRequest?: (method: string, url: string) => void;
}

/** The agent's client; it also serves a heartbeat writer's few requests (BeatClient), through client-node. */
export interface KubeClient extends BeatClient {
  readonly coordination: CoordinationV1Api;
  readonly core: CoreV1Api;
  /** Custom resources (the agent's NodeCheckpoint), on the same pool. */
  readonly custom: CustomObjectsApi;
  readonly kubeConfig: KubeConfig;
  readonly requestTimeoutMs: number;
  /** Close this client's pooled connections. Requests in flight fail; later ones open new sockets. */
  close(): void;
}

/** Types the factory can build; the adapters only need these two. */
export function makeKubeClient(kc: KubeConfig, opts: KubeClientOptions): KubeClient {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  if (!(opts.requestTimeoutMs > 0)) throw new Error(`requestTimeoutMs must be positive, got ${opts.requestTimeoutMs}`);

  let pool: Promise<Dispatcher | undefined> | null = null;
  const pools: Agent[] = [];
  // The TLS material is read once per client: a fresh client (after failures) picks up rotated files.
  const buildPool = async (): Promise<Dispatcher | undefined> => {
    // Proxies need client-node's own proxy dispatchers; keep them (one per request, as client-node does).
    if (cluster.proxyUrl) return undefined;
    const o: { ca?: unknown; cert?: unknown; key?: unknown; pfx?: unknown; passphrase?: string; servername?: string; rejectUnauthorized?: boolean } = {};
    await kc.applyToHTTPSOptions(o as Parameters<KubeConfig['applyToHTTPSOptions']>[0]);
    const tls = Object.fromEntries(
      Object.entries({
        ca: o.ca,
        cert: o.cert,
        key: o.key,
        pfx: o.pfx,
        passphrase: o.passphrase,
        servername: o.servername,
        rejectUnauthorized: o.rejectUnauthorized,
      }).filter(([, v]) => v !== undefined),
    );
    // keepAliveInitialDelay 30 s: client-go's and client-node's TCP keep-alive probe start.
    const a = new Agent({ connections: MAX_SOCKETS, connect: { ...tls, keepAlive: true, keepAliveInitialDelay: 30_000 } });
    pools.push(a);
    return a;
  };

  const middleware = {
    pre: async (ctx: RequestContext): Promise<RequestContext> => {
      pool ??= buildPool().catch((e) => {
        pool = null;
        throw e;
      });
      const d = await pool;
      if (d) ctx.setDispatcher(d);
      ctx.setSignal(AbortSignal.timeout(opts.requestTimeoutMs));
      opts.onRequest?.(ctx.getHttpMethod(), ctx.getUrl());
      return ctx;
    },
    post: async <T>(rsp: T): Promise<T> => rsp,
  };
  // One middleware only: client-node (1.4 and 2.0) reverses the middleware array in place on every
  // response; one is all we need anyway.
  const config = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    promiseMiddleware: [middleware],
  });
  const coordination = new CoordinationV1Api(config);
  const core = new CoreV1Api(config);
  const custom = new CustomObjectsApi(config);
  return {
    coordination,
    core,
    custom,
    readLease: (ref) => coordination.readNamespacedLease(ref),
    createLease: (ref) => coordination.createNamespacedLease(ref),
    replaceLease: (ref) => coordination.replaceNamespacedLease(ref),
    mergePatchLease: (ref) => coordination.patchNamespacedLease(ref, mergePatchOptions()),
    readPod: (ref) => core.readNamespacedPod(ref),
    mergePatchPod: (ref) => core.patchNamespacedPod(ref, mergePatchOptions()),
    jsonPatchPod: (ref) => core.patchNamespacedPod(ref, jsonPatchOptions()),
    kubeConfig: kc,
    requestTimeoutMs: opts.requestTimeoutMs,
    close() {
      for (const a of pools.splice(0)) void a.destroy().catch(() => {});
      pool = null;
    },
  };
}
