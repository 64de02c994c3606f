// The three-node test bed's control plane, as objects: the single node's (test/node/manifests.ts),
// changed only where three masters behind a load balancer need it.
//
// - etcd: one member per node (a static pod each), peers on the nodes' bridge addresses; each
//   api-server talks to its own node's member, as kubeadm's stacked etcd does.
// - kube-apiserver: binds every address of its node (the load balancer reaches it on the bridge,
//   the heartbeat probes it on loopback) and advertises the load balancer's address. One DaemonSet
//   template serves the three nodes, so a per-node address would come from the downward API; the
//   api-server's copy must start before any api-server answers, so its flags name no field the
//   kubelet learns from one.
// - every client (the heartbeat sidecars here; kubelets, scheduler, controller-manager and the
//   agent through their kubeconfigs and deploy/overlays/cluster) talks to the load balancer.
// - the three parents are made by the shipped recipes (the parent-kube-system and parent-kube-apiserver,
//   -scheduler, -controller-manager components of deploy/components, applied by
//   kustomize), as on the single node: the sidecar, its readiness probe and the port sharing are
//   what an operator installs.
import type { TestbedEnv } from '../node/env.js';
import { ETCD_CLIENT_PORT, ETCD_PEER_PORT, type Handover, selfHostedFromComponents, staticManifests } from '../node/manifests.js';

export const NODES = ['m1', 'm2', 'm3'] as const;
export type NodeName = (typeof NODES)[number];
export const LB_IP = '10.213.0.10';
export const LB_PORT = 6443;
export const nodeIp = (n: string) => `10.213.0.1${n.slice(1)}`;

type Container = {
  name: string;
  command?: string[];
  env?: Array<{ name: string; value?: string }>;
  readinessProbe?: object;
  resources?: { requests?: Record<string, string> };
};
type PodSpec = { containers: Container[]; initContainers?: Container[] };

function podSpec(obj: { kind?: string; spec?: unknown }): PodSpec | null {
  if (obj.kind === 'Pod') return obj.spec as PodSpec;
  if (obj.kind === 'DaemonSet') return (obj.spec as { template: { spec: PodSpec } }).template.spec;
  return null;
}

function clusterApiserverCommand(command: string[]): string[] {
  return command.map((a) => {
    if (a.startsWith('--advertise-address=')) return `--advertise-address=${LB_IP}`;
    if (a.startsWith('--bind-address=')) return '--bind-address=0.0.0.0';
    return a;
  });
}

/**
 * Ready only when /readyz says so, as kubeadm's api-server pods are: the DaemonSet controller's
 * rolling update waits for Ready (a spec that never serves stalls the rollout on its first node
 * instead of taking every master), and a hung or cut-off api-server's pod is shown NotReady.
 * Under `handover: redirect` the probe asks 127.0.0.2, the address the agent's redirect never
 * moves (as the recipe's sidecar does), so it judges the pod's own api-server, not its checkpoint.
 */
function apiserverReadiness(command: string[], host: string): object {
  const port = Number(command.find((a) => a.startsWith('--secure-port='))?.split('=')[1]);
  if (!Number.isInteger(port)) throw new Error('the kube-apiserver command has no --secure-port flag');
  return { httpGet: { host, port, path: '/readyz', scheme: 'HTTPS' }, periodSeconds: 2, timeoutSeconds: 2, failureThreshold: 2 };
}

/**
 * What kubeadm's manifests request for each control-plane component. Without a request a pod is
 * BestEffort: on the kubelet's cgroups its whole QoS class weighs 2 shares against the Burstable
 * class's sum of requests (lastseen's: the agent's 20m, each sidecar's 10m; 81 shares when read on
 * the bed), so while any of those run, etcd and the api-servers get a fortieth of the node: a
 * starvation no kubeadm cluster has.
 */
const KUBEADM_REQUESTS: Record<string, Record<string, string>> = {
  '/usr/local/bin/etcd': { cpu: '100m', memory: '100Mi' },
  '/usr/local/bin/kube-apiserver': { cpu: '250m' },
  '/usr/local/bin/kube-controller-manager': { cpu: '200m' },
  '/usr/local/bin/kube-scheduler': { cpu: '100m' },
};

/**
 * The bed's control-plane requests: kubeadm's, or none (`LASTSEEN_CLUSTER_REQUESTS=none`: BestEffort
 * pods, as every run before 2026-12-07 had them). Any other value is refused, not taken for either.
 */
