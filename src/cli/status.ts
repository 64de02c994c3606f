// `lastseen status` (also `kubectl lastseen status`): a table of parents per node, from the
// NodeCheckpoints the agents write joined with the Leases the heartbeats write.
//
// With --watch: list once, then follow both with watches and re-print whenever a row changes
// in a way a person would notice (state, phase, checkpoint, reason, holder; a routine Lease
// renewal alone does not re-print). A watch that ends is re-listed and re-opened after a pause.
//
// With --covered: a check for reboot tools (kured's pre-reboot check, a maintenance script): exit
// 0 only when every parent (on --node) is covered by a current report of its agent; otherwise
// say which parent is not and why on stderr, and exit 1.
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, Watch } from '@kubernetes/client-node';
import { type Command, Option } from 'commander';
import { podReady } from '../agent/parents.js';
import { ANNOTATION_ROLE, LABEL_MANAGED_BY, LABEL_NODE, LABEL_PARENT, MANAGED_BY } from '../core/names.js';
import { loadKubeConfig } from '../kube/client.js';
import { NODECHECKPOINT_GROUP, NODECHECKPOINT_PLURAL, NODECHECKPOINT_VERSION } from '../kube/nodecheckpoint-types.js';
import {
  buildRows,
  coverageProblems,
  type LeaseObject,
  type NodeCheckpointObject,
  type NodeHealth,
  type OutputFormat,
  render,
  significant,
} from '../kube/status-table.js';
import { CliError, describeCause, EXIT, exitCodesHelp, usageError } from './errors.js';
import { applyKubectlFlags, inNamespace, type KubectlFlags } from './kubectl-flags.js';

/** A list that takes longer than this is reported instead of hanging the terminal. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Pause before re-listing after a watch ends: fast enough to feel live, slow enough not to hammer. */
const REWATCH_DELAY_MS = 1_000;
/** --watch: how often the nodes and agent pods are listed again. */
const HEALTH_REFRESH_MS = 15_000;
/** The agent DaemonSet's pods (deploy/base/agent-daemonset.yaml). */
const AGENT_POD_SELECTOR = 'app.kubernetes.io/name=lastseen,app.kubernetes.io/component=agent';
/**
 * A list answered with 429 or 5xx is tried again (as kubectl does): right after a CRD is installed
 * or the api-server restarts, its cache answers "storage is (re)initializing" for a few seconds.
 */
const LIST_ATTEMPTS = 5;
/** Wait between those tries when the api-server sends no Retry-After; also the cap on Retry-After. */
const LIST_RETRY_MS = 1_000;
const LIST_RETRY_MAX_MS = 5_000;
/** Coalesce a burst of watch events (one agent transition touches several objects) into one print. */
const RENDER_DEBOUNCE_MS = 100;

const NODECHECKPOINTS = `${NODECHECKPOINT_PLURAL}.${NODECHECKPOINT_GROUP}`;

interface Options extends KubectlFlags {
  output: OutputFormat;
  node?: string;
  watch?: boolean;
  covered?: boolean;
  kubeconfig?: string;
}

/** A Node name: a DNS subdomain (RFC 1123), as the api-server requires. */
const NODE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Every problem with the flags, before any request is made. */
function checkFlags(opts: Options): string[] {
  const errors: string[] = [];
  if (opts.node !== undefined && (opts.node.length > 253 || !NODE_NAME.test(opts.node)))
    errors.push(`--node ${JSON.stringify(opts.node)}: not a node name (lowercase letters, digits, '-' and '.', at most 253 characters)`);
  if (opts.covered && opts.watch) errors.push('--covered is a one-time check: it cannot be combined with --watch');
  return errors;
}

