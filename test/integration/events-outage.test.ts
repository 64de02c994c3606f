// An Event the agent decides while the api-server refuses its connections is kept, and recorded
// once the api-server answers again, with the time it was decided. The agent reaches the real
// api-server through a TCP proxy that refuses every connection for the outage (what a killed
// api-server's port does), so the Event's POST meets the outage every time, not only when a kill
// happens to land between a decision and its send (test/integration/gc.test.ts, case gc-at).
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { apiserverPort, appears, captured, faultSetup, healthy, kubeconfigVia, reachability } from './fault-helpers.js';
import { kubeConfigFor, waitFor } from './harness.js';
import { startTcpProxy } from './tcp-proxy.js';

const POLICY = '{ interval: 250ms, window: 1s, startupGrace: 2s, handoverTimeout: 2s, channels: [lease, local], whenApiUnreachable: activate }';
const KEPT = 'event not recorded yet; kept until the api-server answers';

describe('Events during an api-server outage', () => {
  it('CheckpointActivated decided while every connection is refused is kept, and recorded once the api-server answers', async () => {
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: apiserverPort() });
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    try {
      const s = await faultSetup('events-outage', { policy: POLICY, agentKubeconfig: await kubeconfigVia(proxy.port) });
      const hb = s.heartbeat('lease,local');
      await captured(s);
      await healthy(s.agent);
      const activated = async () => (await core.listNamespacedEvent({ namespace: s.ns })).items.filter((e) => e.reason === 'CheckpointActivated');

      proxy.refuse();
      await reachability(s.agent, false);
      const outageFrom = Date.now();
      // The parent dies with the api-server away: its local beats stop, and the policy covers it.
      await hb.stop('SIGKILL');
      await appears(s.manifest, 30_000);
      // The Event's send met the refused connection: kept, not dropped.
      const verdict = await waitFor(() => s.agent.logs.find((l) => l.reason === 'CheckpointActivated' && (l.msg === KEPT || l.msg === 'event not recorded')), {
        timeoutMs: 30_000,
        what: 'the agent to try to send CheckpointActivated',
      });
      expect(verdict.msg, `CheckpointActivated ${String(verdict.err)}`).toBe(KEPT);
      const outageUntil = Date.now();
      expect(await activated()).toEqual([]);

      proxy.accept();
      const events = await waitFor(
        async () => {
          const e = await activated();
          return e.length > 0 ? e : undefined;
        },
        { timeoutMs: 30_000, what: 'CheckpointActivated to be recorded after the outage' },
      );
      expect(events).toHaveLength(1);
      // Recorded with the time it was decided, inside the outage, not the time it was sent.
      const at = new Date(events[0]!.firstTimestamp!).getTime();
      expect(at).toBeGreaterThanOrEqual(outageFrom - 1_000);
      expect(at).toBeLessThanOrEqual(outageUntil);
      await s.agent.stop();
    } finally {
      await proxy.close();
    }
  }, 180_000);
});
