/**
 * The heartbeat writer against a real kube-apiserver: the Lease as kubectl shows it (six-digit
 * renew times), requests per beat at steady state, a second writer forcing 409s, the annotation
 * channel on a bare pod, an api-server restart, and `lastseen heartbeat` as a child process with
 * SIGTERM.
 */
import { execFileSync, spawn } from 'node:child_process';
import diagnosticsChannel from 'node:diagnostics_channel';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoordinationV1Api, CoreV1Api, type V1Lease } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { beatFromPod } from '../../src/channels/annotation.js';
import { beatFromLease } from '../../src/channels/lease.js';
import { beatFromFile } from '../../src/channels/local.js';
import type { Role } from '../../src/core/types.js';
import { startHeartbeat } from '../../src/index.js';
import { apiserverPid, controlPlane, kubeConfigFor, kubectl, restartApiserver, useNamespace, waitFor } from './harness.js';

const SIX_DIGITS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const NODE = 'node-a';
const REPO = fileURLToPath(new URL('../../', import.meta.url));

let ns: string;
let leases: CoordinationV1Api;
let core: CoreV1Api;
let dir: string;

beforeAll(async () => {
  ns = await useNamespace('heartbeat');
  leases = kubeConfigFor('admin').makeApiClient(CoordinationV1Api);
  core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  dir = await mkdtemp(join(tmpdir(), 'lastseen-hb-it-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function memoryLogger() {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) }) };
}

function identity(key: string, role: Role = 'parent', podName = `${key}-pod`, podUid = '') {
  return { namespace: ns, podName, podUid, key, node: NODE, role };
}

async function readBeat(name: string) {
  const lease = await leases.readNamespacedLease({ name, namespace: ns });
  const r = beatFromLease(lease, NODE);
  if (!r.ok) throw new Error(r.reason);
  return r.beat;
}

describe('lease channel', () => {
  it('shows up in kubectl with six-digit renew times, and costs one request per beat', async () => {
    // Each request with the count of beats written when it was sent: a PUT sent while k beats
    // are written is beat k+1's, so the count is exact even while a write is in flight.
    const requests: Array<{ method: string; written: number }> = [];
    // A retried attempt must start as the first did: with no Lease.
    await leases.deleteNamespacedLease({ name: 'kube-apiserver.node-a', namespace: ns }).catch(() => undefined);
    const { logger } = memoryLogger();
    let hb: ReturnType<typeof startHeartbeat> | undefined;
    hb = startHeartbeat({
      identity: identity('kube-apiserver'),
      intervalMs: 250,
      channels: ['lease'],
      kubeConfig: kubeConfigFor('admin'),
      logger,
      onRequest: (method) => requests.push({ method, written: hb?.stats().lease?.written ?? 0 }),
    });
    try {
      await waitFor(() => hb.beats() >= 3 && hb.stats().lease!.written >= 3, { what: 'three beats', timeoutMs: 20_000 });
      const got = await kubectl(['get', 'leases', '-n', ns, '-l', 'app.kubernetes.io/managed-by=lastseen', '-o', 'json']);
      expect(got.code).toBe(0);
      const items = (JSON.parse(got.stdout) as { items: V1Lease[] }).items;
      expect(items.map((l) => l.metadata?.name)).toEqual(['kube-apiserver.node-a']);
      const lease = items[0]!;
      expect(lease.metadata?.labels).toMatchObject({
        'lastseen.dev/node': NODE,
        'lastseen.dev/parent': 'kube-apiserver',
        'app.kubernetes.io/managed-by': 'lastseen',
        'app.kubernetes.io/name': 'lastseen',
      });
      expect(lease.spec?.holderIdentity).toBe('kube-apiserver-pod');
      expect(lease.spec?.leaseDurationSeconds).toBe(20); // the built-in window
      expect(String(lease.spec?.renewTime)).toMatch(SIX_DIGITS);
      // kubectl's own view, column by column.
      const cols = await kubectl(['get', 'leases', '-n', ns, '-l', 'app.kubernetes.io/managed-by=lastseen', '-o', 'jsonpath={.items[*].spec.renewTime}']);
      expect(cols.stdout).toMatch(SIX_DIGITS);
      expect(beatFromLease(lease, NODE)).toMatchObject({ ok: true, beat: { phase: 'Ready', role: 'parent' } });

      // Steady state: one PUT per beat, no GETs, over kept-alive connections (no new sockets).
      // client-node 2.x sends through undici, which reports every connection it opens here.
      let sockets = 0;
      let steady: string[] = [];
      let beatsWritten = 0;
      const onConnected = () => void sockets++;
      diagnosticsChannel.subscribe('undici:client:connected', onConnected);
      try {
        // Control: stock client-node opens a new connection per request, and the counter sees it.
        await leases.readNamespacedLease({ name: 'kube-apiserver.node-a', namespace: ns });
        expect(sockets).toBe(1);
        sockets = 0;
        const from = hb.stats().lease!.written;
        await waitFor(() => hb!.stats().lease!.written >= from + 8, { what: 'eight more beats', timeoutMs: 20_000 });
        beatsWritten = 8;
        steady = requests.filter((r) => r.written >= from && r.written < from + beatsWritten).map((r) => r.method);
        console.log(`steady state: ${steady.length} requests and ${sockets} new sockets for ${beatsWritten} beats`);
        expect(sockets).toBe(0);
      } finally {
        diagnosticsChannel.unsubscribe('undici:client:connected', onConnected);
      }
      expect(steady.filter((m) => m !== 'PUT')).toEqual([]);
      expect(steady.length).toBe(beatsWritten);
      expect(requests.slice(0, 2).map((r) => r.method)).toEqual(['GET', 'POST']);
    } finally {
      await hb.stop();
    }
    const last = await readBeat('kube-apiserver.node-a');
    expect(last.phase).toBe('Stopping');
    expect(last.sequence).toBe(hb.beats());
  });

  it('a second writer forcing 409s does not make it miss its interval', async () => {
    const intervalMs = 300;
    const requests: string[] = [];
    const { logger, lines } = memoryLogger();
    const hb = startHeartbeat({
      identity: identity('contended'),
      intervalMs,
      channels: ['lease'],
      kubeConfig: kubeConfigFor('admin'),
      logger,
      onRequest: (m) => requests.push(m),
    });
    const name = 'contended.node-a';
    let rival = true;
    let rivalWrites = 0;
    try {
      await waitFor(() => hb.stats().lease!.written >= 2, { what: 'the Lease', timeoutMs: 20_000 });
      // The rival: read-modify-write of the same Lease as fast as it can.
      const rivalApi = kubeConfigFor('admin').makeApiClient(CoordinationV1Api);
      const rivalLoop = (async () => {
        while (rival) {
          try {
            const l = await rivalApi.readNamespacedLease({ name, namespace: ns });
            l.metadata!.annotations = { ...l.metadata!.annotations, 'rival/count': String(rivalWrites) };
            await rivalApi.replaceNamespacedLease({ name, namespace: ns, body: l });
            rivalWrites++;
          } catch {
            // its own conflicts: keep going
          }
        }
      })();
      const start = { seq: (await readBeat(name)).sequence, written: hb.stats().lease!.written, t: performance.now() };
      const intervals = 12;
      await new Promise((r) => setTimeout(r, intervals * intervalMs));
      rival = false;
      await rivalLoop;
      const end = { seq: (await readBeat(name)).sequence, written: hb.stats().lease!.written, t: performance.now() };
      const elapsedIntervals = Math.floor((end.t - start.t) / intervalMs);
      expect(rivalWrites).toBeGreaterThan(intervals); // the rival really was writing
      const failures = lines.filter((l) => l.msg === 'heartbeat channel write failed' || l.msg === 'heartbeat request failed');
      expect(hb.stats().lease!.failed, JSON.stringify(failures)).toBe(0);
      // Every interval got its beat (one beat of slack for the edges of the measurement).
      expect(end.written - start.written).toBeGreaterThanOrEqual(elapsedIntervals - 1);
      expect(end.seq - start.seq).toBeGreaterThanOrEqual(elapsedIntervals - 1);
      expect(lines.filter((l) => l.msg === 'heartbeat round overran its interval')).toEqual([]);
      const byMethod: Record<string, number> = {};
      for (const m of requests) byMethod[m] = (byMethod[m] ?? 0) + 1;
      console.log(
        `under a rival (${rivalWrites} rival writes): ${end.written - start.written} beats in ${elapsedIntervals} intervals, requests ${JSON.stringify(byMethod)} in total`,
      );
      // The rival did cost us conflicts: re-reads (GET) and merge patches, not just PUTs.
      expect(requests.filter((m) => m === 'GET').length).toBeGreaterThan(1);
    } finally {
      rival = false;
      await hb.stop();
    }
  });

  it('keeps beating locally while the api-server restarts, and the Lease resumes', async () => {
    const { logger, lines } = memoryLogger();
    const heartbeatDir = join(dir, 'restart');
    const hb = startHeartbeat({
      identity: identity('survivor'),
      intervalMs: 300,
      channels: ['lease', 'local'],
      heartbeatDir,
      kubeConfig: kubeConfigFor('admin'),
      logger,
    });
    try {
      await waitFor(() => hb.stats().lease!.written >= 2, { what: 'the Lease', timeoutMs: 20_000 });
      await restartApiserver({ signal: 'KILL', downMs: 2_000 });
      const afterRestart = hb.beats();
      await waitFor(async () => (await readBeat('survivor.node-a')).sequence > afterRestart, { what: 'a Lease beat after the restart', timeoutMs: 60_000 });
    } finally {
      await hb.stop();
    }
    // Compared once stopped: a round still in flight (counted, its local write not yet done) made a
    // live comparison race (CI once saw 14 written of 15 rounds).
    const s = hb.stats();
    expect(s.local!.failed).toBe(0);
    // Every round reached the file, or was skipped while the previous local write still ran (a
    // loaded machine's fsync): no round waits for another channel's write.
    expect(s.local!.written + s.local!.skipped).toBe(hb.beats());
    expect(s.lease!.failed).toBeGreaterThan(0);
    expect(lines.some((l) => l.msg === 'heartbeat channel write failed' && l.channel === 'lease')).toBe(true);
    expect(lines.some((l) => l.msg === 'heartbeat channel recovered' && l.channel === 'lease')).toBe(true);
    const text = await readFile(join(heartbeatDir, `${ns}_survivor.json`), 'utf8');
    expect(beatFromFile(text, { node: NODE, namespace: ns, key: 'survivor' })).toMatchObject({ ok: true, beat: { phase: 'Stopping', sequence: hb.beats() } });
  });

  it('with the api-server frozen (SIGSTOP), the local file keeps its interval within 10%', async () => {
    const intervalMs = 500;
    const { logger } = memoryLogger();
    const heartbeatDir = join(dir, 'frozen');
    const file = join(heartbeatDir, `${ns}_frozen.json`);
    const hb = startHeartbeat({
      identity: identity('frozen'),
      intervalMs,
      channels: ['lease', 'local'],
      heartbeatDir,
      kubeConfig: kubeConfigFor('admin'),
      logger,
    });
    const pid = await apiserverPid();
    /** When each new local sequence was first seen (polled every 10 ms). */
    const seen: Array<{ seq: number; at: number }> = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const text = await readFile(file, 'utf8').catch(() => '');
        const r = text ? beatFromFile(text, { node: NODE, namespace: ns, key: 'frozen' }) : null;
        if (r?.ok && r.beat.sequence !== seen.at(-1)?.seq) seen.push({ seq: r.beat.sequence, at: performance.now() });
        await new Promise((res) => setTimeout(res, 10));
      }
    })();
    try {
      await waitFor(() => hb.stats().lease!.written >= 2, { what: 'the Lease', timeoutMs: 20_000 });
      process.kill(pid, 'SIGSTOP');
      const from = seen.length;
      try {
        await new Promise((res) => setTimeout(res, 8_000));
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      const during = seen.slice(from);
      const gaps = during.slice(1).map((x, i) => Math.round(x.at - during[i]!.at));
      process.stdout.write(`[measured] local beat gaps with the api-server frozen (interval ${intervalMs} ms): ${gaps.join(', ')} ms\n`);
      // Every round reached the file, one sequence apart, each within 10% of the interval.
      expect(during.length).toBeGreaterThanOrEqual(14);
      expect(during.slice(1).every((x, i) => x.seq === during[i]!.seq + 1)).toBe(true);
      for (const g of gaps) expect(Math.abs(g - intervalMs)).toBeLessThanOrEqual(intervalMs * 0.1);
      expect(hb.stats().lease!.skipped).toBeGreaterThan(0);
    } finally {
      polling = false;
      await poll;
      await hb.stop();
    }
  });
});

describe('annotation channel', () => {
  it('patches the parent pod itself', async () => {
    const pod = await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'cni-x', labels: { 'lastseen.dev/parent': 'cni' } },
        spec: { nodeName: NODE, containers: [{ name: 'main', image: 'registry.invalid/none' }] },
      },
    });
    const uid = pod.metadata!.uid!;
    const { logger } = memoryLogger();
    const hb = startHeartbeat({
      identity: identity('cni', 'parent', 'cni-x', uid),
      intervalMs: 250,
      channels: ['annotation'],
      kubeConfig: kubeConfigFor('admin'),
      logger,
    });
    try {
      const beat = await waitFor(
        async () => {
          const r = beatFromPod(await core.readNamespacedPod({ name: 'cni-x', namespace: ns }), NODE);
          return r.ok && r.beat.sequence >= 3 ? r.beat : undefined;
        },
        { what: 'three annotation beats', timeoutMs: 20_000 },
      );
      expect(beat).toMatchObject({ channel: 'annotation', holder: 'cni-x', holderUid: uid, phase: 'Ready', role: 'parent' });
      expect(beat.renewTime).toMatch(SIX_DIGITS);
      expect(hb.stats().annotation!.failed).toBe(0);
    } finally {
      await hb.stop();
    }
    const r = beatFromPod(await core.readNamespacedPod({ name: 'cni-x', namespace: ns }), NODE);
    expect(r).toMatchObject({ ok: true, beat: { phase: 'Stopping' } });
    // Another node's agent refuses it.
    expect(beatFromPod(await core.readNamespacedPod({ name: 'cni-x', namespace: ns }), 'node-b').ok).toBe(false);
  });
});

