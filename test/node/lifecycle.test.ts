// Upgrade, downgrade and uninstall of lastseen on the real node, the way docs/install.md says to do
// them. The images are the release image `scripts/node up` pushed to the node's registry and a second
// build of it (the same layers, another version label, so another digest), both pulled by the
// kubelet by digest. The upgrade and its way back must leave the parents covered throughout: no
// checkpoint activated, every stored checkpoint kept, the NodeCheckpoint the same object, reported
// on by the new agent; the agent's own stored copy follows its image, the DaemonSet's new pod ends up
// the acting agent (so the rollout finishes), and every running agent (that pod and the static copy)
// still has its service-account files. The uninstall must leave
// nothing of lastseen behind: no manifest, state folder, Lease, RBAC object, CRD or other object.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { REPO } from './env.js';
import { staticManifests } from './manifests.js';
import { CHECKPOINTS, CONTROL_PLANE, log, MANIFESTS, realNodeTestbed, sleep, type Testbed } from './testbed.js';

const run = promisify(execFile);
const CRANE = join(REPO, 'scripts', 'crane');
const NS = 'lastseen-system';

let tb: Testbed;
beforeAll(async () => {
  tb = realNodeTestbed();
  await tb.fresh(true);
});
afterAll(async () => {
  await tb?.node('down');
});

const crane = async (...args: string[]) => (await run(CRANE, ['run', ...args], { maxBuffer: 16 << 20 })).stdout.trim();

/**
 * The same image index with another `org.opencontainers.image.version` label on each platform's
 * image: a second build as far as every tool can tell (another digest), pushed to the same registry.
 */
async function relabelled(ref: string, version: string): Promise<string> {
  const repo = ref.slice(0, ref.indexOf('@'));
  const index = JSON.parse(await crane('manifest', ref)) as { manifests: { digest: string; platform: { os: string; architecture: string } }[] };
  const images: string[] = [];
  for (const m of index.manifests) {
    images.push(await crane('mutate', `${repo}@${m.digest}`, '--label', `org.opencontainers.image.version=${version}`, '--repo', repo));
  }
  const out = await crane('index', 'append', ...images.flatMap((i) => ['-m', i]), '-t', `${repo}:${version}`);
  const digest = out.match(/@(sha256:[0-9a-f]{64})$/)?.[1];
  if (!digest) throw new Error(`crane index append printed no digest: ${out}`);
  return `${repo}@${digest}`;
}

type Pod = {
  metadata: { name: string; uid: string; annotations?: Record<string, string>; deletionTimestamp?: string };
  spec: { containers: { image: string }[] };
  status?: { containerStatuses?: { ready: boolean; imageID?: string }[] };
};

