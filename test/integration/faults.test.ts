/**
 * The fault suite: the real agent and heartbeat processes (processes.ts) against the real
 * kube-apiserver + etcd while the control plane, or the path to it, fails under them.
 *
 * 1. kube-apiserver SIGKILLed and restarted, then etcd SIGKILLed and restarted, while a parent
 *    beats on `lease,local` (policy `whenApiUnreachable: hold`): no activation during the outages;
 *    afterwards the agent's Lease watch delivers changes again (a lease-only writer keeps the parent
 *    Healthy with no Silent spell, and its SIGKILL is covered at the window); the stored checkpoint
 *    still loads. The agent's /metrics, scraped healthy, during the kube-apiserver outage and with
 *    the checkpoint active, drive deploy/monitoring/rules.yaml in promtool (alert-check.ts): each
 *    phase fires exactly the alerts it should.
 * 2. A TCP proxy between the agent and the api-server that stalls established connections (the
 *    watch, kept-alive sockets) while new ones pass: the window passes with the watch silent, the
 *    agent's live read sees the Lease still changing, so no activation; the watchdog (3s) re-opens
 *    the watch and a later change (the parent's death) is covered at the window.
 * 3. The same proxy stalling everything (new connections hang too): with `hold`, no activation.
 * 4. Garbage files in the local heartbeat folder of a running agent: counted as bad inputs, the
 *    parent (beating on the local channel only) stays Healthy.
 *
 * LASTSEEN_LONG=1 repeats the outage cycle of (1) five times and holds each outage longer.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localBeatText } from '../../src/channels/local.js';
import { alertRules } from '../monitoring/promtool.js';
import { dashboardQueries, evaluateAlerts, type Phase } from './alert-check.js';
import {
  apiserverPort,
  appears,
  captured,
  exists,
  faultSetup,
  healthy,
  KEY,
  kubeconfigVia,
  metric,
  metricsText,
  reachability,
  sleep,
  storedCheckpoints,
  transitions,
  watchFile,
} from './fault-helpers.js';
import { startApiserver, startEtcd, stopApiserver, stopEtcd, waitFor } from './harness.js';
import { healthPort, type Proc } from './processes.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const LONG = process.env.LASTSEEN_LONG === '1';
const CYCLES = LONG ? 5 : 1;
/** How long each outage lasts once the agent has noticed it: several windows (1 s) with only the local channel. */
const OUTAGE_MS = LONG ? 8_000 : 3_000;

const HOLD = (channels: string) => `{ interval: 250ms, window: 1s, startupGrace: 2s, handoverTimeout: 2s, channels: [${channels}], whenApiUnreachable: hold }`;

const proxies: TcpProxy[] = [];
afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()));
});

function activations(agent: Proc, since = 0): Array<Record<string, unknown>> {
  return agent.logs.slice(since).filter((l) => l.msg === 'activating checkpoint');
}

async function localSequence(path: string): Promise<number> {
  return (JSON.parse(await readFile(path, 'utf8')) as { sequence: number }).sequence;
}