describe('lastseen heartbeat (CLI)', () => {
  it('writes beats, and on SIGTERM a Stopping beat, then exits 0', async () => {
    const heartbeatDir = join(dir, 'cli');
    // `node --import tsx` rather than `npx tsx`: one process, so SIGTERM reaches the heartbeat itself
    // and the exit code is its own (npx does not wait for its child on a signal).
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/main.ts',
        'heartbeat',
        '--kubeconfig',
        controlPlane().adminKubeconfig,
        '--channels',
        'lease,local',
        '--heartbeat-dir',
        heartbeatDir,
        '--interval',
        '300ms',
        '--probe',
        'none',
      ],
      {
        cwd: REPO,
        env: { ...process.env, NODE_NAME: NODE, POD_NAME: 'etcd-node-a', POD_NAMESPACE: ns, POD_UID: 'abc-123', LASTSEEN_PARENT_KEY: 'etcd' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      await waitFor(async () => (await readBeat('etcd.node-a')).sequence >= 3, { what: 'three Lease beats from the CLI', timeoutMs: 60_000 });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } catch (e) {
      child.kill('SIGKILL');
      throw new Error(`${(e as Error).message}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
    }
    const last = await readBeat('etcd.node-a');
    expect(last).toMatchObject({ phase: 'Stopping', holder: 'etcd-node-a', holderUid: 'abc-123' });
    const file = beatFromFile(await readFile(join(heartbeatDir, `${ns}_etcd.json`), 'utf8'), { node: NODE, namespace: ns, key: 'etcd' });
    expect(file).toMatchObject({ ok: true, beat: { phase: 'Stopping', sequence: last.sequence } });
    // JSON logs on stdout, with structured fields.
    const logs = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logs.find((l) => l.msg === 'heartbeat starting')).toMatchObject({ intervalMs: 300, channels: ['lease', 'local'], key: 'etcd', node: NODE });
    expect(logs.at(-1)).toMatchObject({ msg: 'heartbeat stopped' });
  });
});

describe('dist/lastseen-heartbeat.mjs (the sidecar bundle, light api client)', () => {
  it("reads its own pod and writes its Lease with the kubeconfig's client certificate, without client-node; SIGTERM: Stopping, exit 0", async () => {
    // Bundled into a folder of its own and run from there: nothing can come from node_modules.
    const away = await mkdtemp(join(tmpdir(), 'lastseen-hb-bundle-'));
    try {
      execFileSync(process.execPath, ['scripts/bundle.mjs', '--outfile', join(away, 'built', 'lastseen.mjs')], { cwd: REPO });
      const bundle = join(away, 'lastseen-heartbeat.mjs');
      await copyFile(join(away, 'built', 'lastseen-heartbeat.mjs'), bundle);
      const text = await readFile(bundle, 'utf8');
      for (const name of ['CoordinationV1Api', 'ObjectSerializer', 'undici']) expect(text.includes(name), name).toBe(false);
      // No parent key and no uid given: the sidecar reads them from its pod (GET over the light client).
      const pod = await core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name: 'kcm-node-a', labels: { 'lastseen.dev/parent': 'kcm' } },
          spec: { nodeName: NODE, containers: [{ name: 'main', image: 'registry.invalid/none' }] },
        },
      });
      const child = spawn(
        process.execPath,
        [bundle, 'heartbeat', '--kubeconfig', controlPlane().adminKubeconfig, '--channels', 'lease', '--interval', '300ms', '--probe', 'none'],
        { cwd: away, env: { ...process.env, NODE_NAME: NODE, POD_NAME: 'kcm-node-a', POD_NAMESPACE: ns }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
      child.stderr.setEncoding('utf8').on('data', (s: string) => (out += s));
      const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
      try {
        await waitFor(async () => (await readBeat('kcm.node-a').catch(() => ({ sequence: 0 }))).sequence >= 3, {
          what: 'three Lease beats from the sidecar bundle',
          timeoutMs: 60_000,
        });
        child.kill('SIGTERM');
        expect(await exited).toBe(0);
      } catch (e) {
        child.kill('SIGKILL');
        throw new Error(`${(e as Error).message}\noutput:\n${out}`);
      }
      expect(await readBeat('kcm.node-a')).toMatchObject({ phase: 'Stopping', holder: 'kcm-node-a', holderUid: pod.metadata!.uid });
      expect(out).not.toContain('cannot read this pod');
    } finally {
      await rm(away, { recursive: true, force: true });
    }
  });
});