export function controlPlaneRequests(): 'kubeadm' | 'none' {
  const v = process.env.LASTSEEN_CLUSTER_REQUESTS ?? 'kubeadm';
  if (v !== 'kubeadm' && v !== 'none') throw new Error(`LASTSEEN_CLUSTER_REQUESTS=${v}: expected kubeadm or none`);
  return v;
}

function withKubeadmRequests(c: Container): void {
  const requests = c.command?.[0] && KUBEADM_REQUESTS[c.command[0]];
  if (!requests || c.resources?.requests || controlPlaneRequests() === 'none') return;
  c.resources = { ...c.resources, requests: { ...requests } };
}

/** Every container of the object: api-server flags for three masters, in-cluster clients to the load balancer, kubeadm's requests. */
function forCluster<T extends { kind?: string; spec?: unknown }>(obj: T, probeHost = '127.0.0.1'): T {
  const spec = podSpec(obj);
  if (!spec) return obj;
  for (const c of spec.containers) if (c.command?.[0] === '/usr/local/bin/kube-apiserver') c.readinessProbe = apiserverReadiness(c.command, probeHost);
  for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
    withKubeadmRequests(c);
    if (c.command?.[0] === '/usr/local/bin/kube-apiserver') c.command = clusterApiserverCommand(c.command);
    for (const e of c.env ?? []) {
      if (e.name === 'KUBERNETES_SERVICE_HOST') e.value = LB_IP;
      if (e.name === 'KUBERNETES_SERVICE_PORT') e.value = String(LB_PORT);
    }
  }
  return obj;
}

/** etcd's flags for one member of the three. Timeouts for a loaded 2-core machine (the defaults are 100 ms / 1 s). */
export function etcdCommand(env: TestbedEnv, node: string): string[] {
  const ip = nodeIp(node);
  return [
    '/usr/local/bin/etcd',
    `--name=${node}`,
    `--data-dir=${env.dir}/etcd-data`,
    `--listen-client-urls=http://127.0.0.1:${ETCD_CLIENT_PORT},http://${ip}:${ETCD_CLIENT_PORT}`,
    `--advertise-client-urls=http://${ip}:${ETCD_CLIENT_PORT}`,
    `--listen-peer-urls=http://${ip}:${ETCD_PEER_PORT}`,
    `--initial-advertise-peer-urls=http://${ip}:${ETCD_PEER_PORT}`,
    `--initial-cluster=${NODES.map((n) => `${n}=http://${nodeIp(n)}:${ETCD_PEER_PORT}`).join(',')}`,
    '--initial-cluster-state=new',
    '--initial-cluster-token=lastseen-cluster',
    '--heartbeat-interval=250',
    '--election-timeout=2500',
    // LASTSEEN_CLUSTER_ETCD_LOG=info for the members' elections and slow applies (warn: only the latter).
    `--log-level=${process.env.LASTSEEN_CLUSTER_ETCD_LOG ?? 'warn'}`,
  ];
}

/** One node's static pods: its etcd member and a temporary api-server, scheduler and controller-manager (`bootstrap-*`). */
export function clusterStaticManifests(env: TestbedEnv, node: string): Record<string, object> {
  const out: Record<string, object> = {};
  for (const [file, obj] of Object.entries(staticManifests(env))) {
    const o = forCluster(obj as { kind?: string; spec?: unknown });
    if (file === 'etcd.yaml') {
      const etcd = (o.spec as PodSpec).containers[0];
      if (!etcd) throw new Error('the etcd static pod has no container');
      etcd.command = etcdCommand(env, node);
    }
    out[file] = o;
  }
  return out;
}

/**
 * The self-hosted control plane's DaemonSets made parents by the shipped recipes, and what their
 * heartbeats need, for the three masters. `redirect` adds deploy/components/parent-kube-apiserver-redirect
 * (the api-server binds its port alone; its probes ask 127.0.0.2); the policy is the caller's.
 */
export function clusterSelfHostedObjects(env: TestbedEnv, policyYaml: string, handover: Handover): object[] {
  const probeHost = handover === 'redirect' ? '127.0.0.2' : '127.0.0.1';
  return selfHostedFromComponents(env, policyYaml, handover).map((o) => forCluster(o as { kind?: string; spec?: unknown }, probeHost));
}
