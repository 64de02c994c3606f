// "Ready" is the parent's own process, not its checkpoint, on a real kubelet.
//
// A small parent on the host network (test/node/manifests.ts demoParent) serves a port with
// SO_REUSEPORT and is handed over by overlap. A rollout replaces it with a spec whose main process
// fails: it finds the port held by the checkpoint, which the agent started when the old pod said
// Stopping, and dies with EADDRINUSE, again and again. Its heartbeat probes the same port, and the
// checkpoint answers. Before the fix the heartbeat reported Ready and the agent retired the
// checkpoint at once, leaving the port dark while the parent crash-looped. Now the heartbeat sees
// that no process of its own pod holds the port: Starting, and the checkpoint keeps serving. Rolled
// back, the good spec binds beside the checkpoint, proves itself on shared sockets, and takes over.
import { describe, expect, it } from 'vitest';
import { type DemoPod, demoAnswers, demoLeaseBeat, demoPods, withBootstrappedNode } from './demo.js';
import { DEMO_NAME, DEMO_PORT, demoParent } from './manifests.js';
import { log, sleep, type Testbed } from './testbed.js';

let tb: Testbed;
withBootstrappedNode((t) => {
  tb = t;
});

/** Polls the port every 100 ms until stopped; the seconds it did not answer. */
function portWatch() {
  const samples: Array<{ t: number; ok: boolean }> = [];
  let on = true;
  const done = (async () => {
    while (on) {
      const t = Date.now();
      samples.push({ t, ok: await demoAnswers() });
      const rest = 100 - (Date.now() - t);
      if (rest > 0) await sleep(rest);
    }
  })();
  return {
    async stop(from: number) {
      on = false;
      await done;
      let darkMs = 0;
      for (let i = 1; i < samples.length; i++) if (samples[i - 1]!.t >= from && !samples[i - 1]!.ok) darkMs += samples[i]!.t - samples[i - 1]!.t;
      return darkMs / 1000;
    },
  };
}