describe('control-plane outages under a running agent', () => {
  it(
    `kube-apiserver SIGKILL and etcd SIGKILL (${CYCLES} cycle(s)) during beats and watches: hold keeps the parent, watches recover, the checkpoint survives`,
    async () => {
      const s = await faultSetup('outage', { policy: HOLD('lease, local') });
      let hb = s.heartbeat('lease,local');
      await captured(s);
      await healthy(s.agent);
      const port = await healthPort(s.agent);
      // A scrape of the agent's /metrics once `ready` holds for it: one phase of the alert check.
      const scrapeWhen = async (name: string, ready: (body: string) => boolean): Promise<Phase> => {
        const body = await waitFor(
          async () => {
            const b = await metricsText(port);
            return ready(b) ? b : undefined;
          },
          { timeoutMs: 30_000, what: `the agent's /metrics to show it ${name}` },
        );
        return { name, metrics: body };
      };
      const parentSeries = `{parent="${s.ns}/${KEY}"}`;
      const phases: Phase[] = [
        await scrapeWhen(
          'healthy',
          (b) =>
            metric(b, 'lastseen_api_reachable') === 1 &&
            metric(b, `lastseen_checkpoint_active${parentSeries}`) === 0 &&
            metric(b, `lastseen_parent_covered{namespace="${s.ns}",parent="${KEY}"}`) === 1,
        ),
      ];
      const localFile = join(s.dirs.heartbeats, `${s.ns}_${KEY}.json`);
      const manifestSeen = watchFile(s.manifest);
      const outages: string[] = [];

      for (let cycle = 1; cycle <= CYCLES; cycle++) {
        for (const what of ['kube-apiserver', 'etcd'] as const) {
          const mark = s.agent.logs.length;
          const t0 = Date.now();
          if (what === 'kube-apiserver') await stopApiserver('KILL');
          else await stopEtcd('KILL');
          try {
            await reachability(s.agent, false);
            const noticedMs = Date.now() - t0;
            if (cycle === 1 && what === 'kube-apiserver') {
              phases.push(
                await scrapeWhen(
                  'api-server down',
                  (b) => metric(b, 'lastseen_api_reachable') === 0 && metric(b, 'lastseen_watch_healthy{resource="leases"}') === 0,
                ),
              );
            }
            const seqBefore = await localSequence(localFile);
            await sleep(OUTAGE_MS);
            const seqAfter = await localSequence(localFile);
            // The parent really kept beating on the local channel through the outage.
            expect(seqAfter).toBeGreaterThan(seqBefore);
            outages.push(`cycle ${cycle} ${what}: noticed in ${noticedMs} ms, local beats ${seqBefore}->${seqAfter}`);
          } finally {
            if (what === 'kube-apiserver') await startApiserver();
            else await startEtcd();
          }
          await reachability(s.agent, true, 90_000);
          expect(activations(s.agent, mark)).toEqual([]);
        }
      }
      expect(await manifestSeen.stop()).toBeNull();
      expect(activations(s.agent)).toEqual([]);

      // The Lease watch works again: a surge's new pod of the key takes over with a lease-only writer
      // (started before the old pod's writer is killed, so the Lease never pauses). The local file
      // goes stale; only Lease changes seen through the watch can keep the parent Healthy. A dead
      // watch shows a Silent spell about every window (each ended by a live read: 3 or more in 4 s),
      // a live one none; one is forgiven to a loaded machine. The new writer is another pod, as in a
      // real rollout: two writers with one pod's identity at once (which no kubelet runs) interleave
      // two runs' sequence numbers, and the old run's last local round, read after the new run's
      // first, is rightly newer than every round the new run writes for a while.
      await waitFor(() => s.agent.logs.some((l) => l.msg === 'listed' && String(l.informer).startsWith('leases of')), { what: 'the lease informer listed' });
      const successor = await s.addParentPod(`demo-${s.node}-successor`);
      const hbLease = s.heartbeat('lease', successor);
      await waitFor(() => hbLease.logs.some((l) => l.msg === 'heartbeat phase'), { timeoutMs: 60_000, what: 'the lease-only heartbeat to beat' });
      await sleep(500);
      await hb.stop('SIGKILL');
      hb = hbLease;
      const mark = s.agent.logs.length;
      await sleep(4_000);
      const localStale = await localSequence(localFile);
      await sleep(500);
      expect(await localSequence(localFile)).toBe(localStale);
      expect(transitions(s.agent, mark).filter((t) => t.to === 'Silent').length).toBeLessThanOrEqual(1);

      // The parent dies after the restart: the change (no more Lease updates) is judged at the window.
      const activationMs = await (async () => {
        await hb.stop('SIGKILL');
        return appears(s.manifest);
      })();
      expect(activationMs).toBeGreaterThanOrEqual(1000 - 250);
      expect(activationMs).toBeLessThan(10_000);
      expect(activations(s.agent, mark)).toHaveLength(1);
      phases.push(await scrapeWhen('checkpoint active', (b) => metric(b, `lastseen_checkpoint_active${parentSeries}`) === 1));

      // The same scrapes through promtool's rule engine: healthy fires nothing; the api-server's
      // absence fires LastseenApiServerUnreachable after startTimeout (and not LastseenWatchUnhealthy,
      // whose watches are down for that reason); the checkpoint pages after handoverBackoff.max;
      // every query of the dashboard returns series.
      const quiet = (phase: string, minute: number, except: string[] = []) =>
        alertRules()
          .filter((r) => !except.includes(r.alert))
          .map((r) => ({ phase, minute, alertname: r.alert, alerts: [] }));
      const evaluated = await evaluateAlerts({
        node: s.node,
        instance: `127.0.0.1:${port}`,
        phases,
        expect: [
          ...quiet('healthy', 11),
          { phase: 'api-server down', minute: 4, alertname: 'LastseenApiServerUnreachable', alerts: [] },
          { phase: 'api-server down', minute: 5, alertname: 'LastseenApiServerUnreachable', alerts: [{}] },
          ...quiet('api-server down', 11, ['LastseenApiServerUnreachable']),
          { phase: 'checkpoint active', minute: 9, alertname: 'LastseenCheckpointActiveTooLong', alerts: [] },
          { phase: 'checkpoint active', minute: 10, alertname: 'LastseenCheckpointActiveTooLong', alerts: [{ parent: `${s.ns}/${KEY}` }] },
          ...quiet('checkpoint active', 11, ['LastseenCheckpointActiveTooLong']),
        ],
        // Every dashboard query parses and shows something once there has been an activation.
        nonEmpty: [{ phase: 'checkpoint active', minute: 11, exprs: dashboardQueries() }],
      });
      expect(evaluated.status, `promtool test rules ${evaluated.testFile}:\n${evaluated.output}`).toBe(0);

      // No checkpoint lost: the state folder loads as a restarted agent would load it.
      const stored = await storedCheckpoints(s.dirs.state);
      expect(stored.problems).toEqual([]);
      expect(stored.ids).toEqual([`${s.ns}/${KEY}`]);
      const manifest = JSON.parse(await readFile(s.manifest, 'utf8'));
      // Captured from the first pod, or again from its successor (the same spec).
      expect([s.pod.name, successor.name]).toContain(manifest.metadata.annotations['lastseen.dev/checkpoint-of']);

      const last = phases.at(-1)!.metrics;
      process.stdout.write(
        `[faults] outages: ${outages.join('; ')}; activation after the parent's SIGKILL ${activationMs} ms (window 1000 ms); alert rules on ${phases.length} scrapes: as expected in ${evaluated.ms} ms; at the end lastseen_activations_total{reason="SilenceConfirmed"} ${metric(last, 'lastseen_activations_total{reason="SilenceConfirmed"}')}, lastseen_retirements_total ${metric(last, 'lastseen_retirements_total')}\n`,
      );
      await s.agent.stop();
    },
    LONG ? 900_000 : 240_000,
  );
});

