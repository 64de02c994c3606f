// A state folder that takes no writes never stops the agent from covering what it already has,
// against the real kube-apiserver: the parent captured, the agent stopped, the state folder
// remounted read-only (a bind mount: needs root), the agent started again. It must start, say
// "degraded" on /readyz with the right errno (EROFS), set lastseen_state_folder_writable to 0,
// record a StateFolderNotWritable Event, and activate the stored checkpoint when the parent dies.
import { execFileSync } from 'node:child_process';
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { CLUSTER_SCOPED_EVENTS_NAMESPACE } from '../../src/agent/actuators.js';
import { appears, captured, faultSetup, healthy, metric, metricsText } from './fault-helpers.js';
import { kubeConfigFor, waitFor } from './harness.js';
import { healthPort } from './processes.js';

const POLICY =
  '{ interval: 250ms, window: 1s, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, handoverBackoff: { initial: 1s, max: 4s }, channels: [local] }';

function mountReadOnly(dir: string): () => void {
  if (process.getuid?.() !== 0) throw new Error('this test remounts the state folder read-only with a bind mount: run it as root');
  execFileSync('mount', ['--bind', dir, dir]);
  execFileSync('mount', ['-o', 'remount,ro,bind', dir]);
  return () => execFileSync('umount', [dir]);
}

describe('a read-only state folder', () => {
  it('the agent starts, says degraded (EROFS), and covers the parent with the checkpoint it already stored', async () => {
    const s = await faultSetup('trust-rofs', { policy: POLICY, secret: false });
    const hb = s.heartbeat('local');
    await captured(s);
    await healthy(s.agent);
    await s.agent.stop('SIGTERM');
    const unmount = mountReadOnly(s.dirs.state);
    try {
      s.agent = s.startAgent();
      const port = await healthPort(s.agent);
      await waitFor(() => s.agent.logs.some((l) => l.msg === 'agent started'), { timeoutMs: 30_000, what: 'the agent to start on a read-only state folder' });
      const problem = s.agent.logs.find((l) => l.code === 'EROFS' && String(l.msg).startsWith('the state folder takes no writes'));
      expect(problem, 'the errno named in the log').toBeDefined();
      const readyz = await waitFor(
        async () => {
          const r = await fetch(`http://127.0.0.1:${port}/readyz`);
          return r.status === 200 ? r.text() : undefined;
        },
        { timeoutMs: 30_000, what: '/readyz to answer 200' },
      );
      expect(readyz).toMatch(/^ok, degraded: the state folder takes no writes \(EROFS\)/);
      expect(metric(await metricsText(port), 'lastseen_state_folder_writable')).toBe(0);
      const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
      await waitFor(
        async () => {
          const ev = await core.listNamespacedEvent({ namespace: CLUSTER_SCOPED_EVENTS_NAMESPACE, labelSelector: `lastseen.dev/node=${s.node}` });
          return ev.items.some((e) => e.reason === 'StateFolderNotWritable' && e.message?.includes('EROFS')) || undefined;
        },
        { timeoutMs: 30_000, what: 'a StateFolderNotWritable Event' },
      );
      // The parent dies: the copy stored before the folder turned read-only covers it.
      await healthy(s.agent);
      await hb.stop('SIGKILL');
      const ms = await appears(s.manifest, 30_000);
      process.stdout.write(`[measured] read-only state folder: covered ${ms} ms after the parent died\n`);
      expect(s.agent.child.exitCode).toBeNull();
      await s.agent.stop();
    } finally {
      unmount();
    }
  });
});
