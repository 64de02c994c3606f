// The api-server probe against a local HTTP server standing in for /readyz: the threshold before
// "unreachable", one success for "reachable", report-on-change only, the timeout, refused
// connections, and the schedule (fake timers; the probes themselves are real requests).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeTime, memoryLogger } from '../../core/fake-time.test-helpers.js';
import { probeApiServer } from './api-probe.js';

type Mode = 'ok' | 'fail' | 'hang';
let server: Server;
let mode: Mode;
let hits: string[];
let auth: Array<string | undefined>;
let port: number;

beforeEach(async () => {
  mode = 'ok';
  hits = [];
  auth = [];
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    auth.push(req.headers.authorization);
    if (mode === 'hang') return; // never answers; the probe's timeout must end it
    res.writeHead(mode === 'ok' ? 200 : 500, { 'content-type': 'text/plain' });
    res.end(mode === 'ok' ? 'ok' : '[-]poststarthook/x failed\nreadyz check failed');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterEach(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function kubeConfig(p = port): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${p}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

async function setup(kc = kubeConfig()) {
  const time = new FakeTime();
  const { log, records } = await memoryLogger();
  const verdicts: boolean[] = [];
  const probe = probeApiServer({
    kubeConfig: kc,
    log,
    timers: time,
    intervalMs: 5_000,
    timeoutMs: 2_000,
    failureThreshold: 3,
    onReachable: (r) => verdicts.push(r),
  });
  return { time, probe, verdicts, records };
}

describe('api-server probe', () => {
  it('refuses a timeout not shorter than the interval', async () => {
    const { log } = await memoryLogger();
    const time = new FakeTime();
    expect(() => probeApiServer({ kubeConfig: kubeConfig(), log, timers: time, intervalMs: 1_000, timeoutMs: 1_000, onReachable: () => undefined })).toThrow(
      /timeoutMs/,
    );
  });

  it('GETs /readyz; one success is reachable; unreachable only after 3 consecutive failures; reports changes only', async () => {
    const { probe, verdicts } = await setup();
    expect(probe.isReachable()).toBeNull();
    expect(await probe.probeNow()).toBe(true);
    expect(hits).toEqual(['/readyz']);
    expect(auth).toEqual(['Bearer secret-token']);
    expect(verdicts).toEqual([true]);
    await probe.probeNow();
    expect(verdicts).toEqual([true]);
    mode = 'fail';
    expect(await probe.probeNow()).toBe(false);
    expect(await probe.probeNow()).toBe(false);
    expect(verdicts).toEqual([true]);
    // A success in between resets the count.
    mode = 'ok';
    await probe.probeNow();
    mode = 'fail';
    await probe.probeNow();
    await probe.probeNow();
    expect(verdicts).toEqual([true]);
    await probe.probeNow();
    expect(verdicts).toEqual([true, false]);
    expect(probe.isReachable()).toBe(false);
    await probe.probeNow();
    expect(verdicts).toEqual([true, false]);
    mode = 'ok';
    await probe.probeNow();
    expect(verdicts).toEqual([true, false, true]);
    await probe.stop();
  });

  it('a refused connection counts as a failure, and the first probe gives the first verdict', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const { probe, verdicts, records } = await setup(kubeConfig(deadPort));
    await probe.probeNow();
    expect(verdicts).toEqual([false]);
    await probe.probeNow();
    await probe.probeNow();
    expect(verdicts).toEqual([false]);
    expect(records.find((r) => r.msg === 'api-server probe verdict')).toMatchObject({ reachable: false, why: expect.stringContaining('ECONNREFUSED') });
    await probe.stop();
  });

  it('a probe that gets no answer is aborted at timeoutMs and counts as a failure', async () => {
    const { time, probe, records } = await setup();
    mode = 'hang';
    const p = probe.probeNow();
    await waitUntil(() => hits.length === 1);
    await time.advance(1_999);
    let settled = false;
    void p.then(() => {
      settled = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    await time.advance(1);
    expect(await p).toBe(false);
    expect(records.find((r) => r.msg === 'api-server probe failed')).toMatchObject({ failures: 1, why: 'no answer within 2000 ms' });
    await probe.stop();
  });

  it('start() probes at once and every intervalMs; stop() ends it', async () => {
    const { time, probe, verdicts } = await setup();
    probe.start();
    await waitUntil(() => verdicts.length === 1);
    expect(hits).toHaveLength(1);
    mode = 'fail';
    for (let i = 2; i <= 4; i++) {
      await time.advance(5_000);
      await waitUntil(() => hits.length === i);
      await probe.probeNow(); // joins the scheduled probe in flight
    }
    expect(hits).toHaveLength(4);
    expect(verdicts).toEqual([true, false]);
    await probe.stop();
    expect(time.pending()).toBe(0);
    await time.advance(20_000);
    expect(hits).toHaveLength(4);
  });

  describe('calm periods', () => {
    /** `counted`: the probe is counted as it starts (no request); else real requests to the test server. */
    async function calmSetup(counted = true) {
      const time = new FakeTime();
      const { log } = await memoryLogger();
      const verdicts: boolean[] = [];
      const w = { calm: true };
      // The schedule is the subject here, not the request: the probe is counted as it starts, so
      // a loaded machine's slow request cannot shift a count into the next step.
      const probe = probeApiServer({
        kubeConfig: kubeConfig(),
        log,
        timers: time,
        intervalMs: 5_000,
        timeoutMs: 2_000,
        failureThreshold: 3,
        calmIntervalMs: 30_000,
        calm: () => w.calm,
        ...(counted
          ? {
              probe: async () => {
                probes.count++;
                return true;
              },
            }
          : {}),
        onReachable: (r) => verdicts.push(r),
      });
      return { time, probe, verdicts, w };
    }
    const probes = { count: 0 };
    /** Advances in 1 s steps (letting each probe finish) until a probe starts; returns the ms it took. */
    async function untilNextProbe(time: FakeTime, limitMs: number, count = () => probes.count, settleMs = 1): Promise<number> {
      const before = count();
      for (let ms = 1_000; ms <= limitMs; ms += 1_000) {
        await time.advance(1_000);
        await new Promise((r) => setTimeout(r, settleMs));
        if (count() > before) return ms;
      }
      return Number.POSITIVE_INFINITY;
    }
    /** Real requests: give each a moment (real time) to reach the server. */
    const untilNextHit = (time: FakeTime, limitMs: number) => untilNextProbe(time, limitMs, () => hits.length, 25);

    it('refuses a calm period shorter than the interval', async () => {
      const { log } = await memoryLogger();
      expect(() =>
        probeApiServer({
          kubeConfig: kubeConfig(),
          log,
          timers: new FakeTime(),
          intervalMs: 5_000,
          timeoutMs: 2_000,
          calmIntervalMs: 4_000,
          calm: () => true,
          onReachable: () => undefined,
        }),
      ).toThrow(/calmIntervalMs/);
    });

    it('probes every calmIntervalMs while reachable and calm, every intervalMs while not calm', async () => {
      const { time, probe, verdicts, w } = await calmSetup();
      probe.start();
      await waitUntil(() => verdicts.length === 1);
      // The first verdict came from a probe scheduled before it: that wait was the short one.
      expect(await untilNextProbe(time, 40_000)).toBe(5_000);
      await probe.probeNow();
      expect(await untilNextProbe(time, 40_000)).toBe(30_000);
      await probe.probeNow();
      w.calm = false;
      expect(await untilNextProbe(time, 40_000)).toBe(30_000); // the calm wait already armed runs out
      await probe.probeNow();
      expect(await untilNextProbe(time, 40_000)).toBe(5_000);
      await probe.stop();
    });

    it('nudge() probes at once and returns to intervalMs; a hung api-server behind open watches is unreachable within calm + timeout + 2 intervals + timeout', async () => {
      const { time, probe, verdicts, w } = await calmSetup(false);
      probe.start();
      await waitUntil(() => verdicts.length === 1);
      await untilNextHit(time, 40_000);
      await probe.probeNow();
      // A watch broke: probe now, not in up to 30 s.
      w.calm = false;
      const n = hits.length;
      probe.nudge();
      await waitUntil(() => hits.length === n + 1);
      await probe.probeNow();
      expect(await untilNextHit(time, 40_000)).toBe(5_000);
      await probe.probeNow();
      // Watches open again; then the api-server hangs without closing them.
      w.calm = true;
      expect(await untilNextHit(time, 40_000)).toBe(5_000);
      await probe.probeNow();
      mode = 'hang';
      const hungAt = time.now();
      // Calm wait, then the first failure (timeout) ends calm: two more probes at intervalMs.
      for (let i = 0; i < 120 && verdicts.length < 2; i++) {
        await time.advance(1_000);
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(verdicts).toEqual([true, false]);
      expect(time.now() - hungAt).toBeLessThanOrEqual(30_000 + 2_000 + 2 * 5_000 + 2_000);
      expect(time.now() - hungAt).toBeGreaterThan(3 * 5_000 + 2_000); // slower than without calm: the price
      await probe.stop();
    });
  });
});

async function waitUntil(cond: () => boolean) {
  const giveUpAt = Date.now() + 5_000;
  while (!cond() && Date.now() < giveUpAt) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}
