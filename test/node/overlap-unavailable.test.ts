// `handover: overlap` for a parent that cannot share its port, on a real kubelet.
//
// The policy says overlap for the small demo parent (test/node/manifests.ts demoParent), but this
// spec binds its port without SO_REUSEPORT, as a kube-apiserver started without
// --permit-port-sharing does. Its pod is deleted: it beats Stopping, the agent runs its checkpoint,
// which takes the port alone. The DaemonSet's new pod runs the same spec and dies with EADDRINUSE
// beside it. The agent must read that exit of the checkpoint's own spec as "these ports are not
// shared": a Warning Event `OverlapUnavailable`, and a release hand-over, so the parent serves again
// instead of crash-looping beside a checkpoint that keeps the node for good.
//
// The copy and the DaemonSet's new pod race for the freed port. Left to chance, the new pod won it
// about one run in three here (and in CI): the copy then crash-loops beside the parent, the parent
// beats Ready and the copy is retired, which is right but is not what this test is about. A taint
// the demo parent does not tolerate holds the DaemonSet's next pod off the node until the copy
// serves; a static pod (the copy) ignores taints.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { demoAnswers, demoLeaseBeat, demoPods, withBootstrappedNode } from './demo.js';
import { DEMO_NAME, demoParent } from './manifests.js';
import { log, sleep, type Testbed } from './testbed.js';

/** A taint only this test sets: the demo parent's tolerations (manifests.ts, mode exclusive) leave it out. */
const HOLD = 'lastseen.dev/test-hold';

const PARENT = `kube-system/${DEMO_NAME}`;

let tb: Testbed;
withBootstrappedNode((t) => {
  tb = t;
});

/** Events with `reason` about the demo parent, oldest first. */
async function events(reason: string): Promise<Array<{ type: string; message: string }>> {
  const all = JSON.parse(await tb.kubectl(['get', 'events', '-A', '--field-selector', `reason=${reason}`, '-o', 'json'])).items as Array<{
    type: string;
    message: string;
  }>;
  return all.filter((e) => e.message.includes(PARENT));
}

/** On a failure: what the agent said about the demo parent, and what its pods said. */
async function diagnose(): Promise<void> {
  const said = tb.agentRecords(PARENT, 0).slice(-60);
  log(`the agents, about ${PARENT}:\n  ${said.map((e) => JSON.stringify(e)).join('\n  ')}`);
  const root = join(tb.env.dir, 'pod-logs');
  for (const d of existsSync(root) ? readdirSync(root) : []) {
    const [namespace, pod, uid] = d.split('_') as [string, string, string];
    if (d.includes(DEMO_NAME)) {
      for (const c of ['app', 'lastseen-heartbeat']) log(`${pod} ${c}:\n  ${tb.containerLog(namespace, pod, uid, c).slice(-15).join('\n  ')}`);
    }
  }
  log(`pods: ${JSON.stringify(await demoPods(tb))}; lease: ${JSON.stringify(await demoLeaseBeat(tb))}`);
}

describe('overlap for a parent whose ports are not shared', () => {
  it('its own spec failing to bind beside the checkpoint is announced (OverlapUnavailable) and the node is handed back by release', async () => {
    await tb.apply([demoParent(tb.env, 'exclusive')]);
    await tb.waitFor('the demo parent to serve', 120, () => demoAnswers());
    await tb.waitFor('the demo checkpoint to be stored', 120, () => tb.checkpointStored(DEMO_NAME));
    const [old] = await demoPods(tb);
    await tb.waitFor('a Ready beat from the serving pod', 60, async () => {
      const b = await demoLeaseBeat(tb);
      return b !== null && b.holder === old?.name && b.phase === 'Ready';
    });
    expect(await events('OverlapUnavailable')).toEqual([]);
    log(`demo parent ${old?.name} serves its port alone, Ready, checkpoint stored`);

    // The pod goes: its last beat says Stopping, the checkpoint takes the port; the DaemonSet's new
    // pod, the same spec, fails to bind beside it.
    await tb.kubectl(['taint', 'node', tb.env.nodeName, `${HOLD}=:NoSchedule`]);
    const t0 = Date.now();
    await tb.kubectl(['delete', 'pod', '-n', 'kube-system', old!.name, '--wait=false']);
    const activatedS = await tb.waitFor('the checkpoint to be activated', 60, () => tb.checkpointActive(DEMO_NAME), 50);
    await tb
      .waitFor('the copy to serve the port, Ready', 120, async () => (await demoLeaseBeat(tb, 'checkpoint'))?.phase === 'Ready' && (await demoAnswers()))
      .catch(async (e) => {
        await diagnose();
        throw e;
      });
    expect(await demoPods(tb)).toEqual([]);
    await tb.kubectl(['taint', 'node', tb.env.nodeName, `${HOLD}=:NoSchedule-`]);
    const announcedS = await tb
      .waitFor('an OverlapUnavailable Event', 180, async () => (await events('OverlapUnavailable')).length > 0, 500)
      .catch(async (e) => {
        await diagnose();
        throw e;
      });
    const [announced] = await events('OverlapUnavailable');
    log(`checkpoint active after ${activatedS.toFixed(1)}s; OverlapUnavailable after ${((Date.now() - t0) / 1000).toFixed(1)}s: ${announced?.message}`);
    expect(announced?.type).toBe('Warning');
    expect(announced?.message).toContain('its ports are not shared');
    const crashed = (await demoPods(tb)).find((p) => p.uid !== old?.uid);
    expect(crashed).toBeDefined();
    const appLog = tb.containerLog('kube-system', crashed!.name, crashed!.uid, 'app').join('\n');
    expect(appLog).toContain('EADDRINUSE');

    // Release: the checkpoint retires on the parent's next Starting beat, the kubelet's next restart
    // binds the freed port, and the parent itself serves, Ready.
    await tb.waitFor('the checkpoint to be retired and the parent to beat Ready', 240, async () => {
      if (tb.checkpointActive(DEMO_NAME)) return false;
      const b = await demoLeaseBeat(tb);
      return b !== null && b.holder === crashed!.name && b.phase === 'Ready';
    });
    const recoveredS = (Date.now() - t0) / 1000;
    await sleep(2000);
    expect(tb.checkpointActive(DEMO_NAME)).toBe(false);
    expect(await demoAnswers()).toBe(true);
    expect((await events('HandoverStarted')).length).toBeGreaterThan(0);
    // The retire removed the copy's own beat file, or found it gone: the agent may write in the
    // heartbeat folder for that (it was mounted read-only, and every retire logged EROFS).
    const unremoved = tb.agentRecords(PARENT, 0).filter((e) => e.msg === "could not remove the retired checkpoint's heartbeat file");
    expect(unremoved).toEqual([]);
    log(
      `the parent serves again ${recoveredS.toFixed(1)}s after its pod was deleted (the copy served alone until the DaemonSet's pod was let in; the Event came ${announcedS.toFixed(1)}s after that); ` +
        `HandoverStarted: ${JSON.stringify((await events('HandoverStarted')).map((e) => e.message))}`,
    );
  }, 600_000);
});
