// The real-node test bed: a kubelet v1.36.3 and containerd of its own (scripts/node), a self-hosted
// control plane on it, lastseen installed from deploy/ (overlay deploy/overlays/testbed), and
// the measurements the reboot test reports. Needs root and the binaries `scripts/node ensure` makes.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { type Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { manifestFile } from '../../src/core/names.js';
import { NODE_SCRIPT, REPO, type TestbedEnv, testbedEnv } from './env.js';
import { type Handover, heartbeatStarted, selfHostedFromComponents, staticManifests, testbedPolicy, withPolicy } from './manifests.js';

const run = promisify(execFile);
export const MANIFESTS = '/etc/kubernetes/manifests';
export const CHECKPOINTS = '/var/lib/lastseen/checkpoints';
export const CONTROL_PLANE = ['kube-apiserver', 'kube-scheduler', 'kube-controller-manager'] as const;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const log = (msg: string) => process.stderr.write(`testbed: ${msg}\n`);

/** The failed checks of a /readyz body (`[-]etcd failed: …`), a Status's message, or its first line. */
function failedChecks(body: string): string {
  const failed = body.split('\n').filter((l) => l.startsWith('[-]'));
  if (failed.length)
    return failed
      .map((l) => l.replace(/: reason withheld$/, ''))
      .join(' ')
      .slice(0, 200);
  try {
    const status = JSON.parse(body) as { message?: unknown };
    if (typeof status.message === 'string') return status.message.slice(0, 200);
  } catch {
    // not a Status
  }
  return (body.split('\n')[0] ?? '').slice(0, 200);
}

type ContainerStatus = { name: string; ready: boolean; restartCount?: number; state?: { running?: { startedAt?: string } } };

/** A container running since `since` (ms; container start times have whole seconds). */
function startedSince(c: ContainerStatus | undefined, since: number): boolean {
  return Date.parse(c?.state?.running?.startedAt ?? '') >= Math.floor(since / 1000) * 1000;
}

interface PodJson {
  metadata: { name: string; uid?: string; annotations?: Record<string, string>; deletionTimestamp?: string };
  status?: { containerStatuses?: ContainerStatus[]; initContainerStatuses?: ContainerStatus[] };
}

/** A Testbed for a test file, after checking what every real-node test needs (root, the node's binaries). */
export function realNodeTestbed(): Testbed {
  if (process.getuid?.() !== 0) throw new Error('the real-node tests need root (the kubelet mounts volumes and makes cgroups): run them as root, e.g. in CI');
  const tb = new Testbed();
  for (const bin of ['kubelet', 'kube-scheduler', 'kube-controller-manager', 'pause']) {
    if (!existsSync(join(tb.env.binDir, bin))) throw new Error(`${bin} is missing from ${tb.env.binDir}: run scripts/node ensure (needs Go and root)`);
  }
  return tb;
}

export class Testbed {
  readonly env: TestbedEnv = testbedEnv();

  /**
   * How the self-hosted api-server is handed over: `overlap` (the default: it runs with
   * --permit-port-sharing beside its checkpoint), or `redirect` (deploy/components/parent-kube-apiserver-redirect:
   * it binds its port alone, on every address, its sidecar probing 127.0.0.2; its checkpoint serves on
   * REDIRECT_COPY_PORT behind the agent's nftables redirect).
   */
  constructor(readonly handover: Handover = 'overlap') {}

  /** The test bed's policy (deploy/overlays/testbed), for this bed's hand-over. */
  policyYaml(): string {
    return testbedPolicy(this.env, this.handover);
  }

  async node(cmd: 'up' | 'down' | 'kill' | 'start' | 'reboot' | 'images' | 'status'): Promise<string> {
    const r = await run(NODE_SCRIPT, [cmd], { maxBuffer: 64 << 20 });
    return r.stdout;
  }

  /** The node's kubelet version as the kubelet reports it on its Node object. */
  async kubeletVersion(): Promise<string> {
    return (await this.kubectl(['get', 'node', this.env.nodeName, '-o', 'jsonpath={.status.nodeInfo.kubeletVersion}'])).trim();
  }

