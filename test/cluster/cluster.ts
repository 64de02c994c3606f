// The three-node test bed (scripts/cluster) as the tests and `npm run e2e:cluster` drive it: three
// kubelets v1.36.3 in namespaces of their own behind haproxy, a static or self-hosted control
// plane on them, lastseen from deploy/overlays/cluster. Needs root and `scripts/cluster ensure`.
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { manifestFile } from '../../src/core/names.js';
import { REPO, type TestbedEnv } from '../node/env.js';
import { type Handover, heartbeatStarted, testbedPolicy, withPolicy } from '../node/manifests.js';
import { CONTROL_PLANE, log, sleep } from '../node/testbed.js';
import { clusterSelfHostedObjects, clusterStaticManifests, NODES } from './manifests.js';

const run = promisify(execFile);
export const CLUSTER_SCRIPT = join(REPO, 'scripts', 'cluster');

export interface ClusterEnv {
  dir: string;
  lbSock: string;
  kubeconfig: string;
  kubectl: string;
  binDir: string;
  apiserverPort: number;
  /** Whom the kubelets ask: their own node's api-server (`local`) or the load balancer (`lb`). */
  kubeletApi: 'local' | 'lb';
}

export function clusterEnv(): ClusterEnv {
  const vars: Record<string, string> = {};
  for (const line of execFileSync(CLUSTER_SCRIPT, ['env'], { encoding: 'utf8' }).split('\n')) {
    const m = line.match(/^export (\w+)=(.*)$/);
    if (m?.[1] && m[2] !== undefined) vars[m[1]] = m[2].replace(/^"|"$/g, '');
  }
  const need = (k: string): string => {
    const v = vars[k];
    if (!v) throw new Error(`scripts/cluster env did not print ${k}`);
    return v;
  };
  const cpBin = execFileSync(join(REPO, 'scripts', 'control-plane'), ['bin-dir'], { encoding: 'utf8' }).trim();
  return {
    dir: need('LASTSEEN_CLUSTER_DIR'),
    lbSock: need('LASTSEEN_CLUSTER_LB_SOCK'),
    kubeconfig: need('LASTSEEN_CLUSTER_KUBECONFIG'),
    kubectl: join(cpBin, 'kubectl'),
    binDir: need('LASTSEEN_NODE_BIN_DIR'),
    apiserverPort: Number(need('LASTSEEN_CLUSTER_APISERVER_PORT')),
    kubeletApi: need('LASTSEEN_CLUSTER_KUBELET_API') === 'lb' ? 'lb' : 'local',
  };
}

type ContainerStatus = { name: string; ready: boolean; state?: { running?: { startedAt?: string } } };
interface PodJson {
  metadata: { name: string; annotations?: Record<string, string>; deletionTimestamp?: string };
  spec?: { nodeName?: string };
  status?: { containerStatuses?: ContainerStatus[] };
}

/** A container running since `since` (ms; container start times have whole seconds). */
function startedSince(c: ContainerStatus | undefined, since: number): boolean {
  return Date.parse(c?.state?.running?.startedAt ?? '') >= Math.floor(since / 1000) * 1000;
}

export interface PodSnapshot {
  /** Nodes where the component's DaemonSet pod is ready, its main container started after `since`. */
  serving(name: string, since?: number): Set<string>;
  /** Nodes where the agent's DaemonSet pod runs, its container started after `since`. */
  agents(since?: number): Set<string>;
}

function servingNodes(pods: PodJson[], name: string, since: number): Set<string> {
  const out = new Set<string>();
  for (const p of pods) {
    const main = p.status?.containerStatuses?.find((c) => c.name === name);
    if (p.spec?.nodeName && main?.ready && startedSince(main, since)) out.add(p.spec.nodeName);
  }
  return out;
}

export interface AgentRecord {
  time: number;
  msg: string;
  parent?: string;
  from?: string;
  to?: string;
  reason?: string;
}

/**
 * The bed's hand-over of the self-hosted api-servers unless told otherwise: the redirect, what
 * docs/real-cluster.md recommends for several masters behind a load balancer (it met every case's
 * goals there; sharing the port did not). The single node keeps overlap.
 */
export const DEFAULT_HANDOVER: Handover = 'redirect';