describe('Ready means the parent pod own process, not its checkpoint', () => {
  it('a parent crashing on its checkpoint port is Starting while the checkpoint serves, and the checkpoint is not retired on it', async () => {
    await tb.apply([demoParent(tb.env, 'serve')]);
    await tb.waitFor('the demo parent to serve', 120, () => demoAnswers());
    await tb.waitFor('the demo checkpoint to be stored', 120, () => tb.checkpointStored(DEMO_NAME));
    const [good] = await demoPods(tb);
    await tb.waitFor('a Ready beat from the serving pod', 60, async () => {
      const b = await demoLeaseBeat(tb);
      return b !== null && b.holder === good?.name && b.phase === 'Ready';
    });
    log(`demo parent ${good?.name} serves, Ready, checkpoint stored`);

    // The rollout: the old pod says Stopping, the checkpoint takes the port, the new pod crashes on it.
    const watch = portWatch();
    const t0 = Date.now();
    await tb.apply([demoParent(tb.env, 'crash')]);
    const activatedS = await tb.waitFor('the checkpoint to be activated', 90, () => tb.checkpointActive(DEMO_NAME), 50);
    let crashing: DemoPod | undefined;
    await tb.waitFor('the new pod to crash and be restarted', 120, async () => {
      crashing = (await demoPods(tb)).find((p) => p.uid !== good?.uid && p.restarts >= 1);
      return crashing !== undefined;
    });
    const crashedS = (Date.now() - t0) / 1000;
    log(`checkpoint active after ${activatedS.toFixed(1)}s; ${crashing?.name} restarted after ${crashedS.toFixed(1)}s`);

    // The checkpoint's own sidecar beats Starting until its probe finds the port held by its own
    // process; on a fast node the new pod crashes before that first proof, so wait for it here.
    const copyReadyS = await tb.waitFor('the checkpoint to beat Ready', 60, async () => (await demoLeaseBeat(tb, 'checkpoint'))?.phase === 'Ready', 200);
    log(`the checkpoint beat Ready ${copyReadyS.toFixed(1)}s later`);

    // 30 s (six beats, two or three more crashes): the checkpoint stays, the new pod beats Starting.
    const phases: string[] = [];
    const copyPhases: string[] = [];
    let retired = 0;
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      if (!tb.checkpointActive(DEMO_NAME)) retired++;
      const b = await demoLeaseBeat(tb);
      if (b && b.holder === crashing?.name) phases.push(b.phase);
      const c = await demoLeaseBeat(tb, 'checkpoint');
      if (c) copyPhases.push(c.phase);
      await sleep(500);
    }
    const after = (await demoPods(tb)).find((p) => p.uid === crashing?.uid);
    const appLog = tb.containerLog('kube-system', crashing!.name, crashing!.uid, 'app').join('\n');
    const reasons = tb
      .containerLog('kube-system', crashing!.name, crashing!.uid, 'lastseen-heartbeat')
      .filter((l) => l.includes('"heartbeat phase"'))
      .map((l) => JSON.parse(l) as { phase: string; probeError?: string });
    log(`crashing pod: ${after?.restarts} restarts; its app said: ${JSON.stringify(appLog)}; its heartbeat: ${JSON.stringify(reasons)}`);
    log(
      `lease phases of ${crashing?.name} in 30 s: ${JSON.stringify(phases)}; of the checkpoint: ${JSON.stringify(copyPhases)}; samples with the checkpoint retired: ${retired}`,
    );

    // The checkpoint kept the node, and the crashing pod never beat Ready.
    expect(retired).toBe(0);
    expect(tb.checkpointActive(DEMO_NAME)).toBe(true);
    expect(phases.length).toBeGreaterThan(10);
    expect(new Set(phases)).toEqual(new Set(['Starting']));
    // The checkpoint's own sidecar, once it proved its own process holds the port, never says otherwise.
    expect(copyPhases.length).toBeGreaterThan(10);
    expect(new Set(copyPhases)).toEqual(new Set(['Ready']));
    // It really crashed on the checkpoint's port, more than once, and its heartbeat said why it is not Ready.
    expect(appLog).toContain('EADDRINUSE');
    expect(after?.restarts).toBeGreaterThanOrEqual(2);
    expect(reasons.length).toBeGreaterThan(0);
    expect(reasons.every((r) => r.phase === 'Starting')).toBe(true);
    expect(reasons.some((r) => r.probeError?.includes(`port ${DEMO_PORT} is held by`) && r.probeError.includes('of no process of this pod'))).toBe(true);

    // Rolled back: the good spec binds beside the checkpoint (SO_REUSEPORT), proves itself and takes over.
    await tb.apply([demoParent(tb.env, 'serve')]);
    const retiredS = await tb.waitFor('the checkpoint to be retired by the good spec', 120, () => !tb.checkpointActive(DEMO_NAME), 100);
    const back = (await demoPods(tb)).find((p) => p.uid !== good?.uid && p.uid !== crashing?.uid);
    // The agent acts on the node's local beat file; the Lease is written in the same round but
    // through the api-server, and may still hold the crashing pod's last (Stopping) beat when the
    // first round of the good spec is already Ready (one answer from its own process proves it).
    await tb
      .waitFor("the good spec's Ready beat in the Lease", 15, async () => {
        const b = await demoLeaseBeat(tb);
        return b?.holder === back?.name && b?.phase === 'Ready';
      })
      .catch(() => undefined);
    const beat = await demoLeaseBeat(tb);
    await sleep(3000);
    const darkS = await watch.stop(t0);
    log(
      `rolled back: checkpoint retired ${retiredS.toFixed(1)}s after the rollback, by ${back?.name} (${JSON.stringify(beat)}); the port did not answer for ${darkS.toFixed(1)}s in all since the crashing rollout`,
    );
    expect(back).toBeDefined();
    expect(beat).toEqual({ holder: back?.name, phase: 'Ready' });
    expect(await demoAnswers()).toBe(true);
    // Only the hand-over from the old pod to the checkpoint leaves the port dark (the checkpoint's
    // start); the crash-looping pod and the overlap hand-back do not.
    expect(darkS).toBeLessThan(10);
  });
});
