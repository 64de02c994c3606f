// The kubelet-Lease observer: its schedule and verdicts on fake time, what it refuses to read, and
// its GET against a local HTTP server standing in for the api-server.
import { mkdtemp, utimes, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeTime, memoryLogger } from '../../core/fake-time.test-helpers.js';
import {
  bootStartedAt,
  bootWallMs,
  getNodeLease,
  KUBELET_GIVE_UP_MS,
  KUBELET_LEASE_INTERVAL_MS,
  KUBELET_SETTLE_MS,
  type NodeLeaseRead,
  parseNodeLease,
  watchKubeletLease,
} from './kubelet-lease.js';

const SETTLE = KUBELET_SETTLE_MS;
const EVERY = KUBELET_LEASE_INTERVAL_MS;

const BOOT = Date.UTC(2026, 11, 6, 8, 0, 0);

async function setup(answers: Array<NodeLeaseRead | Error>) {
  const time = new FakeTime();
  const { log, records } = await memoryLogger();
  const verdicts: Array<[number, boolean]> = [];
  const reads: number[] = [];
  const w = watchKubeletLease({
    node: 'm1',
    log,
    timers: time,
    bootWallMs: BOOT,
    read: async () => {
      reads.push(time.now());
      const a = answers.length > 1 ? answers.shift()! : answers[0]!;
      if (a instanceof Error) throw a;
      return a;
    },
    onVerdict: (r) => verdicts.push([time.now(), r]),
  });
  return { time, w, verdicts, reads, records };
}

