// Where the light client (light-client.ts) sends its requests, and with which credentials: the
// same sources as `loadKubeConfig` (src/kube/client.ts), in the same order, without
// @kubernetes/client-node: --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster.
//
// Covered: a server with its CA (file or data) or insecure-skip-tls-verify and tls-server-name;
// credentials as a bearer token (inline or tokenFile, re-read as the kubelet rotates it), a client
// certificate and key (files or data), or basic auth. That is the service account of a pod (what the
// sidecar uses) and the kubeconfigs kubeadm and the test control plane write. Not covered, refused
// with a message: exec and auth-provider plugins, proxy-url and impersonation; the agent and
// `lastseen status` (client-node) take those. Relative file paths in a kubeconfig are relative to
// the kubeconfig's own folder, as in kubectl. Several $KUBECONFIG files merge as kubectl merges
// them: the first file to set a value wins.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';

/** A kubeconfig that cannot be used; the message names the source tried and what to do. */
export class KubeConfigError extends Error {}

export interface Tls {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  servername?: string;
  rejectUnauthorized?: boolean;
}

/** An api-server and how to talk to it. */
export interface Endpoint {
  /** Base URL, e.g. https://10.96.0.1:443 (no trailing slash). */
  server: string;
  tls: Tls;
  /** Headers for the next request (Authorization); re-reads a rotated token file. */
  headers(): Promise<Record<string, string>>;
}

/** Reads TLS material and credentials when called: a fresh client picks up rotated files. */
export type EndpointSource = () => Promise<Endpoint>;

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-go re-reads a token file once a minute; so do we. */
const TOKEN_FILE_TTL_MS = 60_000;

/** A token file, re-read at most once a minute (the kubelet rotates projected tokens long before expiry). */
export function tokenFileHeader(file: string, now: () => number = () => performance.now()): () => Promise<Record<string, string>> {
  let token = '';
  let readAt = Number.NEGATIVE_INFINITY;
  return async () => {
    if (now() - readAt >= TOKEN_FILE_TTL_MS) {
      token = readFileSync(file, 'utf8').trim();
      readAt = now();
    }
    return { authorization: `Bearer ${token}` };
  };
}

/** The endpoint of a client-node KubeConfig (library users and tests hand one to startHeartbeat). */
export function endpointFromKubeConfig(kc: KubeConfig): EndpointSource {
  return async () => {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new KubeConfigError('the kubeconfig has no current cluster');
    const o: Tls & { headers?: Record<string, string> } = {};
    await kc.applyToHTTPSOptions(o as Parameters<KubeConfig['applyToHTTPSOptions']>[0]);
    const { ca, cert, key, servername, rejectUnauthorized } = o;
    return {
      server: cluster.server.replace(/\/+$/, ''),
      tls: Object.fromEntries(Object.entries({ ca, cert, key, servername, rejectUnauthorized }).filter(([, v]) => v !== undefined)),
      headers: async () => {
        const h: { headers?: Record<string, string> } = {};
        await kc.applyToHTTPSOptions(h as Parameters<KubeConfig['applyToHTTPSOptions']>[0]);
        return { ...h.headers };
      },
    };
  };
}

/** The in-cluster endpoint: the service's host and port from the environment, the service account's CA and token. */
export function inClusterEndpoint(env: NodeJS.ProcessEnv = process.env, dir: string = SERVICE_ACCOUNT_DIR): EndpointSource {
  return async () => {
    const host = env.KUBERNETES_SERVICE_HOST;
    const port = env.KUBERNETES_SERVICE_PORT ?? '443';
    if (!host) throw new KubeConfigError('in-cluster: KUBERNETES_SERVICE_HOST is unset');
    return {
      server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
      tls: { ca: readFileSync(join(dir, 'ca.crt')) },
      headers: tokenFileHeader(join(dir, 'token')),
    };
  };
}

type Doc = Record<string, unknown>;
const isDoc = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);

interface Named {
  name: string;
  value: Doc;
  /** The kubeconfig file it came from: relative paths resolve against its folder. */
  file: string;
}