describe('a stalled path between the agent and the api-server', () => {
  // `activate` (the api-server parent's policy) with a watchdog longer than the agent's 5 s request
  // timeout: a live read that rode a stalled kept-alive socket would time out, read "unavailable"
  // and activate (it did, before live reads got their own connections: src/agent/actuators.ts).
  it.each([
    { when: 'hold', watchdog: '3s' },
    { when: 'activate', watchdog: '10s' },
  ] as const)(
    'established connections stall, new ones pass (whenApiUnreachable: $when, watchdog $watchdog): no false activation (the live read sees the Lease change), the watchdog restores the watch',
    async ({ when, watchdog }) => {
      const proxy = await startTcpProxy({ host: '127.0.0.1', port: apiserverPort() });
      proxies.push(proxy);
      // `activate` needs the local channel in the policy (the validator refuses it without); the
      // heartbeat below writes the Lease only, so the local channel stays silent and the Lease decides.
      const channels = when === 'activate' ? 'lease, local' : 'lease';
      const policy = `{ interval: 250ms, window: 1s, startupGrace: 2s, handoverTimeout: 2s, channels: [${channels}], whenApiUnreachable: ${when} }`;
      const s = await faultSetup(`stall-${when}`, { policy, agentKubeconfig: await kubeconfigVia(proxy.port), watchdog });
      let hb: Proc | null = s.heartbeat('lease');
      await captured(s);
      await healthy(s.agent);
      await sleep(1_000);

      const mark = s.agent.logs.length;
      const manifestSeen = watchFile(s.manifest);
      const stalledAt = Date.now();
      proxy.stallEstablished();
      const reopened = await waitFor(
        () => {
          const i = s.agent.logs.findIndex(
            (l, j) => j >= mark && l.msg === 'watch silent past the watchdog; re-opening' && String(l.informer).startsWith('leases of'),
          );
          return i >= 0 ? i : undefined;
        },
        { timeoutMs: 40_000, what: 'the lease watch to be re-opened by the watchdog' },
      );
      const reopenedMs = Date.now() - stalledAt;
      // Settle: the re-opened watch delivers again.
      await sleep(3_000);
      expect(await manifestSeen.stop()).toBeNull();
      expect(activations(s.agent, mark)).toEqual([]);

      // While the watch was silent the window passed (Silent), and a live read over a new connection
      // found the Lease changing (Silent -> Healthy) before the watchdog re-opened the watch.
      const during = transitions(s.agent, mark).filter((t) => t.at < reopened);
      expect(during.some((t) => t.to === 'Silent')).toBe(true);
      expect(during.some((t) => t.from === 'Silent' && t.to === 'Healthy')).toBe(true);
      const confirmFailures = s.agent.logs.slice(mark).filter((l) => l.msg === 'action failed' && l.action === 'confirm');
      expect(confirmFailures).toEqual([]);

      // The re-opened watch delivers: the parent stays Healthy, with no Silent spell (a dead watch
      // shows one about every window; one is forgiven to a loaded machine).
      const steady = s.agent.logs.length;
      await sleep(4_000);
      expect(transitions(s.agent, steady).filter((t) => t.to === 'Silent').length).toBeLessThanOrEqual(1);

      // A later change is delivered: the parent's death is covered at the window.
      await hb.stop('SIGKILL');
      hb = null;
      const activationMs = await appears(s.manifest);
      expect(activationMs).toBeGreaterThanOrEqual(1000 - 250);
      expect(activationMs).toBeLessThan(10_000);
      process.stdout.write(
        `[faults] established-only stall (${when}): watchdog re-opened the lease watch after ${reopenedMs} ms; Silent spells ended by live reads: ${during.filter((t) => t.from === 'Silent' && t.to === 'Healthy').length}; activation after the parent's SIGKILL ${activationMs} ms\n`,
      );
      proxy.resume();
      await s.agent.stop();
    },
  );

  it('everything stalls (new connections hang too): hold, no activation; the agent recovers when the path does', async () => {
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: apiserverPort() });
    proxies.push(proxy);
    const s = await faultSetup('stallall', { policy: HOLD('lease'), agentKubeconfig: await kubeconfigVia(proxy.port), watchdog: '3s' });
    const hb = s.heartbeat('lease');
    await captured(s);
    await healthy(s.agent);
    await sleep(1_000);

    const mark = s.agent.logs.length;
    const manifestSeen = watchFile(s.manifest);
    proxy.stall();
    const t0 = Date.now();
    await reachability(s.agent, false);
    const noticedMs = Date.now() - t0;
    // Longer than the window, the watchdog and the agent's 5 s request timeout together.
    await sleep(LONG ? 20_000 : 8_000);
    expect(await exists(s.manifest)).toBe(false);
    proxy.resume();
    const back = s.agent.logs.length;
    await reachability(s.agent, true);
    await healthy(s.agent, back);
    await sleep(1_500);
    expect(await manifestSeen.stop()).toBeNull();
    expect(activations(s.agent, mark)).toEqual([]);
    const held = transitions(s.agent, mark).filter((t) => t.reason.startsWith('HoldApiUnreachable'));
    process.stdout.write(`[faults] full stall: unreachable noticed in ${noticedMs} ms; hold notes ${held.length}; no activation\n`);
    await hb.stop();
    await s.agent.stop();
  });
});