/** A Cluster for a test file, after checking what it needs (root, the node binaries, haproxy). */
export function realCluster(handover: Handover = DEFAULT_HANDOVER): Cluster {
  if (process.getuid?.() !== 0) throw new Error('the cluster tests need root (namespaces, mounts, cgroups): run them as root, e.g. in CI');
  const c = new Cluster(handover);
  for (const bin of ['kubelet', 'kube-scheduler', 'kube-controller-manager', 'pause']) {
    if (!existsSync(join(c.env.binDir, bin))) throw new Error(`${bin} is missing from ${c.env.binDir}: run scripts/cluster ensure (needs Go and root)`);
  }
  return c;
}

export class Cluster {
  readonly env: ClusterEnv = clusterEnv();
  /** The path every control-plane pod names for the node's folder (scripts/cluster mounts each node's there). */
  readonly podEnv: TestbedEnv;

  /**
   * How the self-hosted api-servers are handed over: `redirect` (the default,
   * deploy/components/parent-kube-apiserver-redirect; each checkpoint's copy on a port of its own
   * behind its node's nftables redirect, docs/decisions/0012-one-listener-per-port.md) or `overlap`
   * (port sharing).
   * The scheduler and controller-manager stay on overlap either way.
   */
  constructor(readonly handover: Handover = DEFAULT_HANDOVER) {
    this.podEnv = {
      dir: join(this.env.dir, 'node'),
      nodeName: 'm1',
      binDir: this.env.binDir,
      apiserverPort: this.env.apiserverPort,
      kubeconfig: this.env.kubeconfig,
      kubectl: this.env.kubectl,
    };
  }

  async script(...args: string[]): Promise<string> {
    const r = await run(CLUSTER_SCRIPT, args, { maxBuffer: 64 << 20 });
    return r.stdout;
  }

  nodeDir(n: string): string {
    return join(this.env.dir, n);
  }

  /** kubectl from the load balancer's namespace, through the load balancer. */
  async kubectl(args: string[], input?: string): Promise<string> {
    const p = run(
      'nsenter',
      [`--net=${join(this.env.dir, 'ns', 'lb.net')}`, '--', this.env.kubectl, '--kubeconfig', this.env.kubeconfig, '--request-timeout=10s', ...args],
      {
        maxBuffer: 64 << 20,
      },
    );
    if (input !== undefined) p.child.stdin?.end(input);
    return (await p).stdout;
  }

  /** `/readyz` answers 200 within 1 s: through the load balancer, or one node's api-server alone. */
  async readyz(target: 'lb' | string = 'lb'): Promise<boolean> {
    return (await this.readyzAnswer(target)).ok;
  }

