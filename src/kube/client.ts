// Api clients for the heartbeat and the agent, over @kubernetes/client-node 1.4.
//
// Two things client-node does not do by itself, and why we need them:
// - A request timeout. client-node sends through node-fetch with no deadline, so a half-open TCP
//   connection can hang a heartbeat for minutes. Every request here carries an AbortSignal that
//   fires after `requestTimeoutMs` (callers pick it shorter than their interval).
// - A connection pool that can be thrown away. client-node 1.4 builds a new https.Agent for every
//   request (no keep-alive: a TLS handshake per beat). Each KubeClient here owns one keep-alive
//   agent; `makeKubeClient` again gives a fresh pool, which is what the kubelet's lease controller
//   does after repeated failures (a connection stuck to a dead api-server endpoint is dropped).
//
// Authentication stays client-node's (tokens, exec plugins, client certificates, impersonation);
// only the agent and the signal are replaced, in a middleware that runs after it.
import * as http from 'node:http';
import * as https from 'node:https';
import { CoordinationV1Api, CoreV1Api, createConfiguration, KubeConfig, type RequestContext, ServerConfiguration } from '@kubernetes/client-node';

/**
 * Sockets per client. A heartbeat sends one request per channel per beat; the agent a few watches
 * plus reads. Eight leaves room for both without letting a retry storm open hundreds.
 */
const MAX_SOCKETS = 8;

/** Load a KubeConfig: the given file, else $KUBECONFIG / ~/.kube/config, else in-cluster. */
export function loadKubeConfig(kubeconfigPath?: string): KubeConfig {
  const kc = new KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromDefault();
  if (!kc.getCurrentCluster()) throw new Error(`no current cluster in ${kubeconfigPath ?? 'the default kubeconfig'}`);
  return kc;
}

export interface KubeClientOptions {
  /** Abort each request after this long (ms). Pick it shorter than the interval it serves. */
  requestTimeoutMs: number;
  /** Called as each request is sent (tests and metrics count requests per beat with it). */
  onRequest?: (method: string, url: string) => void;
}

export interface KubeClient {
  readonly coordination: CoordinationV1Api;
  readonly core: CoreV1Api;
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

  let agent: Promise<http.Agent | undefined> | null = null;
  const agents: http.Agent[] = [];
  // The TLS material is read once per client: a fresh client (after failures) picks up rotated files.
  const buildAgent = async (): Promise<http.Agent | undefined> => {
    // Proxies need client-node's own proxy agents; keep them (one per request, as before).
    if (cluster.proxyUrl) return undefined;
    const o: https.RequestOptions & { servername?: string } = {};
    await kc.applyToHTTPSOptions(o);
    const a = cluster.server.startsWith('http:')
      ? new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS })
      : new https.Agent({
          keepAlive: true,
          maxSockets: MAX_SOCKETS,
          ca: o.ca,
          cert: o.cert,
          key: o.key,
          pfx: o.pfx,
          passphrase: o.passphrase,
          servername: o.servername,
          ...(o.rejectUnauthorized !== undefined ? { rejectUnauthorized: o.rejectUnauthorized } : {}),
        });
    agents.push(a);
    return a;
  };

  const middleware = {
    pre: async (ctx: RequestContext): Promise<RequestContext> => {
      agent ??= buildAgent().catch((e) => {
        agent = null;
        throw e;
      });
      const a = await agent;
      if (a) ctx.setAgent(a);
      ctx.setSignal(AbortSignal.timeout(opts.requestTimeoutMs));
      opts.onRequest?.(ctx.getHttpMethod(), ctx.getUrl());
      return ctx;
    },
    post: async <T>(rsp: T): Promise<T> => rsp,
  };
  // One middleware only: client-node 1.4 reverses the middleware array in place on every response.
  const config = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    promiseMiddleware: [middleware],
  });
  return {
    coordination: new CoordinationV1Api(config),
    core: new CoreV1Api(config),
    kubeConfig: kc,
    requestTimeoutMs: opts.requestTimeoutMs,
    close() {
      for (const a of agents.splice(0)) a.destroy();
      agent = null;
    },
  };
}
