// Beats that are not the parent's own must not keep it alive, on any channel, against the real
// kube-apiserver: `lastseen agent` and `lastseen heartbeat` as processes (fault-helpers.ts), the
// parent's sidecar killed, and an admin rewriting its beat every 0.4 s with another holder uid,
// another holder name, a sequence that does not move (only the renew time does) or one that goes
// down. Each time the agent must cover the parent within a few windows and count the refusals.
// Then two live pods of one key (a surge rollout): the Stopping of one while the other beats Ready
// is no reason to activate. Then a Lease write queued inside a frozen api-server (SIGSTOP), applied
// at SIGCONT after the local file has shown the parent dead: it must not retire the checkpoint.
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ANNOTATION_HOLDER_UID, ANNOTATION_LAST_SEEN, ANNOTATION_SEQUENCE, leaseName, localBeatFile } from '../../src/core/names.js';
import { microTime } from '../../src/heartbeat/beat.js';
import { appears, captured, exists, type FaultSetup, faultSetup, healthy, KEY, metric, metricsText, sleep, transitions } from './fault-helpers.js';
import { apiserverPid, controlPlane, kubeConfigFor, waitFor } from './harness.js';
import { healthPort, lastseen, type Proc } from './processes.js';

const POLICY = (channels: string, extra = '') =>
  `{ interval: 250ms, window: 1s, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, handoverBackoff: { initial: 1s, max: 4s }, channels: [${channels}]${extra} }`;

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const FOREIGN_UID = '00000000-0000-0000-0000-000000000000';
type Forgery = 'holder uid' | 'holder name' | 'frozen sequence' | 'decreasing sequence';

interface Fields {
  holder: string;
  holderUid: string;
  sequence: number;
}

/** The next forged values, from the parent's last real beat and the forger's step (1, 2, …). */
function forge(kind: Forgery, last: Fields, step: number): Fields {
  switch (kind) {
    case 'holder uid':
      return { ...last, holderUid: FOREIGN_UID, sequence: last.sequence + step };
    case 'holder name':
      return { ...last, holder: 'intruder', sequence: last.sequence + step };
    case 'frozen sequence':
      return last;
    case 'decreasing sequence':
      // Down from the last real one, never to 1 (where every writer's run starts).
      return { ...last, sequence: Math.max(2, last.sequence - step) };
  }
}