export function register(program: Command): void {
  program
    .command('status')
    .description('show every parent per node: phase, last seen, state and checkpoint (from NodeCheckpoints and heartbeat Leases)')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'wide', 'json', 'yaml']).default('table'))
    .option('--node <name>', 'only this node')
    .option('-w, --watch', 'keep running; print again when a row changes')
    .option('--covered', 'check that every parent (on --node) is covered now: exit 0 if so, else name each one that is not and why, and exit 1')
    .option('--kubeconfig <file>', 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)')
    .addHelpText(
      'after',
      exitCodesHelp({
        1: '--covered: a parent is not covered (each one named on stderr, with the reason)',
        3: 'refused: the NodeCheckpoint CRD is not installed, or the credentials or RBAC refuse the lists',
        4: 'the api-server did not answer (named, with the cause)',
      }),
    )
    .action(async (opts: Options) => {
      const problems = checkFlags(opts);
      if (problems.length > 0) throw usageError(problems);
      const kc = applyKubectlFlags(loadConfig(opts.kubeconfig), opts);
      const source = new StatusSource(kc, opts.node);
      const world = await withTimeout(source.list(), kc);
      const print = () => {
        const { rows, invalid } = inNamespace(opts.namespace, buildRows([...world.checkpoints.values()], [...world.leases.values()], world.health));
        for (const name of invalid) process.stderr.write(`lastseen: NodeCheckpoint ${name} has a status this version cannot read; skipped\n`);
        process.stdout.write(render(rows, opts.output, Date.now()));
        return significant(rows);
      };
      let last = print();
      if (opts.covered) {
        const { rows } = inNamespace(opts.namespace, buildRows([...world.checkpoints.values()], [...world.leases.values()], world.health));
        const uncovered = coverageProblems(rows, Date.now());
        if (opts.node && !world.checkpoints.has(opts.node))
          uncovered.push({ row: { node: opts.node } as never, why: 'no NodeCheckpoint: no agent has reported on this node' });
        if (uncovered.length === 0) {
          process.stderr.write(`lastseen: every parent${opts.node ? ` on ${opts.node}` : ''} is covered (${rows.length})\n`);
          return;
        }
        const lines = uncovered.map((p) => (p.row.parent ? `${p.row.node} ${p.row.namespace}/${p.row.parent}: ${p.why}` : `${p.row.node}: ${p.why}`));
        throw new CliError(`${uncovered.length} not covered:\n  ${lines.join('\n  ')}`, 'ENOTCOVERED', EXIT.failed);
      }
      if (!opts.watch) return;
      let pending = false;
      await source.follow(world, () => {
        if (pending) return;
        pending = true;
        setTimeout(() => {
          pending = false;
          const { rows } = inNamespace(opts.namespace, buildRows([...world.checkpoints.values()], [...world.leases.values()], world.health));
          if (significant(rows) === last) return;
          process.stdout.write(opts.output === 'yaml' ? '---\n' : '\n');
          last = print();
        }, RENDER_DEBOUNCE_MS);
      });
    });
}

function loadConfig(file: string | undefined): KubeConfig {
  try {
    return loadKubeConfig(file);
  } catch (e) {
    throw new CliError((e as Error).message, 'EKUBECONFIG', EXIT.usage);
  }
}

async function withTimeout<T>(p: Promise<T>, kc: KubeConfig): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new CliError(`no answer from ${kc.getCurrentCluster()?.server} within ${REQUEST_TIMEOUT_MS / 1000}s`, 'ETIMEOUT', 4)),
      REQUEST_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

interface World {
  /** Which nodes exist and which run a Ready agent (refreshed every HEALTH_REFRESH_MS in --watch). */
  health: NodeHealth;
  checkpoints: Map<string, NodeCheckpointObject>;
  leases: Map<string, LeaseObject>;
  checkpointsVersion: string;
  leasesVersion: string;
}

/** Turn an api error about `verb` on `resource` into what the person at the terminal should do. */
export function explain(err: unknown, verb: string, resource: string, kc: KubeConfig): Error {
  if (err instanceof CliError) return err;
  const e = (err ?? {}) as { code?: unknown; statusCode?: unknown; body?: unknown; message?: string };
  const status = typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : null;
  const server = kc.getCurrentCluster()?.server ?? '(unknown server)';
  const detail = serverMessage(e.body);
  if (status === 404 && resource === NODECHECKPOINTS) {
    return new CliError('the NodeCheckpoint CRD is not installed: kubectl apply -f crds/', 'ENOCRD', 3);
  }
  if (status === 403) {
    return new CliError(
      `permission denied: you may not ${verb} ${resource} at cluster scope${detail ? ` (${detail})` : ''}. ` +
        'The lastseen-viewer ClusterRole (deploy/base/rbac-viewer.yaml) grants what `lastseen status` needs: ' +
        'kubectl create clusterrolebinding lastseen-viewer-$USER --clusterrole=lastseen-viewer --user=<you>',
      'EFORBIDDEN',
      3,
    );
  }
  if (status === 401) return new CliError(`${server} did not accept the kubeconfig's credentials (HTTP 401)`, 'EUNAUTHORIZED', 3);
  if (status !== null) return new CliError(`${verb} ${resource}: HTTP ${status}${detail ? `: ${detail}` : ''}`, 'EAPI', 4);
  return new CliError(`cannot reach the api-server at ${server}: ${describeCause(err)}`, 'EUNREACHABLE', 4);
}