describe('garbage in the local heartbeat folder', () => {
  it('a running agent counts malformed files as bad inputs and keeps a local-only parent Healthy', async () => {
    const s = await faultSetup('garbage', {
      policy: '{ interval: 250ms, window: 1s, startupGrace: 2s, handoverTimeout: 2s, channels: [local], whenApiUnreachable: hold }',
    });
    const hb = s.heartbeat('local');
    await captured(s);
    await healthy(s.agent);
    const port = await healthPort(s.agent);
    const bad = async () => metric(await metricsText(port), 'lastseen_bad_inputs_total{source="local"}');
    const before = await bad();
    const mark = s.agent.logs.length;
    const manifestSeen = watchFile(s.manifest);

    const d = s.dirs.heartbeats;
    const beat = {
      holder: s.pod.name,
      holderUid: s.pod.uid,
      role: 'parent' as const,
      phase: 'Ready' as const,
      sequence: 7,
      renewTime: '2030-01-01T00:00:00.000000Z',
      channel: 'local' as const,
    };
    const valid = localBeatText({ node: s.node, namespace: s.ns, key: KEY, role: 'parent' }, beat);
    // Each reaches the parser (a regular, small *.json file) and must be refused.
    const refused: Record<string, string> = {
      [`${s.ns}_ghost.json`]: 'not json at all {{{',
      [`${s.ns}_trunc.json`]: valid.slice(0, 40),
      [`${s.ns}_array.json`]: '[1,2,3]',
      [`${s.ns}_empty.json`]: '',
      [`${s.ns}_binary.json`]: '\u0000\u0001\u00ff\ufffd',
      [`${s.ns}_other.json`]: localBeatText({ node: 'another-node', namespace: s.ns, key: 'other', role: 'parent' }, beat),
      [`${s.ns}_${KEY}.checkpoint.json`]: valid, // a parent's beat under the checkpoint's name: role mismatch
      [`${s.ns}_future.json`]: valid.replace('"version":1', '"version":99'),
      'NOT A BEAT.json': valid,
    };
    for (const [name, text] of Object.entries(refused)) await writeFile(join(d, name), text);
    // These never reach the parser: skipped by the folder scan with a reason.
    await writeFile(join(d, `${s.ns}_huge.json`), 'x'.repeat(1 << 20));
    await mkdir(join(d, `${s.ns}_dir.json`));
    await symlink('/dev/zero', join(d, `${s.ns}_zero.json`));
    const fifo = spawnSync('mkfifo', [join(d, `${s.ns}_fifo.json`)]);
    // The parent's own file overwritten with garbage between two of its beats (not atomically).
    for (let i = 0; i < 3; i++) {
      await writeFile(join(d, `${s.ns}_${KEY}.json`), valid.slice(0, 17 + i));
      await sleep(300);
    }

    const counted = await waitFor(
      async () => {
        const n = await bad();
        return n - before >= Object.keys(refused).length ? n - before : undefined;
      },
      { what: 'lastseen_bad_inputs_total{source="local"} to rise' },
    );
    await sleep(2_000);
    expect(await manifestSeen.stop()).toBeNull();
    expect(activations(s.agent, mark)).toEqual([]);
    expect(transitions(s.agent, mark).filter((t) => t.to !== 'Healthy')).toEqual([]);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    const skipped = s.agent.logs
      .slice(mark)
      .filter((l) => l.msg === 'heartbeat file skipped')
      .map((l) => String(l.file));
    expect(skipped).toEqual(
      expect.arrayContaining([`${s.ns}_huge.json`, `${s.ns}_dir.json`, `${s.ns}_zero.json`, ...(fifo.status === 0 ? [`${s.ns}_fifo.json`] : [])]),
    );

    // Still working: the parent's death is covered at the window (no api channel: no live read).
    await hb.stop('SIGKILL');
    const activationMs = await appears(s.manifest);
    expect(activationMs).toBeLessThan(10_000);
    process.stdout.write(
      `[faults] garbage files: ${counted} bad inputs counted (${Object.keys(refused).length} malformed files + torn parent file), parent stayed Healthy; activation after its SIGKILL ${activationMs} ms\n`,
    );
    await s.agent.stop();
  });
});