  /**
   * The same poll, with why it failed: `HTTP <status>` and the checks `/readyz` names as failed
   * (`[-]shutdown failed`), `no answer within 1 s`, or the socket's error code.
   */
  readyzAnswer(target: 'lb' | string = 'lb'): Promise<{ ok: boolean; why: string }> {
    const socketPath = target === 'lb' ? this.env.lbSock : join(this.env.dir, `direct-${target}.sock`);
    return new Promise((resolve) => {
      let timedOut = false;
      const req = request({ socketPath, path: '/readyz', rejectUnauthorized: false, timeout: 1000, agent: false }, (res) => {
        if (res.statusCode === 200) {
          res.resume();
          resolve({ ok: true, why: '' });
          return;
        }
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (body.length < 4096) body += d;
        });
        const done = () => {
          const failed = body
            .split('\n')
            .filter((l) => l.startsWith('[-]'))
            .map((l) => l.replace(/ failed.*$/, ' failed'))
            .slice(0, 2);
          resolve({ ok: false, why: [`HTTP ${res.statusCode}`, ...failed].join(' ') });
        };
        res.on('end', done);
        res.on('error', done);
      });
      req.on('timeout', () => {
        timedOut = true;
        req.destroy();
      });
      req.on('error', (e: NodeJS.ErrnoException) => resolve({ ok: false, why: timedOut ? 'no answer within 1 s' : (e.code ?? e.message) }));
      req.end();
    });
  }

  kubeletStartedAt(n: string): number {
    return Number(readFileSync(join(this.nodeDir(n), 'kubelet.started'), 'utf8').trim()) * 1000;
  }

  writeStatic(n: string, name: string, obj: object): void {
    const dir = join(this.nodeDir(n), 'manifests');
    const tmp = join(dir, `.${name}.tmp`); // the kubelet ignores dot-files
    writeFileSync(tmp, stringify(obj));
    renameSync(tmp, join(dir, name));
  }

  removeStatic(n: string, name: string): void {
    rmSync(join(this.nodeDir(n), 'manifests', name), { force: true });
  }

  checkpointActive(n: string, name: string, namespace = 'kube-system'): boolean {
    return existsSync(join(this.nodeDir(n), 'manifests', manifestFile(namespace, name)));
  }

  checkpointStored(n: string, name: string): boolean {
    const dir = join(this.nodeDir(n), 'var-lib-lastseen', 'checkpoints');
    if (!existsSync(dir)) return false;
    return readdirSync(dir).some((d) => !d.startsWith('.') && d.includes(name) && existsSync(join(dir, d, 'meta.json')));
  }

  async waitFor(what: string, timeoutS: number, check: () => Promise<boolean> | boolean, everyMs = 500): Promise<number> {
    const t0 = Date.now();
    while (Date.now() - t0 < timeoutS * 1000) {
      try {
        if (await check()) return (Date.now() - t0) / 1000;
      } catch {
        // not yet
      }
      await sleep(everyMs);
    }
    throw new Error(`timed out after ${timeoutS}s waiting for ${what}`);
  }

  /** Pods created through the API (not mirrors of static pods, not being deleted), with their node. */
  async apiPods(selector: string, namespace = 'kube-system'): Promise<PodJson[]> {
    const pods: PodJson[] = JSON.parse(await this.kubectl(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'json'])).items;
    return pods.filter((p) => !p.metadata.annotations?.['kubernetes.io/config.mirror'] && !p.metadata.deletionTimestamp);
  }

  /** Every pod of the control plane and of lastseen, in one read (each kubectl costs a process on a busy machine). */
  async snapshot(): Promise<PodSnapshot> {
    const pods: Array<PodJson & { metadata: { namespace?: string; labels?: Record<string, string> } }> = JSON.parse(
      await this.kubectl(['get', 'pods', '-A', '-o', 'json']),
    ).items;
    const live = pods.filter((p) => !p.metadata.annotations?.['kubernetes.io/config.mirror'] && !p.metadata.deletionTimestamp);
    return {
      serving: (name, since = 0) =>
        servingNodes(
          live.filter((p) => p.metadata.labels?.['app.kubernetes.io/name'] === name),
          name,
          since,
        ),
      agents: (since = 0) => {
        const out = new Set<string>();
        for (const p of live.filter((p) => p.metadata.namespace === 'lastseen-system' && p.metadata.labels?.['app.kubernetes.io/component'] === 'agent')) {
          if (p.spec?.nodeName && startedSince(p.status?.containerStatuses?.[0], since)) out.add(p.spec.nodeName);
        }
        return out;
      },
    };
  }

  /** On each node: the DaemonSet pod of a component is ready, its main container started after `since`. */
  async daemonPodsServing(name: string, since = 0): Promise<Set<string>> {
    return servingNodes(await this.apiPods(`app.kubernetes.io/name=${name}`), name, since);
  }

  /** The last lines of a node's log (kubelet, containerd) or the load balancer's, for a failure message. */
  tail(file: string, lines = 20): string {
    try {
      return readFileSync(join(this.env.dir, file), 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  /** On each node: the agent's DaemonSet pod runs, its container started after `since`. */
  async agentPodsRunning(since = 0, ready = false): Promise<Set<string>> {
    const pods = await this.apiPods('app.kubernetes.io/component=agent', 'lastseen-system');
    const out = new Set<string>();
    for (const p of pods) {
      const c = p.status?.containerStatuses?.[0];
      if (p.spec?.nodeName && startedSince(c, since) && (!ready || c?.ready)) out.add(p.spec.nodeName);
    }
    return out;
  }

  /** kubectl for an idempotent request (a get, a patch to a given value, a delete), again on failure: a loaded machine's load balancer drops a connection now and then. */
  async kubectlRetry(args: string[], attempts = 6): Promise<string> {
    for (let i = 1; ; i++) {
      try {
        return await this.kubectl(args);
      } catch (e) {
        if (i >= attempts) throw e;
        log(`kubectl ${args.join(' ')} failed (attempt ${i} of ${attempts}), again in 3 s`);
        await sleep(3000);
      }
    }
  }

  /** Server-side apply, again on failure: idempotent, and a loaded machine's load balancer drops a connection now and then. */
  async apply(objects: object[], attempts = 6): Promise<void> {
    const input = objects.map((o) => stringify(o)).join('---\n');
    for (let i = 1; ; i++) {
      try {
        await this.kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], input);
        return;
      } catch (e) {
        if (i >= attempts) throw e;
        log(`apply failed (attempt ${i} of ${attempts}), again in 5 s: ${(e as Error).message.split('\n').slice(-2).join(' ')}`);
        await sleep(5000);
      }
    }
  }

  /**
   * Copy every node's pod logs and its kubelet's and containerd's logs to `dest/<node>/` (before the
   * bed goes down: they live in its folder), and return, per node, the last `tail` lines of the
   * kubelet's and containerd's logs and the pod-log folders found, for a failure's report.
   */
  keepLogs(dest: string, tail = 25): string {
    const out: string[] = [];
    for (const n of ['m1', 'm2', 'm3']) {
      const src = this.nodeDir(n);
      for (const d of ['pod-logs', 'logs']) {
        try {
          if (existsSync(join(src, d))) cpSync(join(src, d), join(dest, n, d), { recursive: true });
        } catch (e) {
          out.push(`${n}: ${d} not kept: ${(e as Error).message}`);
        }
      }
      const pods = existsSync(join(src, 'pod-logs')) ? readdirSync(join(src, 'pod-logs')) : [];
      out.push(`${n}: pod-log folders: ${pods.length === 0 ? 'none' : pods.join(' ')}`);
      for (const f of ['kubelet.log', 'containerd.log']) {
        const file = join(src, 'logs', f);
        if (tail === 0) continue;
        const lines = existsSync(file) ? readFileSync(file, 'utf8').trimEnd().split('\n').slice(-tail) : ['(no such file)'];
        out.push(`${n}: last ${tail} lines of ${f}:`, ...lines.map((l) => `  ${l}`));
      }
    }
    return out.join('\n');
  }

  /** A container's log lines, every restart's, from the node's pod-logs folder (CRI format stripped). */
  containerLog(n: string, dirName: string, container: string): string[] {
    const dir = join(this.nodeDir(n), 'pod-logs', dirName, container);
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((f) => /^\d+\.log$/.test(f))
      .sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10))
      .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n'))
      .filter((l) => l !== '')
      .map((l) => l.replace(/^\S+ (stdout|stderr) [FP] /, ''));
  }

  /** What every agent pod on a node (its DaemonSet pod and its copy) logged since `since`, oldest first. */
  agentRecords(n: string, since: number): AgentRecord[] {
    const root = join(this.nodeDir(n), 'pod-logs');
    if (!existsSync(root)) return [];
    const out: AgentRecord[] = [];
    for (const d of readdirSync(root).filter((d) => d.startsWith('lastseen-system_lastseen-agent-'))) {
      for (const line of this.containerLog(n, d, 'agent')) {
        if (!line.startsWith('{')) continue;
        try {
          const e = JSON.parse(line) as AgentRecord;
          if (typeof e.time === 'number' && typeof e.msg === 'string' && e.time >= since) out.push(e);
        } catch {
          // a line cut by a restart: not a record
        }
      }
    }
    return out.sort((a, b) => a.time - b.time);
  }

  /** The static-pod control plane on all three nodes: etcd members and the `bootstrap-*` api-server, scheduler, controller-manager. */
  async bootstrapStatic(): Promise<void> {
    const t0 = Date.now();
    for (const n of NODES) for (const [name, obj] of Object.entries(clusterStaticManifests(this.podEnv, n))) this.writeStatic(n, name, obj);
    await this.waitFor('the load balancer to answer /readyz', 600, () => this.readyz());
    for (const n of NODES) await this.waitFor(`${n}'s static api-server`, 300, () => this.readyz(n));
    log(`static control plane on three nodes after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    await this.waitFor('the default ServiceAccount', 120, async () =>
      (await this.kubectl(['get', 'sa', 'default', '-n', 'kube-system', '-o', 'name'])).includes('default'),
    );
  }

  /** The bed's policy (deploy/overlays/testbed's), with kube-apiserver's hand-over as `handover` says. */
  policyYaml(): string {
    return testbedPolicy(this.podEnv, this.handover);
  }

  async installLastseen(): Promise<void> {
    const rendered = await this.kubectl(['kustomize', join(REPO, 'deploy', 'overlays', 'cluster')]);
    const docs = parseAllDocuments(rendered).map((d) => d.toJSON());
    if (this.handover !== 'overlap') withPolicy(docs, this.policyYaml(), 'deploy/overlays/cluster');
    await this.apply(docs);
  }

  /** The kubelet of node `n` runs the api-server DaemonSet's pod: its heartbeat sidecar has started. */
  async apiserverPodStarted(n: string): Promise<boolean> {
    const pods = (await this.apiPods('app.kubernetes.io/name=kube-apiserver')) as Array<PodJson & { status?: { initContainerStatuses?: ContainerStatus[] } }>;
    return pods.some((p) => p.spec?.nodeName === n && heartbeatStarted(p));
  }

  /** From the static control plane to the self-hosted one, watched by lastseen; then the static api-servers go. */
  async selfHost(): Promise<void> {
    const t0 = Date.now();
    const since = () => ((Date.now() - t0) / 1000).toFixed(1);
    await this.installLastseen();
    await this.apply(clusterSelfHostedObjects(this.podEnv, this.policyYaml(), this.handover));
    if (this.handover === 'redirect') {
      // The self-hosted api-server binds its port alone and cannot while the static one holds it.
      // Node by node, as bootkube's temporary control plane goes: once the node's kubelet runs the
      // DaemonSet pod, the static api-server goes and the pod's api-server binds on its next
      // start (the kubelet's back-off); the load balancer serves through the other two meanwhile.
      for (const n of NODES) {
        await this.waitFor(`the kubelet of ${n} starting the kube-apiserver DaemonSet pod`, 300, () => this.apiserverPodStarted(n));
        this.removeStatic(n, 'bootstrap-kube-apiserver.yaml');
        await this.waitFor(
          `${n}'s self-hosted api-server`,
          420,
          async () => (await this.readyz(n)) && (await this.daemonPodsServing('kube-apiserver')).has(n),
          1000,
        );
        log(`${n}: static api-server removed, the self-hosted one serves, after ${since()}s (handover: redirect)`);
      }
    }
    for (const c of CONTROL_PLANE)
      await this.waitFor(`the ${c} DaemonSet pods on m1, m2, m3`, 600, async () => (await this.daemonPodsServing(c)).size === NODES.length);
    log(`self-hosted DaemonSets serve on three nodes after ${since()}s`);
    // The temporary control plane goes once the self-hosted one runs, before the checkpoints, as
    // bootkube's does: while a bootstrap process shares a port with its DaemonSet pod, the
    // heartbeat's proof must hear every listener answer within one round, which a loaded machine
    // fails again and again (the parent then stays Starting and is never checkpointed). One node
    // at a time, each one's own api-server alone answering before the next; the load balancer
    // keeps serving through the other two.
    for (const n of NODES) {
      for (const f of Object.keys(clusterStaticManifests(this.podEnv, n)).filter((f) => f.startsWith('bootstrap-'))) this.removeStatic(n, f);
      await this.waitFor(`${n}'s self-hosted api-server alone`, 300, async () => (await this.readyz(n)) && (await this.readyz()));
    }
    await this.waitFor('the self-hosted api-servers alone', 300, async () => {
      for (const n of NODES) if (!(await this.readyz(n))) return false;
      return (await this.readyz()) && (await this.daemonPodsServing('kube-apiserver')).size === NODES.length;
    });
    log(`bootstrap removed; self-hosted on three nodes after ${since()}s`);
    await this.waitFor('the lastseen agents on three nodes', 300, async () => (await this.agentPodsRunning(0, true)).size === NODES.length);
    for (const n of NODES) for (const c of CONTROL_PLANE) await this.waitFor(`${n}'s checkpoint of ${c}`, 300, () => this.checkpointStored(n, c));
    // A copy started while the machine was slow (a parent taken for hung) must be retired before the cases begin.
    await this.waitFor('no checkpoint active', 300, () => NODES.every((n) => CONTROL_PLANE.every((c) => !this.checkpointActive(n, c))));
    log(`lastseen ready, checkpoints stored on three nodes, none active, after ${since()}s`);
  }
}