function namedList(doc: Doc, list: string, field: string, file: string): Named[] {
  const items = Array.isArray(doc[list]) ? (doc[list] as unknown[]) : [];
  return items.filter(isDoc).flatMap((i) => (typeof i.name === 'string' && isDoc(i[field]) ? [{ name: i.name, value: i[field] as Doc, file }] : []));
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** The endpoint named by the current context of these kubeconfig files (merged: the first to set a value wins). */
export function endpointFromKubeconfigFiles(files: string[], source: string): EndpointSource {
  const docs: Array<{ doc: Doc; file: string }> = [];
  for (const file of files) {
    if (!existsSync(file)) continue;
    let doc: unknown;
    try {
      doc = parse(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new KubeConfigError(`cannot load kubeconfig ${source}: ${(e as Error).message}`);
    }
    if (isDoc(doc)) docs.push({ doc, file });
  }
  const current = docs.map((d) => str(d.doc['current-context'])).find(Boolean);
  if (!current) throw new KubeConfigError(`no current-context in kubeconfig ${source}`);
  const find = (list: string, field: string, name: string | undefined): Named | undefined =>
    name === undefined ? undefined : docs.flatMap((d) => namedList(d.doc, list, field, d.file)).find((n) => n.name === name);
  const context = find('contexts', 'context', current);
  if (!context) throw new KubeConfigError(`context "${current}" not found in kubeconfig ${source}`);
  const cluster = find('clusters', 'cluster', str(context.value.cluster));
  if (!cluster || !str(cluster.value.server)) throw new KubeConfigError(`no current cluster in kubeconfig ${source}`);
  const user = find('users', 'user', str(context.value.user)) ?? { name: '', value: {}, file: cluster.file };
  const c = cluster.value;
  const u = user.value;
  const unsupported = ['exec', 'auth-provider', 'as', 'as-groups', 'as-uid'].filter((f) => u[f] !== undefined).map((f) => `user ${f}`);
  if (c['proxy-url'] !== undefined) unsupported.push('cluster proxy-url');
  if (unsupported.length > 0)
    throw new KubeConfigError(
      `kubeconfig ${source}: ${unsupported.join(', ')} is not supported by the heartbeat's light api client (in-cluster service accounts, tokens and client certificates are); use a token or a client certificate`,
    );
  const path = (p: string, file: string) => (isAbsolute(p) ? p : join(dirname(file), p));
  // *-data (base64) wins over the file, as in kubectl.
  const material = (data: unknown, file: unknown, from: string): Buffer | undefined => {
    if (str(data)) return Buffer.from(data as string, 'base64');
    if (str(file)) return readFileSync(path(file as string, from));
    return undefined;
  };
  const server = (c.server as string).replace(/\/+$/, '');
  return async () => {
    const tls: Tls = {};
    const ca = material(c['certificate-authority-data'], c['certificate-authority'], cluster.file);
    if (ca) tls.ca = ca;
    if (c['insecure-skip-tls-verify'] === true) tls.rejectUnauthorized = false;
    if (str(c['tls-server-name'])) tls.servername = c['tls-server-name'] as string;
    const cert = material(u['client-certificate-data'], u['client-certificate'], user.file);
    const key = material(u['client-key-data'], u['client-key'], user.file);
    if (cert) tls.cert = cert;
    if (key) tls.key = key;
    let headers: () => Promise<Record<string, string>> = async () => ({});
    if (str(u.token)) headers = async () => ({ authorization: `Bearer ${u.token as string}` });
    else if (str(u.tokenFile)) headers = tokenFileHeader(path(u.tokenFile as string, user.file));
    else if (str(u.username)) {
      const basic = Buffer.from(`${u.username as string}:${str(u.password) ?? ''}`).toString('base64');
      headers = async () => ({ authorization: `Basic ${basic}` });
    }
    return { server, tls, headers };
  };
}

/**
 * The endpoint from the given kubeconfig file, else $KUBECONFIG, else ~/.kube/config, else
 * in-cluster: `loadKubeConfig`'s order and messages. Throws KubeConfigError at once when no source
 * exists or the file does not name a usable cluster.
 */
export function loadEndpoint(kubeconfigPath?: string, env: NodeJS.ProcessEnv = process.env, home: string = homedir()): EndpointSource {
  const fromEnv = env.KUBECONFIG?.split(delimiter).filter(Boolean) ?? [];
  const homeConfig = join(home, '.kube', 'config');
  if (kubeconfigPath) {
    const source = `${kubeconfigPath} (--kubeconfig)`;
    if (!existsSync(kubeconfigPath)) throw new KubeConfigError(`kubeconfig ${source} does not exist`);
    return endpointFromKubeconfigFiles([kubeconfigPath], source);
  }
  if (fromEnv.length > 0) {
    const source = `${env.KUBECONFIG} ($KUBECONFIG)`;
    if (!fromEnv.some((f) => existsSync(f))) throw new KubeConfigError(`kubeconfig ${source} does not exist`);
    return endpointFromKubeconfigFiles(fromEnv, source);
  }
  if (existsSync(homeConfig)) return endpointFromKubeconfigFiles([homeConfig], homeConfig);
  if (env.KUBERNETES_SERVICE_HOST) return inClusterEndpoint(env);
  throw new KubeConfigError(
    `no kubeconfig: --kubeconfig not given, $KUBECONFIG unset, ${homeConfig} missing, and not in a pod (KUBERNETES_SERVICE_HOST unset); pass --kubeconfig FILE`,
  );
}