/** Rewrites the parent's beat on `channel` every 400 ms until stopped; each write gets a new renew time. */
function forger(s: FaultSetup, channel: 'lease' | 'annotation' | 'local', kind: Forgery): { stop(): Promise<void> } {
  const leases = kubeConfigFor('admin').makeApiClient(CoordinationV1Api);
  const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  const file = join(s.dirs.heartbeats, localBeatFile(s.ns, KEY));
  const name = leaseName(KEY, s.node);
  let running = true;
  let last: Fields | null = null;
  const write = async (step: number) => {
    const renew = microTime(Date.now());
    if (channel === 'lease') {
      const lease: V1Lease = await leases.readNamespacedLease({ name, namespace: s.ns });
      const ann = lease.metadata!.annotations!;
      last ??= { holder: lease.spec!.holderIdentity!, holderUid: ann[ANNOTATION_HOLDER_UID]!, sequence: Number(ann[ANNOTATION_SEQUENCE]) };
      const f = forge(kind, last, step);
      ann[ANNOTATION_HOLDER_UID] = f.holderUid;
      ann[ANNOTATION_SEQUENCE] = String(f.sequence);
      lease.spec!.holderIdentity = f.holder;
      lease.spec!.renewTime = renew as never;
      await leases.replaceNamespacedLease({ name, namespace: s.ns, body: lease });
    } else if (channel === 'annotation') {
      const pod = await core.readNamespacedPod({ name: s.pod.name, namespace: s.ns });
      const ann = pod.metadata!.annotations!;
      last ??= { holder: s.pod.name, holderUid: ann[ANNOTATION_HOLDER_UID]!, sequence: Number(ann[ANNOTATION_SEQUENCE]) };
      const f = forge(kind, last, step);
      await core.patchNamespacedPod(
        {
          name: s.pod.name,
          namespace: s.ns,
          body: {
            metadata: { annotations: { [ANNOTATION_LAST_SEEN]: renew, [ANNOTATION_HOLDER_UID]: f.holderUid, [ANNOTATION_SEQUENCE]: String(f.sequence) } },
          },
        },
        mergePatch,
      );
    } else {
      const doc = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown> & Fields;
      last ??= { holder: doc.holder, holderUid: doc.holderUid, sequence: doc.sequence };
      const f = forge(kind, last, step);
      await writeFile(`${file}.forged`, `${JSON.stringify({ ...doc, ...f, renewTime: renew })}\n`);
      await rename(`${file}.forged`, file);
    }
  };
  const loop = (async () => {
    for (let step = 1; running; step++) {
      await write(step);
      await sleep(400);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

async function refused(port: number, channel: string): Promise<number> {
  const body = await metricsText(port);
  return (
    metric(body, `lastseen_refused_beats_total{channel="${channel}",why="foreign"}`) +
    metric(body, `lastseen_refused_beats_total{channel="${channel}",why="frozen"}`)
  );
}

async function badInputs(port: number, channel: string): Promise<number> {
  return metric(await metricsText(port), `lastseen_bad_inputs_total{source="${channel}"}`);
}

/**
 * For each forgery: the parent Healthy, its sidecar killed, the forger started; the checkpoint must
 * appear within a few windows and the forged writes must be counted as bad input. Then the sidecar
 * returns and the checkpoint is retired for the next round.
 */
async function forgeriesAreRefused(channel: 'lease' | 'annotation' | 'local', kinds: Forgery[]): Promise<void> {
  const s = await faultSetup(`trust-${channel}`, { policy: POLICY(channel) });
  const port = await healthPort(s.agent);
  let hb: Proc = s.heartbeat(channel);
  await captured(s);
  const results: string[] = [];
  for (const kind of kinds) {
    await waitFor(() => transitions(s.agent).at(-1)?.to === 'Healthy', { timeoutMs: 30_000, what: 'the parent Healthy' });
    await sleep(600);
    const mark = s.agent.logs.length;
    const before = await badInputs(port, channel);
    await hb.stop('SIGKILL');
    const f = forger(s, channel, kind);
    let activationMs: number;
    try {
      activationMs = await appears(s.manifest, 15_000);
      // The forger goes on a little: its writes are counted (the first of a new holder is held
      // until the next pod list, and a loaded machine may have read only that one by now).
      await sleep(2_000);
    } finally {
      await f.stop();
    }
    const counted = (await badInputs(port, channel)) - before;
    results.push(`${channel}/${kind}: covered after ${activationMs} ms, ${counted} writes refused`);
    expect(counted, `${channel}/${kind}: forged beats counted as bad input`).toBeGreaterThan(0);
    if (kind === 'holder uid' && channel !== 'annotation') {
      // Its first beat named a holder no pod list has: the agent listed the pods afresh (in case
      // its watch was behind), which did not name it, and covered all the same. (On the
      // annotation a foreign uid is refused as it is read, before the core.)
      const asked = s.agent.logs.slice(mark).filter((l) => l.msg === 'a beat from a holder no pod list names; listing the pods afresh');
      expect(asked.map((l) => l.holderUid)).toContain(FOREIGN_UID);
    }
    // The parent's own sidecar returns: the checkpoint is retired.
    hb = s.heartbeat(channel);
    await waitFor(async () => !(await exists(s.manifest)), { timeoutMs: 30_000, what: 'the checkpoint retired when the sidecar returns' });
    await healthy(s.agent, mark);
  }
  if (channel !== 'annotation') expect(await refused(port, channel)).toBeGreaterThan(0);
  process.stdout.write(`[measured] ${results.join('; ')}\n`);
  await hb.stop('SIGKILL');
  await s.agent.stop();
}

describe('a beat counts only if it is the parent own', () => {
  it('Lease: another holder uid, another holder name, a frozen sequence, a sequence going down: covered on time', async () => {
    await forgeriesAreRefused('lease', ['holder uid', 'holder name', 'frozen sequence', 'decreasing sequence']);
  });

  it('local file: another holder uid, another holder name, a frozen sequence, a sequence going down: covered on time', async () => {
    await forgeriesAreRefused('local', ['holder uid', 'holder name', 'frozen sequence', 'decreasing sequence']);
  });

  // The annotation's holder is the pod itself (its name cannot differ); a foreign uid there was
  // already refused when read. Frozen and decreasing sequences go through the same rule.
  it('annotation: another holder uid, a frozen sequence, a sequence going down: covered on time', async () => {
    await forgeriesAreRefused('annotation', ['holder uid', 'frozen sequence', 'decreasing sequence']);
  });

  it('two live pods of one key: the Stopping of one while the other beats Ready does not activate; the last one dying does', async () => {
    const s = await faultSetup('trust-two-pods', { policy: POLICY('lease') });
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    // The rollout's new pod, same key and node, created after the first: the one the agent tracks.
    const second = await core.createNamespacedPod({
      namespace: s.ns,
      body: {
        metadata: { name: `demo-${s.node}-surge`, labels: { 'lastseen.dev/parent': KEY, app: 'demo' }, annotations: { 'lastseen.dev/checkpoint': 'true' } },
        spec: { nodeName: s.node, containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
      },
    });
    const cp = controlPlane();
    const hbA = s.heartbeat('lease');
    const hbB = lastseen([
      'heartbeat',
      ...['--node', s.node, '--pod-name', second.metadata!.name!, '--namespace', s.ns, '--pod-uid', second.metadata!.uid!, '--parent-key', KEY],
      ...['--channels', 'lease', '--interval', '250ms', '--probe', s.main.probe(), '--heartbeat-dir', s.dirs.heartbeats, '--kubeconfig', cp.adminKubeconfig],
    ]);
    await captured(s);
    await healthy(s.agent);
    await sleep(1500);
    const mark = s.agent.logs.length;
    // The old pod's sidecar gets SIGTERM (its last beat says Stopping); the new one beats on.
    await hbA.stop('SIGTERM');
    await sleep(4000);
    expect(await exists(s.manifest)).toBe(false);
    expect(transitions(s.agent, mark).filter((t) => t.to === 'Active')).toEqual([]);
    // The last pod of the key dies: covered.
    await hbB.stop('SIGKILL');
    const ms = await appears(s.manifest, 15_000);
    process.stdout.write(`[measured] two pods of one key: no activation for 4 s after one pod's Stopping; covered ${ms} ms after the other died\n`);
    await s.agent.stop();
  });
});

describe('a Lease write that surfaces late', () => {
  it('queued in a frozen api-server (SIGSTOP), applied at SIGCONT after the local file showed the parent dead: the checkpoint stays', async () => {
    const s = await faultSetup('trust-frozen', { policy: POLICY('lease, local', ', whenApiUnreachable: activate') });
    const leases = kubeConfigFor('admin').makeApiClient(CoordinationV1Api);
    const name = leaseName(KEY, s.node);
    const hb = s.heartbeat('lease,local');
    await captured(s);
    await healthy(s.agent);
    await sleep(1000);
    const pid = await apiserverPid();
    const localFile = join(s.dirs.heartbeats, localBeatFile(s.ns, KEY));
    // The Lease as the api-server has it when it freezes; the write queued next carries the round
    // the sidecar is at then, older than every local beat it writes afterwards.
    const lease = await leases.readNamespacedLease({ name, namespace: s.ns });
    const leaseSeqBefore = lease.metadata!.annotations![ANNOTATION_SEQUENCE];
    const renewBefore = String(lease.spec!.renewTime);
    process.kill(pid, 'SIGSTOP');
    let stale: Promise<unknown> = Promise.resolve();
    try {
      // The round after the Lease's last (the sidecar's next write), no newer than the local file's.
      const localSeq = (JSON.parse(await readFile(localFile, 'utf8')) as { sequence: number }).sequence;
      const queuedSeq = Math.min(Number(leaseSeqBefore) + 1, localSeq);
      const ann = lease.metadata!.annotations!;
      ann[ANNOTATION_SEQUENCE] = String(queuedSeq);
      lease.spec!.renewTime = microTime(Date.now()) as never;
      // Sent now on a connection of its own, answered only once the api-server runs again.
      stale = kubeConfigFor('admin')
        .makeApiClient(CoordinationV1Api)
        .patchNamespacedLease(
          {
            name,
            namespace: s.ns,
            body: { metadata: { annotations: { [ANNOTATION_SEQUENCE]: String(queuedSeq) } }, spec: { renewTime: lease.spec!.renewTime } },
          },
          mergePatch,
        )
        .catch((e: unknown) => e);
      await sleep(3000);
      // The local file kept going past the queued round; now the parent dies.
      const lastLocal = (JSON.parse(await readFile(localFile, 'utf8')) as { sequence: number }).sequence;
      expect(lastLocal).toBeGreaterThan(queuedSeq);
      await hb.stop('SIGKILL');
      // No api-server answers and the local file stopped: covered (whenApiUnreachable: activate).
      await appears(s.manifest, 30_000);
      await sleep(2000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const answered = await stale;
    const answer = answered === undefined ? 'none yet' : answered instanceof Error ? answered.message : JSON.stringify(answered).slice(0, 300);
    const mark = s.agent.logs.length;
    // The queued write lands (its answer comes back) and the watches catch up.
    await waitFor(
      async () => {
        const l = await leases.readNamespacedLease({ name, namespace: s.ns });
        return String(l.spec?.renewTime) !== renewBefore || undefined;
      },
      { timeoutMs: 30_000, what: `the queued Lease write applied (its answer: ${answer})` },
    );
    await waitFor(() => s.agent.logs.slice(mark).some((l) => l.msg === 'api-server reachability changed' && l.reachable === true), {
      timeoutMs: 60_000,
      what: 'the agent to reach the api-server again',
    });
    await sleep(6000);
    expect(await exists(s.manifest)).toBe(true);
    const left = transitions(s.agent, mark).filter((t) => t.from === 'Active');
    expect(left, `left Active after the thaw: ${JSON.stringify(left)}`).toEqual([]);
    await s.agent.stop();
  });
});