  async kubectl(args: string[], input?: string): Promise<string> {
    const p = run(this.env.kubectl, ['--kubeconfig', this.env.kubeconfig, '--request-timeout=5s', ...args], { maxBuffer: 64 << 20 });
    if (input !== undefined) {
      p.child.stdin?.end(input);
    }
    return (await p).stdout;
  }

  /** The time the kubelet was last started (scripts/node writes it), in ms since the epoch. */
  kubeletStartedAt(): number {
    return Number(readFileSync(join(this.env.dir, 'kubelet.started'), 'utf8').trim()) * 1000;
  }

  writeStatic(name: string, obj: object): void {
    const tmp = join(MANIFESTS, `.${name}.tmp`); // the kubelet ignores dot-files
    writeFileSync(tmp, stringify(obj));
    renameSync(tmp, join(MANIFESTS, name));
  }

  /** Whether the api-server on the node's port answers /readyz with 200 within 1 s. */
  async readyz(): Promise<boolean> {
    return (await this.readyzFailure()) === null;
  }

  /**
   * One /readyz poll: null when it answers 200 within 1 s, else why not (the status and the failed
   * checks, or the error). By default as a client that opens a connection for it (each poll lands
   * wherever the kernel sends a new connection, as a new client's would); with a keep-alive `agent`,
   * as one long-lived client, which stays on the listener its connection reached.
   */
  readyzFailure(agent: Agent | false = false): Promise<string | null> {
    return new Promise((resolve) => {
      const req = request({ host: '127.0.0.1', port: this.env.apiserverPort, path: '/readyz', rejectUnauthorized: false, timeout: 1000, agent }, (res) => {
        if (res.statusCode === 200) {
          res.resume();
          resolve(null);
          return;
        }
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (body.length < 2000) body += d;
        });
        res.on('end', () => resolve(`HTTP ${res.statusCode}: ${failedChecks(body)}`));
        res.on('error', (e) => resolve(`HTTP ${res.statusCode}, then ${(e as NodeJS.ErrnoException).code ?? e.message}`));
      });
      req.on('timeout', () => req.destroy(new Error('no answer within 1 s')));
      // The timeout above is the socket's idle time: a server that trickles (starved of CPU) could
      // hold one poll for ever. A poll ends after 5 s whatever happens.
      const deadline = setTimeout(() => req.destroy(new Error('no whole answer within 5 s')), 5000);
      req.on('close', () => clearTimeout(deadline));
      req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      req.end();
    });
  }

  async waitFor(what: string, timeoutS: number, check: () => Promise<boolean> | boolean, everyMs = 250): Promise<number> {
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

  /** Pods created through the API (not mirrors of static pods, not being deleted). */
  async apiPods(selector: string, namespace = 'kube-system'): Promise<PodJson[]> {
    const pods: PodJson[] = JSON.parse(await this.kubectl(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'json'])).items;
    return pods.filter((p) => !p.metadata.annotations?.['kubernetes.io/config.mirror'] && !p.metadata.deletionTimestamp);
  }

  /** The DaemonSet pod of a control-plane component is ready, its main container started after `since`. */
  async daemonPodServing(name: string, since = 0): Promise<boolean> {
    const pods = await this.apiPods(`app.kubernetes.io/name=${name}`);
    return pods.some((p) => {
      const main = p.status?.containerStatuses?.find((c) => c.name === name);
      return !!main?.ready && startedSince(main, since);
    });
  }

  /** The agent's DaemonSet pod (not its static copy) runs again, its container started after `since` (ready or standing by). */
  async agentPodRunning(since: number): Promise<boolean> {
    const pods = await this.apiPods('app.kubernetes.io/component=agent', 'lastseen-system');
    return pods.some((p) => startedSince(p.status?.containerStatuses?.[0], since));
  }

  /** Apply objects server-side, as one YAML stream. */
  async apply(objects: object[]): Promise<void> {
    await this.kubectl(['apply', '--server-side', '-f', '-'], objects.map((o) => stringify(o)).join('---\n'));
  }

  /**
   * A container's log lines, every restart's, read from the kubelet's pod-logs folder (the test bed's
   * Node object has no addresses, so `kubectl logs` cannot reach the kubelet). CRI format stripped.
   */
  containerLog(namespace: string, pod: string, uid: string, container: string): string[] {
    const dir = join(this.env.dir, 'pod-logs', `${namespace}_${pod}_${uid}`, container);
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((f) => /^\d+\.log$/.test(f))
      .sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10))
      .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n'))
      .filter((l) => l !== '')
      .map((l) => l.replace(/^\S+ (stdout|stderr) [FP] /, ''));
  }

  /**
   * The fatal lines (klog's `F` level, e.g. a post-start hook that gave up) that any pod of `name`
   * in kube-system logged in `container`, every restart's: why a parent exited, for a failure's message.
   */
  fatalLines(name: string, container = name): string[] {
    const root = join(this.env.dir, 'pod-logs');
    if (!existsSync(root)) return [];
    return readdirSync(root)
      .filter((d) => d.startsWith(`kube-system_${name}-`))
      .flatMap((d) => {
        const [namespace, pod, uid] = d.split('_') as [string, string, string];
        return this.containerLog(namespace, pod, uid, container)
          .filter((l) => /^F\d{4} /.test(l))
          .map((l) => `${pod}: ${l}`);
      });
  }

  /** What every agent pod on the node logged about `parent` since `since` (ms since the epoch), oldest first. */
  agentRecords(parent: string, since: number): Array<{ time: number; msg: string; from?: string; to?: string; reason?: string; message?: string }> {
    const root = join(this.env.dir, 'pod-logs');
    if (!existsSync(root)) return [];
    const out: Array<{ time: number; msg: string; from?: string; to?: string; reason?: string; message?: string }> = [];
    for (const d of readdirSync(root).filter((d) => d.startsWith('lastseen-system_lastseen-agent-'))) {
      const [namespace, pod, uid] = d.split('_') as [string, string, string];
      for (const line of this.containerLog(namespace, pod, uid, 'agent')) {
        if (!line.includes(parent)) continue;
        try {
          const e = JSON.parse(line) as { time?: unknown; parent?: unknown; msg?: unknown };
          if (e.parent === parent && typeof e.time === 'number' && typeof e.msg === 'string' && e.time >= since) out.push(e as (typeof out)[number]);
        } catch {
          // a line cut by a restart: not a record
        }
      }
    }
    return out.sort((a, b) => a.time - b.time);
  }

  checkpointActive(name: string, namespace = 'kube-system'): boolean {
    return existsSync(join(MANIFESTS, manifestFile(namespace, name)));
  }

  checkpointStored(name: string): boolean {
    if (!existsSync(CHECKPOINTS)) return false;
    return readdirSync(CHECKPOINTS).some((d) => !d.startsWith('.') && d.includes(name) && existsSync(join(CHECKPOINTS, d, 'meta.json')));
  }

  /**
   * The lastseen objects from the test-bed overlay, the agent's image pinned by digest as a user pins
   * it (kustomize `images:` with `digest:`, in an overlay of deploy/overlays/testbed): by default the
   * release image `scripts/node up` pushed to the node's registry. Without the agent's DaemonSet for
   * a baseline run. Applying it again with another image is an upgrade.
   */
  async installLastseen(withAgent: boolean, image: string = this.env.lastseenImage ?? ''): Promise<void> {
    const pin = image.match(/^(.+)@(sha256:[0-9a-f]{64})$/);
    if (!pin?.[1] || !pin[2]) throw new Error(`lastseen's image must be named by digest (<repository>@sha256:<64 hex>), got "${image}"`);
    const dir = mkdtempSync(join(tmpdir(), 'lastseen-testbed-install-'));
    let rendered: string;
    try {
      const kustomization = {
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        // kustomize takes resources by relative path only.
        resources: [relative(dir, join(REPO, 'deploy', 'overlays', 'testbed'))],
        images: [{ name: 'lastseen.test/lastseen', newName: pin[1], digest: pin[2] }],
        patches: [
          {
            target: { kind: 'DaemonSet', name: 'lastseen-agent' },
            patch: stringify([{ op: 'replace', path: '/spec/template/spec/containers/0/imagePullPolicy', value: 'IfNotPresent' }]),
          },
        ],
      };
      writeFileSync(join(dir, 'kustomization.yaml'), stringify(kustomization));
      rendered = await this.kubectl(['kustomize', dir]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const docs = parseAllDocuments(rendered)
      .map((d) => d.toJSON())
      .filter((o) => o && (withAgent || o.kind !== 'DaemonSet'));
    if (this.handover !== 'overlap') withPolicy(docs, this.policyYaml(), 'deploy/overlays/testbed');
    await this.apply(docs);
  }

  /** A fresh node (whatever an earlier run left is torn down first), bootstrapped: `bootstrap` on a new `up`. */
  async fresh(withAgent: boolean): Promise<void> {
    await this.node('down');
    await this.node('up');
    await this.bootstrap(withAgent);
  }

  /** From an empty node to a self-hosted control plane watched by lastseen (or not, for the baseline). */
  async bootstrap(withAgent: boolean): Promise<void> {
    const t0 = Date.now();
    const statics = staticManifests(this.env);
    for (const [name, obj] of Object.entries(statics)) this.writeStatic(name, obj);
    await this.waitFor('the bootstrap api-server', 180, () => this.readyz());
    log(`bootstrap api-server ready after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    await this.waitFor('the default ServiceAccount', 60, async () =>
      (await this.kubectl(['get', 'sa', 'default', '-n', 'kube-system', '-o', 'name'])).includes('default'),
    );
    await this.installLastseen(withAgent);
    await this.apply(selfHostedFromComponents(this.env, this.policyYaml(), this.handover));
    if (this.handover === 'redirect') {
      // The self-hosted api-server binds its port alone (no --permit-port-sharing) and cannot while
      // the temporary one holds it: as bootkube does, the temporary one goes once the kubelet has
      // the self-hosted pod (its sidecar started), and the self-hosted one binds on its next start.
      await this.waitFor('the kubelet starting the kube-apiserver DaemonSet pod', 180, async () =>
        (await this.apiPods('app.kubernetes.io/name=kube-apiserver')).some(heartbeatStarted),
      );
      rmSync(join(MANIFESTS, 'bootstrap-kube-apiserver.yaml'), { force: true });
      log(`bootstrap api-server removed after ${((Date.now() - t0) / 1000).toFixed(1)}s (handover: redirect)`);
      await this.waitFor('the self-hosted api-server', 420, async () => (await this.readyz()) && (await this.daemonPodServing('kube-apiserver')), 1000);
    }
    for (const c of CONTROL_PLANE) await this.waitFor(`the ${c} DaemonSet pod`, 180, () => this.daemonPodServing(c));
    log(`self-hosted control plane ready after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    if (withAgent) {
      await this.waitFor('the lastseen agent', 120, async () =>
        (await this.kubectl(['get', 'pods', '-n', 'lastseen-system', '-o', 'jsonpath={.items[*].status.containerStatuses[*].ready}'])).includes('true'),
      );
      for (const c of CONTROL_PLANE) await this.waitFor(`the checkpoint of ${c}`, 120, () => this.checkpointStored(c));
      log(`lastseen ready, checkpoints stored, after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    }
    for (const f of Object.keys(statics).filter((n) => n.startsWith('bootstrap-'))) rmSync(join(MANIFESTS, f), { force: true });
    await this.waitFor('the self-hosted api-server alone', 120, async () => (await this.readyz()) && (await this.daemonPodServing('kube-apiserver')));
    // The bootstrap controller-manager and scheduler held the leader leases; their successors wait them out.
    log(`bootstrap removed; self-hosted after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  }
}

export interface RebootResult {
  apiServedAfterS: number | null;
  parentServedAfterS: number | null;
  unavailableS: number;
  /** Stretches of failed /readyz polls after the first answer, in seconds from the kubelet's start ([from, to]). */
  darkAfterServed: Array<[number, number]>;
  /** Why the polls of each of those stretches failed (the distinct reasons, in order), one entry per stretch. */
  darkWhy: string[][];
  /** Failed polls after the first answer (the polls in darkAfterServed). */
  failedAfterServed: number;
  offS: number;
  recovered: boolean;
  schedulerBack: boolean;
  controllerManagerBack: boolean;
  /** The agent's DaemonSet pod runs again beside its static copy (only measured with the agent). */
  agentBack: boolean;
  /** The agent decided to run the api-server's checkpoint (its `activating checkpoint` log line), from t0; null: it did not. */
  agentActivatedAfterS: number | null;
  /** The agent's transitions and noted reasons for the api-server, "<s from t0> <from>-><to> <reason>" (empty without the agent). */
  decisions: string[];
  /**
   * The longest stretch, in seconds, of failed polls naming the api-server's service repair
   * (`poststarthook/start-service-ip-repair-controllers`) no more than 5 s apart; null: none did.
   * Normally a second or two of a start; about 60 when a kube-apiserver lost that repair's first
   * run (repairStallS).
   */
  repairStallS: number | null;
}

/** The /readyz check of kube-apiserver's service repair post-start hook, as its failure names it. */
export const REPAIR_HOOK = 'poststarthook/start-service-ip-repair-controllers';
/** Failed polls naming the hook further apart than this belong to two starts. */
const REPAIR_STALL_GAP_S = 5;

/**
 * A kube-apiserver that starts while another listens on its port (the overlap hand-over: a copy
 * beside a deleted pod in its pause, a parent beside its copy) reaches the other one with about
 * half of its own loopback connections, and fails TLS there (each process makes its own loopback
 * certificate). When that request is its service repair's first list of Services, the repair waits
 * its 3-minute interval, the post-start hook gives up after 1 minute and the process exits 255:
 * its share of the port answers `/readyz` 500 for that minute. The span of failed polls that name
 * the hook tells that stall from the usual second or two of a start.
 */
export function repairStallS(darkAfterServed: Array<[number, number]>, darkWhy: string[][]): number | null {
  // Each start's failures, apart: the copy's start and its successor's are 20 s or more apart,
  // while a stalled share fails about every other poll for its whole minute.
  let longest: number | null = null;
  let run: [number, number] | null = null;
  darkAfterServed.forEach(([from, to], i) => {
    if (!(darkWhy[i] ?? []).some((w) => w.includes(REPAIR_HOOK))) return;
    run = run && from - run[1] <= REPAIR_STALL_GAP_S ? [run[0], to] : [from, to];
    longest = Math.max(longest ?? 0, round(run[1] - run[0]));
  });
  return longest;
}

/** What a case does to the node; resolves to the moment measurement starts from (ms since the epoch). */
export type Disruption = (tb: Testbed) => Promise<number>;

/** A power cycle: everything killed, `offS` seconds off, then containerd and the kubelet start; measured from the kubelet's start. */
export const powerCycle =
  (offS: number): Disruption =>
  async (tb) => {
    await tb.node('kill');
    await sleep(offS * 1000);
    await tb.node('start');
    return tb.kubeletStartedAt();
  };

/** The self-hosted api-server's pod deleted through the API (the last api-server of the cluster); measured from the delete. */
export const deleteApiserverPod: Disruption = async (tb) => {
  const pods = await tb.apiPods('app.kubernetes.io/name=kube-apiserver');
  const t0 = Date.now();
  await tb.kubectl(['delete', 'pod', '-n', 'kube-system', '--wait=false', ...pods.map((p) => p.metadata.name)]);
  return t0;
};

/**
 * A rollout of an api-server spec that never becomes ready: its only etcd is one nobody serves
 * (replaced, not added: a second --etcd-servers flag appends to the list); measured from the patch.
 * Each `deadPort` makes another spec (a bad rollout judged afresh, not the last one's again).
 */
export const badRollout: Disruption = (tb) => badRolloutTo(9)(tb);

export const badRolloutTo =
  (deadPort: number): Disruption =>
  async (tb) => {
    const ds = JSON.parse(await tb.kubectl(['-n', 'kube-system', 'get', 'daemonset', 'kube-apiserver', '-o', 'json']));
    const command: string[] = ds.spec.template.spec.containers[0].command;
    const at = command.findIndex((a) => a.startsWith('--etcd-servers='));
    if (at < 0) throw new Error('the kube-apiserver DaemonSet has no --etcd-servers flag to break');
    const t0 = Date.now();
    await tb.kubectl([
      '-n',
      'kube-system',
      'patch',
      'daemonset',
      'kube-apiserver',
      '--type=json',
      '-p',
      JSON.stringify([{ op: 'replace', path: `/spec/template/spec/containers/0/command/${at}`, value: `--etcd-servers=http://127.0.0.1:${deadPort}` }]),
    ]);
    return t0;
  };

/**
 * Undo badRollout (the DaemonSet's previous spec), through whichever api-server serves. Tried up to
 * 6 times, 3 s apart, as an operator would: while a bad spec that listens without answering holds
 * its share of the port, about half of new connections hang (seen on this test bed: a timeout).
 */
export async function undoRollout(tb: Testbed): Promise<void> {
  // An undo whose answer was lost may have been applied: undoing again would roll the bad spec
  // back in. So each retry first reads whether the template still has badRolloutTo's dead etcd.
  const stillBad = async () => {
    const ds = JSON.parse(await tb.kubectl(['-n', 'kube-system', 'get', 'daemonset', 'kube-apiserver', '-o', 'json']));
    return (ds.spec.template.spec.containers[0].command as string[]).some((a) => /^--etcd-servers=http:\/\/127\.0\.0\.1:\d{1,2}$/.test(a));
  };
  for (let i = 1; ; i++) {
    try {
      if (i > 1 && !(await stillBad())) return;
      await tb.kubectl(['-n', 'kube-system', 'rollout', 'undo', 'daemonset/kube-apiserver']);
      return;
    } catch (e) {
      if (i >= 6) throw e;
      log(`rollout undo failed (attempt ${i} of 6), again in 3 s: ${(e as Error).message.split('\n').slice(-2).join(' ')}`);
      await sleep(3000);
    }
  }
}

/**
 * One disruption, measured from the moment it returns: when /readyz first answers (whoever serves
 * it), when the self-hosted api-server pod itself serves with its checkpoint retired, and how long
 * /readyz failed in all (polled every 100 ms) until then and for `settleS` after.
 */
export async function rebootOnce(
  tb: Testbed,
  opts: { offS: number; limitS: number; settleS: number; withAgent: boolean; disrupt?: Disruption; pollAgent?: Agent | false },
): Promise<RebootResult> {
  const poller = new ReadyzPoller(tb, opts.pollAgent ?? false);
  const samples = poller.samples;
  const tKill = Date.now();
  const t0 = await (opts.disrupt ?? powerCycle(opts.offS))(tb);
  const since = (t: number) => (t - t0) / 1000;
  let apiServedAt: number | null = null;
  let parentServedAt: number | null = null;
  let schedulerBack = false;
  let controllerManagerBack = false;
  let agentBack = !opts.withAgent;
  const deadline = t0 + opts.limitS * 1000;
  while (Date.now() < deadline) {
    if (apiServedAt === null) {
      const first = samples.find((s) => s.t >= t0 && s.ok);
      if (first) apiServedAt = first.t;
    }
    if (apiServedAt !== null) {
      try {
        if (parentServedAt === null && !tb.checkpointActive('kube-apiserver') && (await tb.daemonPodServing('kube-apiserver', t0)) && (await tb.readyz()))
          parentServedAt = Date.now();
        // After a power cycle everything must have started again; after a disruption of the
        // api-server alone, the others need only be running.
        const others = opts.disrupt ? 0 : t0;
        if (!schedulerBack) schedulerBack = await tb.daemonPodServing('kube-scheduler', others);
        if (!controllerManagerBack) controllerManagerBack = await tb.daemonPodServing('kube-controller-manager', others);
        if (!agentBack) agentBack = await tb.agentPodRunning(others);
      } catch {
        // the api-server went away between two polls: try again
      }
    }
    if (parentServedAt !== null && schedulerBack && controllerManagerBack && agentBack && Date.now() - parentServedAt >= opts.settleS * 1000) break;
    await sleep(200);
  }
  await poller.stop();
  let unavailableMs = 0;
  const darkAfterServed: Array<[number, number]> = [];
  const darkWhy: string[][] = [];
  let failedAfterServed = 0;
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1];
    const b = samples[i];
    if (!a || !b || a.t < t0 || a.ok) continue;
    unavailableMs += b.t - a.t;
    if (apiServedAt === null || a.t < apiServedAt) continue;
    failedAfterServed++;
    const last = darkAfterServed[darkAfterServed.length - 1];
    if (last && Math.abs(last[1] - round(since(a.t))) < 0.001) {
      last[1] = round(since(b.t));
      const why = darkWhy[darkWhy.length - 1] as string[];
      if (a.why && !why.includes(a.why)) why.push(a.why);
    } else {
      darkAfterServed.push([round(since(a.t)), round(since(b.t))]);
      darkWhy.push(a.why ? [a.why] : []);
    }
  }
  const recovered = apiServedAt !== null && parentServedAt !== null && schedulerBack && controllerManagerBack && agentBack;
  // The agent's log about the api-server in this run (read once): when it decided to run the
  // checkpoint (its `activating checkpoint` line), and its decisions, so an outlier explains itself.
  const records = opts.withAgent ? tb.agentRecords('kube-system/kube-apiserver', t0) : [];
  const activatedAt = records.find((e) => e.msg === 'activating checkpoint')?.time ?? null;
  const decisions = records
    .filter((e) => e.msg === 'transition' || e.msg === 'reason noted')
    .map((e) => `${round(since(e.time))}s ${e.msg === 'transition' ? `${e.from}->${e.to}` : 'noted'} ${e.reason}`);
  return {
    agentActivatedAfterS: activatedAt === null ? null : round(since(activatedAt)),
    apiServedAfterS: apiServedAt === null ? null : round(since(apiServedAt)),
    parentServedAfterS: parentServedAt === null ? null : round(since(parentServedAt)),
    unavailableS: round(unavailableMs / 1000),
    darkAfterServed,
    darkWhy,
    failedAfterServed,
    offS: round((t0 - tKill) / 1000),
    recovered,
    schedulerBack,
    controllerManagerBack,
    agentBack,
    decisions,
    repairStallS: repairStallS(darkAfterServed, darkWhy),
  };
}

const round = (x: number) => Math.round(x * 100) / 100;

/** The independent /readyz poller: one poll every 100 ms (1 s timeout), each recorded with why it failed. */
export class ReadyzPoller {
  readonly samples: Array<{ t: number; ok: boolean; why?: string }> = [];
  private polling = true;
  private readonly loop: Promise<void>;

  constructor(tb: Testbed, agent: Agent | false) {
    this.loop = (async () => {
      while (this.polling) {
        const t = Date.now();
        const why = await tb.readyzFailure(agent);
        this.samples.push(why === null ? { t, ok: true } : { t, ok: false, why });
        const rest = 100 - (Date.now() - t);
        if (rest > 0) await sleep(rest);
      }
    })();
  }

  async stop(): Promise<void> {
    this.polling = false;
    await this.loop;
  }
}
