// The agent's static copy and its DaemonSet pod on one node, as two `lastseen agent` processes
// against the real kube-apiserver: the copy (LASTSEEN_AGENT_COPY=true, as self.ts sets it) acts
// while no DaemonSet pod does, hands the node lock to one that stands by, and stands by itself in
// the same process, but only on a calm node (no parent covered); when that pod dies, the copy acts
// again. Never are both Ready (acting) at once.
import { describe, expect, it } from 'vitest';
import { COPY_ENV } from '../../src/agent/self.js';
import { appears, captured, faultSetup, healthy, reachability, sleep } from './fault-helpers.js';
import { waitFor } from './harness.js';
import { logsWith, type Proc } from './processes.js';

const POLICY = '{ interval: 250ms, window: 1s, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, channels: [lease] }';

/** The port a process serves /readyz on now (its last turn's). */
const portOf = (p: Proc): number | null => (logsWith(p, 'health endpoints listening').at(-1)?.port as number | undefined) ?? null;

async function ready(p: Proc): Promise<boolean> {
  const port = portOf(p);
  if (port === null || p.child.exitCode !== null) return false;
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200;
  } catch {
    return false;
  }
}

describe("the agent's copy and its DaemonSet pod", () => {
  it('the copy acts alone, hands the lock to the DaemonSet pod that stands by once no parent is covered, stands by in the same process, and acts again when that pod dies', async () => {
    const s = await faultSetup('turns', { policy: POLICY });
    // faultSetup starts a DaemonSet pod's agent; this story starts with the copy alone (a reboot).
    await s.agent.stop();
    let hb = s.heartbeat();
    process.env[COPY_ENV] = 'true'; // spawn copies the environment now
    const copy = (() => {
      try {
        return s.startAgent();
      } finally {
        delete process.env[COPY_ENV];
      }
    })();
    s.agent = copy; // its log is kept if the test fails
    await waitFor(() => logsWith(copy, 'agent started').length === 1 || undefined, { timeoutMs: 60_000, what: 'the copy to act' });
    await reachability(copy, true);
    await waitFor(() => ready(copy), { timeoutMs: 60_000, what: 'the copy Ready' });
    await captured(s);
    await healthy(copy);
    // The parent dies: the copy covers it.
    await hb.stop('SIGKILL');
    await appears(s.manifest);

    // Sampled throughout: never both Ready.
    let both = 0;
    let samples = 0;
    let ds: Proc | null = null;
    let on = true;
    const sampler = (async () => {
      while (on) {
        const [a, b] = await Promise.all([ready(copy), ds ? ready(ds) : false]);
        samples++;
        if (a && b) both++;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      ds = s.startAgent();
      const pod = ds;
      await waitFor(() => logsWith(pod, 'another agent holds the node lock; standing by').length === 1 || undefined, { what: 'the DaemonSet pod to stand by' });
      // No hand-over while a parent is covered (three of the copy's lock checks, 2 s apart) ...
      await sleep(6500);
      expect(logsWith(copy, 'stopping to hand the node lock over; standing by again after'), 'a hand-over while a parent is covered').toEqual([]);
      // ... once it is back and handed back, the copy hands the DaemonSet pod the lock.
      const since = copy.logs.length;
      hb = s.heartbeat();
      await healthy(copy, since);
      await waitFor(() => logsWith(copy, 'stopping to hand the node lock over; standing by again after').length === 1 || undefined, {
        timeoutMs: 60_000,
        what: 'the copy to hand over',
      });
      await waitFor(() => logsWith(pod, 'agent started').length === 1 || undefined, { timeoutMs: 60_000, what: 'the DaemonSet pod to act' });
      await waitFor(() => ready(pod), { timeoutMs: 60_000, what: 'the DaemonSet pod Ready' });
      await waitFor(() => logsWith(copy, 'another agent holds the node lock; standing by').length >= 1 || undefined, { what: 'the copy to stand by again' });
      expect(copy.child.exitCode, 'the copy process stays (no crash-loop back-off before its next take-over)').toBeNull();
      expect(logsWith(copy, 'agent started')).toHaveLength(1);
      expect(await ready(copy)).toBe(false);

      // The DaemonSet pod dies (SIGKILL): the copy, standing by, acts again.
      await pod.stop('SIGKILL');
      await waitFor(() => logsWith(copy, 'agent started').length === 2 || undefined, { timeoutMs: 60_000, what: 'the copy to act again' });
      await waitFor(() => ready(copy), { timeoutMs: 60_000, what: 'the copy Ready again' });
      // It died within a minute of taking the lock: the copy does not give it the lock again soon.
      expect(copy.logs.find((l) => /did not keep the node lock/.test(String(l.msg)))).toMatchObject({ distrustedFor: '60s' });
    } finally {
      on = false;
      await sampler;
    }
    expect(samples).toBeGreaterThan(10);
    expect(both, `samples with both agents Ready, of ${samples}`).toBe(0);
    await copy.stop();
    expect(await copy.exited).toBe(0);
    await hb.stop();
  });
});