/** The agent's DaemonSet pods (not its static copy). */
async function agentPods(): Promise<Pod[]> {
  const pods: Pod[] = JSON.parse(await tb.kubectl(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent', '-o', 'json'])).items;
  return pods.filter((p) => !p.metadata.annotations?.['kubernetes.io/config.mirror']);
}

type NodeCheckpoint = {
  metadata: { name: string; uid: string };
  status?: {
    node?: string;
    observedAt?: string;
    parents?: { namespace: string; key: string; checkpointStored?: boolean; checkpointActive?: boolean; covered?: boolean }[];
  };
};

async function nodeCheckpoint(): Promise<NodeCheckpoint> {
  const items: NodeCheckpoint[] = JSON.parse(await tb.kubectl(['get', 'nodecheckpoints', '-o', 'json'])).items;
  const nc = items.find((i) => i.status?.node === tb.env.nodeName || i.metadata.name === tb.env.nodeName);
  if (!nc) throw new Error(`no NodeCheckpoint for ${tb.env.nodeName} among ${items.map((i) => i.metadata.name).join(', ') || 'none'}`);
  return nc;
}

/** The images the agent's own stored checkpoint would run (its pod.json), or [] when there is none. */
function agentCopyImages(): string[] {
  if (!existsSync(CHECKPOINTS)) return [];
  const dir = readdirSync(CHECKPOINTS).find((d) => d.startsWith(`${NS}_`) && existsSync(join(CHECKPOINTS, d, 'pod.json')));
  if (!dir) return [];
  const pod = JSON.parse(readFileSync(join(CHECKPOINTS, dir, 'pod.json'), 'utf8')) as { spec: { containers: { image: string }[] } };
  return pod.spec.containers.map((c) => c.image);
}

/** Every agent pod of the node: the DaemonSet's and its static copy (a mirror pod). */
async function allAgentPods(): Promise<Pod[]> {
  return JSON.parse(await tb.kubectl(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent', '-o', 'json'])).items;
}

/**
 * Whether the node runs `image` only: one DaemonSet pod, on it; the acting agent (the Ready one:
 * the DaemonSet's pod or its static copy, whichever holds the node lock) on it, and no other agent
 * on another image; and the NodeCheckpoint reported on after `since`.
 */
async function agentOn(image: string, since: number): Promise<boolean> {
  const ds = await agentPods();
  if (ds.length !== 1 || ds[0]?.metadata.deletionTimestamp || ds[0]?.spec.containers[0]?.image !== image) return false;
  const all = (await allAgentPods()).filter((p) => !p.metadata.deletionTimestamp);
  if (all.some((p) => p.spec.containers[0]?.image !== image)) return false;
  if (!all.some((p) => p.status?.containerStatuses?.[0]?.ready)) return false;
  const nc = await nodeCheckpoint();
  return Date.parse(nc.status?.observedAt ?? '') > since;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * Every running lastseen agent process of the node's pods (the DaemonSet pod's and the static copy's,
 * by their command line), with the service-account files missing from its own view of the filesystem
 * (its mounts, through /proc/<pid>/root). A copy whose folder was swapped and deleted under its
 * bind mount has none: it cannot reach the api-server.
 */
function agentProcesses(): { pid: number; missing: string[] }[] {
  const found: { pid: number; missing: string[] }[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const args = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (!args.includes('agent') || !args.some((a) => a.startsWith('--health-port='))) continue;
      // The node's pods only (the kubelet's cgroups), not an agent some other test runs on this host.
      if (!readFileSync(`/proc/${d}/cgroup`, 'utf8').includes('kubepods')) continue;
      const missing = ['token', 'ca.crt', 'namespace'].filter((f) => !existsSync(`/proc/${d}/root${SA_DIR}/${f}`));
      found.push({ pid: Number(d), missing });
    } catch {
      // the process went meanwhile
    }
  }
  return found;
}

/** Both agents (the DaemonSet's pod and the static copy) run, and each sees its service-account files. */
async function agentsHaveServiceAccountFiles(what: string): Promise<void> {
  let last: { pid: number; missing: string[] }[] = [];
  try {
    await tb.waitFor(`${what}: two agent processes, each with ${SA_DIR}/{token,ca.crt,namespace}`, 90, () => {
      last = agentProcesses();
      return last.length === 2 && last.every((p) => p.missing.length === 0);
    });
  } catch (e) {
    throw new Error(`${(e as Error).message}; last seen: ${JSON.stringify(last)}`);
  }
}

/** The DaemonSet's rollout is done: its one pod is the updated one and available (Ready: it holds the node lock). */
async function rolledOut(): Promise<boolean> {
  const ds = JSON.parse(await tb.kubectl(['-n', NS, 'get', 'daemonset', 'lastseen-agent', '-o', 'json']));
  const s = ds.status ?? {};
  return s.observedGeneration === ds.metadata?.generation && s.desiredNumberScheduled === 1 && s.updatedNumberScheduled === 1 && s.numberAvailable === 1;
}

type Watch = {
  samples: number;
  apiDown: number;
  /** Why each failed /readyz poll failed, with its time since the watch began (s). */
  apiDownWhy: string[];
  active: Set<string>;
  storedMissing: Set<string>;
  agentsReady: number[];
};

/** Samples, every 500 ms until stopped, what must hold while the agent is replaced. */
function watchCoverage(): { stop: () => Promise<Watch> } {
  const w: Watch = { samples: 0, apiDown: 0, apiDownWhy: [], active: new Set(), storedMissing: new Set(), agentsReady: [] };
  const t0 = Date.now();
  let on = true;
  const loop = (async () => {
    while (on) {
      w.samples++;
      const failure = await tb.readyzFailure();
      if (failure !== null) {
        w.apiDown++;
        w.apiDownWhy.push(`${((Date.now() - t0) / 1000).toFixed(1)}s ${failure}`);
      }
      for (const c of CONTROL_PLANE) {
        if (tb.checkpointActive(c)) w.active.add(c);
        if (!tb.checkpointStored(c)) w.storedMissing.add(c);
      }
      // Any parent's checkpoint manifest; the agent's own copy (lastseen-lastseen-system-*) is there always, by design.
      for (const f of existsSync(MANIFESTS) ? readdirSync(MANIFESTS) : []) if (f.startsWith('lastseen-') && !f.startsWith(`lastseen-${NS}-`)) w.active.add(f);
      try {
        w.agentsReady.push((await allAgentPods()).filter((p) => p.status?.containerStatuses?.[0]?.ready).length);
      } catch {
        w.agentsReady.push(-1);
      }
      await sleep(500);
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return w;
    },
  };
}

/** What the agents logged matching `pattern` since `since` (ms since the epoch), oldest first, with the time since it. */
function agentLines(pattern: RegExp, since = 0): string[] {
  const root = join(tb.env.dir, 'pod-logs');
  const out: { time: number; line: string }[] = [];
  for (const d of existsSync(root) ? readdirSync(root).filter((d) => d.startsWith(`${NS}_lastseen-agent-`)) : []) {
    const [namespace, pod, uid] = d.split('_') as [string, string, string];
    for (const line of tb.containerLog(namespace, pod, uid, 'agent')) {
      if (!pattern.test(line)) continue;
      try {
        const e = JSON.parse(line) as { time?: number; msg?: string; err?: string };
        if (typeof e.time === 'number' && e.time >= since)
          out.push({
            time: e.time,
            line: `${since ? `${((e.time - since) / 1000).toFixed(1)}s` : new Date(e.time).toISOString()} ${pod}: ${e.msg}${e.err ? ` (${e.err})` : ''}`,
          });
      } catch {
        // a line cut by a restart
      }
    }
  }
  return out.sort((a, b) => a.time - b.time).map((e) => e.line);
}

/** What the agents logged about the node lock since `since` (who stood by, gave way, handed it over), oldest first. */
const lockSteps = (since: number): string[] => agentLines(/node lock/, since);

/** The agent's `activating checkpoint` decisions about any control-plane parent since `since`. */
const activations = (since: number) =>
  CONTROL_PLANE.flatMap((c) => tb.agentRecords(`kube-system/${c}`, since).filter((r) => r.msg === 'activating checkpoint'));

/** Applies the install with `image` (the agent DaemonSet's pin changes: a rolling update) and waits until the new agent reports. */
async function rollTo(image: string, what: string): Promise<{ seconds: number; noReadyAgentS: number; watch: Watch }> {
  const watch = watchCoverage();
  const t0 = Date.now();
  await tb.installLastseen(true, image);
  const seconds = await tb.waitFor(`the agent on ${image} (${what}), Ready and reporting`, 300, () => agentOn(image, t0), 500);
  await sleep(3000); // a few more samples with the new agent in charge
  const w = await watch.stop();
  // Which of the two is Ready (acting) here: the DaemonSet's new pod, standing by with its standby
  // sign up, is left the lock by the copy restarted on its spec, or handed it by the copy acting; a
  // DaemonSet pod standing by is not Ready, which holds a rollout (roll() checks it finishes).
  const acting = (await allAgentPods()).filter((p) => p.status?.containerStatuses?.[0]?.ready).map((p) => p.metadata.name);
  log(`${what}: acting agent ${acting.join(', ')}`);
  const noReadyAgentS = (w.agentsReady.filter((n) => n < 1).length * 500) / 1000;
  log(`${what}: new agent reporting after ${seconds.toFixed(1)}s; ~${noReadyAgentS}s without a Ready agent; ${w.samples} samples`);
  return { seconds, noReadyAgentS, watch: w };
}

describe('lastseen upgraded, downgraded and uninstalled on a real node', () => {
  // Filled by the upgrade, used by the downgrade (the tests run in order on one node).
  let images: { first: string; next: string } | null = null;
  let before: NodeCheckpoint | null = null;

  /** Rolls the agent DaemonSet to `image` and checks what must hold through it and after. */
  async function roll(image: string, what: string): Promise<void> {
    if (!before) throw new Error('no NodeCheckpoint recorded before the first roll');
    const t0 = Date.now();
    const r = await rollTo(image, what);
    expect(r.watch.active, `${what}: checkpoints activated`).toEqual(new Set());
    expect(r.watch.storedMissing, `${what}: checkpoints missing`).toEqual(new Set());
    expect(r.watch.apiDown, `${what}: /readyz polls failed: ${r.watch.apiDownWhy.join('; ')}`).toBe(0);
    // The stored copy of the agent itself runs what the DaemonSet runs now (a reboot brings this version back).
    await tb.waitFor(`the agent's own copy on the ${what}'s image`, 60, () => agentCopyImages().includes(image));
    // The copy restarted on it, the DaemonSet's new pod took the node lock: the rollout finishes.
    const doneS = await tb.waitFor(`${what}: the DaemonSet's rollout finished (its new pod Ready)`, 120, rolledOut, 1000);
    log(`${what}: rollout finished ${doneS.toFixed(1)}s after the new agent reported`);
    // The acting agent, as the node lock's holder file names it (a Ready condition lags: the copy
    // that stopped acting stays Ready until its readiness probe fails three times, up to 15 s).
    const [pod] = await agentPods();
    const holder = JSON.parse(readFileSync(join(dirname(CHECKPOINTS), 'agent.lock'), 'utf8')) as { pod?: string; role?: string; holder?: string };
    log(`${what}: the node lock held by ${holder.holder} (${holder.role}); on the way: ${lockSteps(t0).join('; ') || 'none logged'}`);
    expect(holder, `${what}: the node lock's holder`).toMatchObject({ role: 'daemonset', pod: pod?.metadata.name });
    await agentsHaveServiceAccountFiles(what);
    const nc = await nodeCheckpoint();
    expect(nc.metadata.uid, `${what}: the NodeCheckpoint is the same object`).toBe(before.metadata.uid);
    for (const c of CONTROL_PLANE) {
      const p = nc.status?.parents?.find((x) => x.namespace === 'kube-system' && x.key === c);
      expect(p, `${what}: ${c} in the NodeCheckpoint`).toMatchObject({ checkpointStored: true, checkpointActive: false });
    }
    expect(activations(t0), `${what}: the agents activated a checkpoint`).toEqual([]);
    // Still reported on by the agent now acting, after all of it.
    const since = Date.now();
    await tb.waitFor(
      `${what}: the NodeCheckpoint reported on again`,
      60,
      async () => Date.parse((await nodeCheckpoint()).status?.observedAt ?? '') > since,
      1000,
    );
  }

  // Which agent acts after the copy restarts on the new spec used to be a race (the copy won in a
  // full CI run, and the rollout held): now a copy leaves the lock to its DaemonSet pod standing by
  // on its spec, and hands it over while it holds it (src/agent/run-lock.ts).
  it('upgrade to a new image: nothing activated, every checkpoint kept, the NodeCheckpoint carried over', async () => {
    const first = tb.env.lastseenImage;
    if (!first) throw new Error('the node bed names no lastseen image');
    expect(first).toMatch(/^127\.0\.0\.1:\d+\/lastseen@sha256:[0-9a-f]{64}$/);
    const next = await relabelled(first, '0.1.0-upgrade-test');
    expect(next).not.toBe(first);
    // The running agent is the first image's, pulled by digest from the node's registry.
    expect((await agentPods()).map((p) => p.spec.containers[0]?.image)).toEqual([first]);
    await tb.waitFor("the agent's own copy on the first image", 60, () => agentCopyImages().includes(first));
    await agentsHaveServiceAccountFiles('installed');
    // The acting agent creates the NodeCheckpoint at its first status write; a write that met the
    // bootstrap api-server's removal is tried again 5 s later, so give it a while, and say what
    // the agents logged about it if it never comes.
    try {
      await tb.waitFor('the NodeCheckpoint of the node', 90, async () => (await nodeCheckpoint()) !== null, 1000);
    } catch (e) {
      throw new Error(`${(e as Error).message}; the agents said: ${agentLines(/status|node lock/).join('; ') || 'nothing'}`);
    }
    before = await nodeCheckpoint();
    images = { first, next };
    await roll(next, 'upgrade');
  });

  it('downgrade back to the first image, the same way', async () => {
    if (!images) throw new Error('the upgrade test did not get as far as the upgrade; the downgrade starts from it');
    await roll(images.first, 'downgrade');
  });

  it('uninstall in the documented order: no manifest, state folder, Lease, RBAC object, CRD or other object of lastseen left', async () => {
    const t0 = Date.now();
    // 1. The agents' DaemonSet goes. Each node's permanent copy of the agent (a static pod) takes
    //    over and acts on: it must go too, before the parents change, or it covers them.
    await kubectlRetried('delete the agent DaemonSet', ['-n', NS, 'delete', 'daemonset', 'lastseen-agent', '--ignore-not-found']);
    await tb.waitFor('the agent DaemonSet pods gone', 120, async () => (await agentPods()).length === 0);
    // 2. The node's files, the agent's copy with them: the cleanup DaemonSet (deploy/uninstall),
    //    pinned to the installed image. From here no agent runs on the node.
    const cleanup = await renderPinned(join(REPO, 'deploy', 'uninstall'), tb.env.lastseenImage ?? '');
    const tc = Date.now();
    await tb.waitFor(
      'the cleanup DaemonSet applied',
      120,
      async () => {
        await tb.apply(cleanup);
        return true;
      },
      2000,
    );
    await tb.waitFor('the cleanup DaemonSet done on the node', 240, async () => {
      const ds = JSON.parse(await tb.kubectl(['-n', NS, 'get', 'daemonset', 'lastseen-cleanup', '-o', 'json']));
      return ds.status?.desiredNumberScheduled === 1 && ds.status?.numberReady === 1;
    });
    log(`cleanup done after ${((Date.now() - tc) / 1000).toFixed(1)}s`);
    await kubectlRetried('delete the cleanup DaemonSet', ['-n', NS, 'delete', 'daemonset', 'lastseen-cleanup', '--ignore-not-found']);
    await tb.waitFor('the agent copy stopped', 120, async () => {
      const pods = JSON.parse(await tb.kubectl(['get', 'pods', '-n', NS, '-o', 'json'])).items as { metadata: { name: string } }[];
      return !pods.some((p) => p.metadata.name.startsWith('lastseen-agent'));
    });
    // 3. lastseen out of the parents. On a control plane of one node its components go back to
    //    static pods first (as bootstrap ran them), then their DaemonSets (with the heartbeat
    //    sidecars) go, then the heartbeat identity and policy the recipes added to kube-system.
    for (const [name, obj] of Object.entries(staticManifests(tb.env))) if (name.startsWith('bootstrap-')) tb.writeStatic(name, obj);
    await tb.waitFor('the static api-server beside the self-hosted one', 180, async () =>
      (await tb.kubectl(['get', 'pods', '-n', 'kube-system', '-o', 'name'])).includes('bootstrap-kube-apiserver'),
    );
    await tb.waitFor('the static api-server ready', 120, async () => {
      const pods = JSON.parse(await tb.kubectl(['get', 'pods', '-n', 'kube-system', '-o', 'json'])).items as {
        metadata: { name: string };
        status?: { containerStatuses?: { ready: boolean }[] };
      }[];
      return pods.some((p) => p.metadata.name.startsWith('bootstrap-kube-apiserver') && p.status?.containerStatuses?.[0]?.ready === true);
    });
    await kubectlRetried('delete the self-hosted DaemonSets', ['-n', 'kube-system', 'delete', 'daemonset', ...CONTROL_PLANE, '--ignore-not-found']);
    // While the self-hosted api-server stops, connections the kernel gives its closing listener fail: wait it out.
    await tb.waitFor('the self-hosted pods gone', 180, async () => {
      const left = await tb.kubectl(['get', 'pods', '-n', 'kube-system', '-l', `app.kubernetes.io/name in (${CONTROL_PLANE.join(',')})`, '-o', 'name']);
      return left.trim() === '';
    });
    await tb.waitFor('the static api-server answering alone', 120, async () => (await tb.readyz()) && (await tb.readyz()) && (await tb.readyz()));
    await kubectlRetried('delete the recipes’ objects in kube-system', [
      '-n',
      'kube-system',
      'delete',
      'serviceaccount,role,rolebinding,configmap',
      '-l',
      'app.kubernetes.io/part-of=lastseen',
      '--ignore-not-found',
    ]);
    // 4. The cluster's objects: the install itself (deploy/base: CRD and NodeCheckpoints, RBAC,
    //    admission policies, namespace), then the heartbeats' Leases in the parents' namespaces.
    const base = (await tb.kubectl(['kustomize', join(REPO, 'deploy', 'base')])).trim();
    await kubectlRetried('delete deploy/base', ['delete', '-f', '-', '--ignore-not-found', '--wait=false'], base);
    await tb.waitFor('the namespace and the CRD gone', 180, async () => {
      const left = await tb.kubectl(['get', 'namespace/lastseen-system', 'crd/nodecheckpoints.lastseen.dev', '-o', 'name', '--ignore-not-found']);
      return left.trim() === '';
    });
    await kubectlRetried('delete the heartbeat Leases', ['delete', 'leases', '-A', '-l', 'app.kubernetes.io/managed-by=lastseen', '--ignore-not-found']);
    log(`uninstalled in ${((Date.now() - t0) / 1000).toFixed(1)}s`);

    // What remains: nothing.
    expect(existsSync(MANIFESTS) ? readdirSync(MANIFESTS).filter((f) => f.includes('lastseen')) : [], 'manifests').toEqual([]);
    expect(
      ['/var/lib/lastseen', '/run/lastseen'].filter((p) => existsSync(p)),
      'state folders',
    ).toEqual([]);
    const kinds = (await tb.kubectl(['api-resources', '--verbs=list', '-o', 'name'])).split('\n').filter((k) => k && !k.startsWith('events'));
    for (const selector of ['app.kubernetes.io/part-of=lastseen', 'app.kubernetes.io/managed-by=lastseen', 'app.kubernetes.io/name=lastseen']) {
      const left = (await tb.kubectl(['get', kinds.join(','), '-A', '-l', selector, '-o', 'name', '--ignore-not-found'])).trim();
      expect(left, `objects labelled ${selector}`).toBe('');
    }
    const crds = (await tb.kubectl(['get', 'crd', '-o', 'name'])).trim();
    expect(
      crds.split('\n').filter((c) => c.includes('lastseen')),
      'CRDs',
    ).toEqual([]);
    const namespaces = (await tb.kubectl(['get', 'namespaces', '-o', 'name'])).trim();
    expect(
      namespaces.split('\n').filter((n) => n.includes('lastseen')),
      'namespaces',
    ).toEqual([]);
    const roles = (await tb.kubectl(['get', 'clusterroles,clusterrolebindings,roles,rolebindings,serviceaccounts', '-A', '-o', 'name'])).trim();
    expect(
      roles.split('\n').filter((r) => r.includes('lastseen')),
      'RBAC objects and service accounts by name',
    ).toEqual([]);
    // And the cluster still serves (the pivot to static pods worked).
    expect(await tb.readyz()).toBe(true);
  });
});

/** A kubectl command, retried for up to 2 minutes while the api-server does not answer (it is being replaced). */
async function kubectlRetried(what: string, args: string[], input?: string): Promise<void> {
  await tb.waitFor(
    what,
    120,
    async () => {
      await tb.kubectl(args, input);
      return true;
    },
    2000,
  );
}

/** The objects of a kustomization with lastseen's image pinned to `image` (repository@digest), as a user's overlay pins it. */
async function renderPinned(dir: string, image: string): Promise<object[]> {
  const pin = image.match(/^(.+)@(sha256:[0-9a-f]{64})$/);
  if (!pin?.[1] || !pin[2]) throw new Error(`not an image by digest: "${image}"`);
  const tmp = mkdtempSync(join(tmpdir(), 'lastseen-pin-'));
  try {
    writeFileSync(
      join(tmp, 'kustomization.yaml'),
      stringify({ resources: [relative(tmp, dir)], images: [{ name: 'ghcr.io/lastseen/lastseen', newName: pin[1], digest: pin[2] }] }),
    );
    return parseAllDocuments(await tb.kubectl(['kustomize', tmp])).map((d) => d.toJSON() as object);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
