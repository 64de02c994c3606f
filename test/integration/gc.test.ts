// Garbage collection around an api-server outage, against the real kube-apiserver. Three parents on
// three nodes (each with its own agent) lose their pods at staggered times, so that one
// api-server kill lands before, at, and just after their gcGrace deadlines. Whatever the timing,
// no checkpoint file may disappear while the api-server is down; after it returns each copy waits
// out a full gcGrace again, on a fresh list, before it goes.
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { captured, exists, type FaultSetup, faultSetup, KEY, sleep } from './fault-helpers.js';
import { kubeConfigFor, startApiserver, stopApiserver, waitFor } from './harness.js';

/** The smallest gcGrace the validator accepts (MIN_GC_GRACE_MS). */
const GC_GRACE_MS = 30_000;
const POLICY = '{ interval: 250ms, window: 1s, startupGrace: 2s, handoverTimeout: 2s, gcGrace: 30s, channels: [lease] }';
/** The most a collection's file removal may lag the live read that allowed it (a loaded 2-core CI machine). */
const REMOVAL_AFTER_READ_MS = 1_000;
/** How long the api-server stays down: past the latest deadline (7 s after the kill) with room. */
const OUTAGE_MS = 12_000;

interface Case {
  name: string;
  /** The kill happens this long after the case's gcGrace deadline (negative: before it). */
  killAfterDeadlineMs: number;
  s?: FaultSetup;
  /** Wall time of the first moment the stored copy or the manifest was seen missing. */
  goneAt?: number;
}

/** Polls both files of a case every 25 ms; records when either first goes missing. */
function watchGone(c: Case, meta: string): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running && c.goneAt === undefined) {
      if (!(await exists(meta)) || !(await exists(c.s!.manifest))) c.goneAt = Date.now();
      await sleep(25);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

describe('garbage collection and an api-server outage', () => {
  it('never collects while the api-server is down: a kill before, at and just after the gcGrace deadline', async () => {
    const cases: Case[] = [
      { name: 'gc-before', killAfterDeadlineMs: -7_000 },
      { name: 'gc-at', killAfterDeadlineMs: 0 },
      { name: 'gc-after', killAfterDeadlineMs: 300 },
    ];
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    for (const c of cases) c.s = await faultSetup(c.name, { policy: POLICY });
    const hbs = cases.map((c) => c.s!.heartbeat('lease'));
    await Promise.all(cases.map((c) => captured(c.s!)));
    // The parent goes away for good: its heartbeat stops (a Stopping beat, so the checkpoint is
    // activated at once, as for a real control-plane pod that is deleted) and its pod is deleted.
    await Promise.all(hbs.map((h) => h.stop()));
    await Promise.all(cases.map((c) => waitFor(() => exists(c.s!.manifest), { what: `${c.name}: the checkpoint to be active`, timeoutMs: 30_000 })));

    // Delete each pod so that its deadline (delete + gcGrace) falls at kill - killAfterDeadlineMs.
    const t0 = Date.now();
    const latest = Math.max(...cases.map((c) => c.killAfterDeadlineMs));
    const killAt = t0 + GC_GRACE_MS + latest;
    const deletedAt = new Map<string, number>();
    const watchers: Array<{ stop(): Promise<void> }> = [];
    for (const c of [...cases].sort((a, b) => b.killAfterDeadlineMs - a.killAfterDeadlineMs)) {
      await sleep(Math.max(0, killAt - c.killAfterDeadlineMs - GC_GRACE_MS - Date.now()));
      await core.deleteNamespacedPod({ namespace: c.s!.ns, name: c.s!.pod.name, gracePeriodSeconds: 0 });
      deletedAt.set(c.name, Date.now());
      watchers.push(watchGone(c, join(c.s!.dirs.state, 'checkpoints', `${c.s!.ns}_${KEY}`, 'meta.json')));
    }
    await sleep(Math.max(0, killAt - Date.now()));
    // The kill takes a moment (a script run); the api-server is surely down once it returns.
    const killCalledAt = Date.now();
    await stopApiserver('KILL');
    const downFrom = Date.now();
    let downUntil = Number.POSITIVE_INFINITY;
    try {
      await sleep(OUTAGE_MS);
    } finally {
      downUntil = Date.now();
      await startApiserver();
    }
    const upAt = Date.now();

    // After the return, each copy is collected again, but only after a full grace on a fresh list.
    await Promise.all(cases.map((c) => waitFor(() => c.goneAt !== undefined, { what: `${c.name}: collected after the outage`, timeoutMs: 3 * GC_GRACE_MS })));
    await Promise.all(watchers.map((w) => w.stop()));
    for (const c of cases) {
      const deadline = deletedAt.get(c.name)! + GC_GRACE_MS;
      const goneAt = c.goneAt!;
      process.stdout.write(
        `gc: ${c.name}: deadline ${deadline - downFrom} ms from the kill (the kill took ${downFrom - killCalledAt} ms); api-server down ${downUntil - downFrom} ms; ` +
          `collected ${goneAt - downFrom} ms after the kill (${goneAt - upAt} ms after the api-server was back)\n`,
      );
      // Nothing disappears while the api-server is down... A collection first reads live and only
      // then removes the files, so one whose read the api-server answered as the kill began (the
      // case whose deadline is the kill) may finish its file removal just after the kill returns:
      // that removal rests on an answer from before the outage. Any later one could not.
      expect(goneAt < downFrom + REMOVAL_AFTER_READ_MS || goneAt > downUntil, `${c.name} was collected during the outage`).toBe(true);
      // ...and a collection that the outage interrupted waits a full gcGrace after the return.
      if (goneAt > downUntil) expect(goneAt - upAt).toBeGreaterThanOrEqual(GC_GRACE_MS - 1_000);
      // The deadline that fell inside the outage did not collect: it had to wait for the return.
      if (deadline > downFrom + 200) expect(goneAt).toBeGreaterThan(downUntil);
    }
    // The collection of a parent whose pod was gone is recorded as an Event (cluster-scoped
    // NodeCheckpoint, so in `default`), not refused with HTTP 422. One decided as the kill began
    // is kept by the agent and sent once the api-server answers again: whether its send met the
    // dead api-server depends on a few milliseconds, so each case says which way it went, and no
    // Event may have been dropped on the way (a refused or reset connection keeps it).
    for (const c of cases) {
      const kept = c.s!.agent.logs.some((l) => l.msg === 'event not recorded yet; kept until the api-server answers' && l.reason === 'CheckpointCollected');
      process.stdout.write(`gc: ${c.name}: CheckpointCollected ${kept ? 'kept during the outage' : 'sent at once'}\n`);
      const dropped = c.s!.agent.logs.filter((l) => l.msg === 'event not recorded').map((l) => `${String(l.reason)}: ${String(l.err)}`);
      expect(dropped, `${c.name}: Events the agent dropped`).toEqual([]);
      const reasons = async () =>
        (await core.listNamespacedEvent({ namespace: 'default' })).items
          .filter((e) => e.involvedObject.kind === 'NodeCheckpoint' && e.involvedObject.name === c.s!.node)
          .map((e) => e.reason);
      await waitFor(async () => (await reasons()).includes('CheckpointCollected') || undefined, {
        timeoutMs: 20_000,
        what: `${c.name}: a CheckpointCollected Event about NodeCheckpoint ${c.s!.node}`,
      });
    }
    await Promise.all(cases.map((c) => c.s!.agent.stop()));
  }, 240_000);
});