describe('kubelet Lease observer', () => {
  it('reads first after the settle time, then every interval; a renewal since the boot ends it', async () => {
    const { time, w, verdicts, reads } = await setup([
      { holder: 'm1', renewedAtMs: BOOT - 60_000 },
      { holder: 'm1', renewedAtMs: BOOT - 60_000 },
      { holder: 'm1', renewedAtMs: BOOT + 12_000 },
    ]);
    w.start();
    await time.advance(SETTLE - 1);
    expect(reads).toEqual([]);
    await time.advance(60_000);
    expect(reads).toEqual([SETTLE, SETTLE + EVERY, SETTLE + 2 * EVERY]);
    expect(verdicts).toEqual([
      [SETTLE, false],
      [SETTLE + EVERY, false],
      [SETTLE + 2 * EVERY, true],
    ]);
    expect(time.pending()).toBe(0);
  });

  it('gives no verdict on a failed read, a Lease of another holder, or an unusable one; each logged once', async () => {
    const { time, w, verdicts, records } = await setup([
      new Error('connect ECONNREFUSED'),
      { holder: 'm2', renewedAtMs: BOOT - 1 },
      { holder: 'm2', renewedAtMs: BOOT - 1 },
      { unusable: 'not a Lease: spec: expected object' },
      { holder: 'm1', renewedAtMs: Number.NaN },
      { holder: 'm1', renewedAtMs: BOOT - 1 },
    ]);
    w.start();
    await time.advance(SETTLE + 5 * EVERY);
    expect(verdicts).toEqual([[SETTLE + 5 * EVERY, false]]);
    const warned = records.filter((r) => r.level === 40).map((r) => r.msg);
    expect(warned).toEqual([
      "the node's Lease is held by another name than the node's",
      "the node's Lease says nothing of the kubelet: not a Lease: spec: expected object",
      "the node's Lease has a renewTime that is not a time",
    ]);
    w.stop();
  });

  it('gives up after giveUpMs, and stop() ends it at once', async () => {
    const { time, w, reads } = await setup([{ holder: 'm1', renewedAtMs: BOOT - 1 }]);
    w.start();
    await time.advance(600_000);
    // The settle, then every interval up to giveUpMs after start.
    expect(reads.length).toBe(Math.floor((KUBELET_GIVE_UP_MS - SETTLE) / EVERY) + 1);
    expect(reads.at(-1)).toBeLessThanOrEqual(KUBELET_GIVE_UP_MS);
    expect(time.pending()).toBe(0);
    const second = await setup([{ holder: 'm1', renewedAtMs: BOOT - 1 }]);
    second.w.start();
    await second.time.advance(SETTLE + EVERY / 2);
    second.w.stop();
    await second.time.advance(60_000);
    expect(second.reads).toEqual([SETTLE]);
  });

  it('parses a real Lease (microsecond renewTime) and names what is wrong with a bad one', () => {
    const ok = parseNodeLease(
      JSON.stringify({
        kind: 'Lease',
        apiVersion: 'coordination.k8s.io/v1',
        spec: { holderIdentity: 'm1', leaseDurationSeconds: 40, renewTime: '2026-12-06T08:00:12.345678Z' },
      }),
    );
    expect(ok).toEqual({ holder: 'm1', renewedAtMs: BOOT + 12_345 });
    expect(parseNodeLease('<html>')).toEqual({ unusable: 'the answer is not JSON' });
    expect(parseNodeLease(JSON.stringify({ kind: 'Lease', spec: { holderIdentity: 'm1' } }))).toEqual({ unusable: 'the Lease has no spec.renewTime' });
    const bad = parseNodeLease(JSON.stringify({ kind: 'Lease', spec: { holderIdentity: 'm1', renewTime: 'yesterday' } }));
    expect('unusable' in bad && bad.unusable).toMatch(/^not a Lease: spec\.renewTime: /);
    const other = parseNodeLease(JSON.stringify({ kind: 'ConfigMap', data: {} }));
    expect('unusable' in other && other.unusable).toMatch(/^not a Lease: kind: /);
  });

  it("the boot began at the kernel's uptime, or when a given boot id file was written", async () => {
    const kernel = bootWallMs();
    expect(Math.abs(kernel - (await bootStartedAt()))).toBeLessThan(1_000);
    expect(kernel).toBeLessThan(Date.now());
    const dir = await mkdtemp(join(tmpdir(), 'boot-'));
    const file = join(dir, 'boot_id');
    await writeFile(file, 'c0ffee00-0000-4000-8000-000000000000\n');
    await utimes(file, BOOT / 1000, BOOT / 1000);
    expect(await bootStartedAt(file)).toBe(BOOT);
    // A file that cannot be read falls back to the kernel's figure.
    expect(Math.abs((await bootStartedAt(join(dir, 'missing'))) - kernel)).toBeLessThan(1_000);
  });

  describe('GET against a stand-in api-server', () => {
    let server: Server | null = null;
    afterEach(async () => {
      server?.closeAllConnections();
      await new Promise((r) => server?.close(r));
      server = null;
    });

    async function serve(status: number, body: string): Promise<{ kc: KubeConfig; paths: string[] }> {
      const paths: string[] = [];
      server = createServer((req, res) => {
        paths.push(req.url ?? '');
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(body);
      });
      await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
        users: [{ name: 'u', token: 't' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      return { kc, paths };
    }

    it('reads kube-node-lease/<node> and says what a 404 or a 403 means', async () => {
      const lease = { kind: 'Lease', spec: { holderIdentity: 'm1', renewTime: '2026-12-06T07:59:00.000000Z' } };
      const a = await serve(200, JSON.stringify(lease));
      expect(await getNodeLease(a.kc, 'm1', new AbortController().signal)).toEqual({ holder: 'm1', renewedAtMs: BOOT - 60_000 });
      expect(a.paths).toEqual(['/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/m1']);
      server!.close();
      const b = await serve(404, '{"kind":"Status"}');
      expect(await getNodeLease(b.kc, 'm1', new AbortController().signal)).toEqual({ unusable: 'no Lease kube-node-lease/m1' });
      server!.close();
      const c = await serve(403, '{"kind":"Status"}');
      expect(await getNodeLease(c.kc, 'm1', new AbortController().signal)).toEqual({ unusable: 'HTTP 403 for kube-node-lease/m1' });
    });
  });
});