function serverMessage(body: unknown): string {
  let b = body;
  if (typeof body === 'string') {
    try {
      b = JSON.parse(body);
    } catch {
      return body.trim().slice(0, 300);
    }
  }
  return b && typeof b === 'object' && typeof (b as { message?: unknown }).message === 'string' ? (b as { message: string }).message : '';
}

class StatusSource {
  private readonly custom: CustomObjectsApi;
  private readonly coordination: CoordinationV1Api;
  private readonly leaseSelector: string;
  private readonly checkpointSelector: string | undefined;

  constructor(
    private readonly kc: KubeConfig,
    private readonly node: string | undefined,
  ) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.coordination = kc.makeApiClient(CoordinationV1Api);
    this.leaseSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY}${node ? `,${LABEL_NODE}=${node}` : ''}`;
    this.checkpointSelector = node ? `metadata.name=${node}` : undefined;
  }

  /** `request`, tried again on 429 and 5xx; any other error (or the last one) is thrown explained. */
  private async retrying<T>(request: () => Promise<T>, verb: string, resource: string): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await request();
      } catch (e) {
        const code = (e as { code?: unknown }).code;
        const transient = typeof code === 'number' && (code === 429 || (code >= 500 && code < 600));
        if (!transient || attempt >= LIST_ATTEMPTS) throw explain(e, verb, resource, this.kc);
        const after = Number((e as { headers?: Record<string, string> }).headers?.['retry-after']);
        await new Promise((r) => setTimeout(r, after > 0 ? Math.min(after * 1000, LIST_RETRY_MAX_MS) : LIST_RETRY_MS));
      }
    }
  }

  async list(): Promise<World> {
    const world: World = { health: { nodes: null, readyAgents: null }, checkpoints: new Map(), leases: new Map(), checkpointsVersion: '', leasesVersion: '' };
    await this.listCheckpoints(world);
    await this.listLeases(world);
    world.health = { ...(await this.health()), missingPods: await this.missingHolders(world) };
    return world;
  }

  /**
   * Holders of Leases no agent reports on whose pod does not exist (a Lease left behind by a
   * deleted pod). One request per such Lease, which is rare; best effort (null when not allowed).
   */
  async missingHolders(world: World): Promise<Set<string> | null> {
    const reported = new Set<string>();
    for (const [node, nc] of world.checkpoints) {
      const parents = (nc.status as { parents?: Array<{ namespace?: string; key?: string }> } | undefined)?.parents ?? [];
      for (const p of parents) reported.add(`${node}/${p.namespace}/${p.key}`);
    }
    const core = this.kc.makeApiClient(CoreV1Api);
    const missing = new Set<string>();
    for (const l of world.leases.values()) {
      const labels = l.metadata?.labels ?? {};
      const namespace = l.metadata?.namespace;
      const holder = l.spec?.holderIdentity;
      if (!namespace || !holder || l.metadata?.annotations?.[ANNOTATION_ROLE] === 'checkpoint') continue;
      if (reported.has(`${labels[LABEL_NODE]}/${namespace}/${labels[LABEL_PARENT]}`)) continue;
      // A list by name, not a get: the lastseen-viewer ClusterRole grants list on pods.
      try {
        const found = await withTimeout(core.listNamespacedPod({ namespace, fieldSelector: `metadata.name=${holder}` }), this.kc);
        if (found.items.length === 0) missing.add(`${namespace}/${holder}`);
      } catch (e) {
        if ((e as { code?: unknown }).code === 403) return null;
      }
    }
    return missing;
  }

  /**
   * The nodes that exist and those where a Ready agent pod runs, so a report no agent stands behind
   * any more is marked, not shown as current. Best effort: a reader without the right to list
   * nodes or pods (an older lastseen-viewer binding) gets the table without the mark.
   */
  async health(): Promise<NodeHealth> {
    const core = this.kc.makeApiClient(CoreV1Api);
    // With --node, only that node and its pods: a large cluster is not listed every 15 s of --watch.
    const nodeField = this.node ? { fieldSelector: `metadata.name=${this.node}` } : {};
    const podField = this.node ? { fieldSelector: `spec.nodeName=${this.node}` } : {};
    const nodes = await withTimeout(core.listNode(nodeField), this.kc).then(
      (l) => new Set(l.items.map((n) => n.metadata?.name ?? '')),
      () => null,
    );
    const readyAgents = await withTimeout(core.listPodForAllNamespaces({ labelSelector: AGENT_POD_SELECTOR, ...podField }), this.kc).then(
      (l) => new Set(l.items.filter(podReady).map((p) => p.spec?.nodeName ?? '')),
      () => null,
    );
    return { nodes, readyAgents };
  }

  private async listCheckpoints(world: World): Promise<void> {
    const list = await this.retrying(
      () =>
        this.custom.listClusterCustomObject({
          group: NODECHECKPOINT_GROUP,
          version: NODECHECKPOINT_VERSION,
          plural: NODECHECKPOINT_PLURAL,
          fieldSelector: this.checkpointSelector,
        }),
      'list',
      NODECHECKPOINTS,
    );
    world.checkpoints.clear();
    for (const item of (list?.items ?? []) as NodeCheckpointObject[]) world.checkpoints.set(item.metadata?.name ?? '', item);
    world.checkpointsVersion = list?.metadata?.resourceVersion ?? '';
  }

  private async listLeases(world: World): Promise<void> {
    const list = await this.retrying(
      () => this.coordination.listLeaseForAllNamespaces({ labelSelector: this.leaseSelector }),
      'list',
      'leases.coordination.k8s.io',
    );
    world.leases.clear();
    for (const item of list.items as LeaseObject[]) world.leases.set(`${item.metadata?.namespace}/${item.metadata?.name}`, item);
    world.leasesVersion = list.metadata?.resourceVersion ?? '';
  }

  /** Keep `world` current until the process ends; `changed` after every event. Rejects on 403/404. */
  follow(world: World, changed: () => void): Promise<never> {
    return new Promise<never>((_, reject) => {
      const run = (kind: 'checkpoints' | 'leases') => {
        const isCk = kind === 'checkpoints';
        const path = isCk ? `/apis/${NODECHECKPOINT_GROUP}/${NODECHECKPOINT_VERSION}/${NODECHECKPOINT_PLURAL}` : '/apis/coordination.k8s.io/v1/leases';
        const resource = isCk ? NODECHECKPOINTS : 'leases.coordination.k8s.io';
        const map: Map<string, unknown> = isCk ? world.checkpoints : world.leases;
        const keyOf = (o: LeaseObject) => (isCk ? (o.metadata?.name ?? '') : `${o.metadata?.namespace}/${o.metadata?.name}`);
        const restart = () =>
          setTimeout(() => {
            (isCk ? this.listCheckpoints(world) : this.listLeases(world)).then(
              () => {
                changed();
                run(kind);
              },
              (e: unknown) => (isFatal(e) ? reject(e) : restart()),
            );
          }, REWATCH_DELAY_MS);
        const query = {
          resourceVersion: isCk ? world.checkpointsVersion : world.leasesVersion,
          allowWatchBookmarks: true,
          ...(isCk ? { fieldSelector: this.checkpointSelector } : { labelSelector: this.leaseSelector }),
        };
        void new Watch(this.kc).watch(
          path,
          query,
          (type: string, obj: LeaseObject & { metadata?: { resourceVersion?: string } }) => {
            const rv = obj?.metadata?.resourceVersion;
            if (rv && type !== 'ERROR') {
              if (isCk) world.checkpointsVersion = rv;
              else world.leasesVersion = rv;
            }
            if (type === 'ADDED' || type === 'MODIFIED') map.set(keyOf(obj), obj);
            else if (type === 'DELETED') map.delete(keyOf(obj));
            else return; // BOOKMARK: only the version moved. ERROR (e.g. 410): the watch ends and is re-listed.
            changed();
          },
          (err: unknown) => {
            if (err) {
              const explained = explain(err, 'watch', resource, this.kc);
              if (isFatal(explained)) return reject(explained);
            }
            restart();
          },
        );
      };
      run('checkpoints');
      run('leases');
      // Agents come and go without touching a NodeCheckpoint: look again now and then.
      setInterval(() => {
        void this.health().then(async (h) => {
          world.health = { ...h, missingPods: await this.missingHolders(world) };
          changed();
        });
      }, HEALTH_REFRESH_MS).unref();
    });
  }
}

function isFatal(e: unknown): boolean {
  return e instanceof CliError && (e.code === 'ENOCRD' || e.code === 'EFORBIDDEN' || e.code === 'EUNAUTHORIZED');
}
