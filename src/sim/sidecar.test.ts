// The heartbeat sidecar in the simulator is production's (runSidecar: the loop and the fence
// responder) over the model's adapters: what it writes where and when, a frozen pod, and the fence
// round trip through the node's heartbeat folder, whose agent half is production's too.
import { describe, expect, it } from 'vitest';
import { FENCE_ANSWER_POLL_MS, fenceThroughSidecar } from '../agent/fence.js';
import { fenceAnswerFile, fenceRequestFile, leaseName, localBeatFile } from '../core/names.js';
import type { Beat, Reason } from '../core/types.js';
import { agentFencePorts, fenceFolder } from './fence-folder.js';
import { runWorld as run, startWorld } from './run.js';
import { parseScenario, type ScenarioInput } from './schema.js';
import { FENCED } from './sidecar.js';
import type { World } from './world.js';

function world(faults: ScenarioInput['faults'] = [], seed = 1, driftPpm = 0): World {
  const r = parseScenario({
    name: 'sidecar',
    duration: 600_000,
    nodes: [{ name: 'm1', master: true, driftPpm }],
    parents: [
      { key: 'kube-apiserver', kind: 'apiserver', portSharing: true, policy: { whenApiUnreachable: 'activate', handover: 'overlap' } },
      { key: 'kube-flannel', kind: 'app', policy: { whenApiUnreachable: 'hold' } },
      // Beats on its Lease only: its sidecar has no heartbeat folder, so no fence responder (as startHeartbeat).
      { key: 'kube-scheduler', kind: 'app', ports: [10259], policy: { channels: ['lease'] } },
    ],
    faults,
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return startWorld(r.scenario, seed);
}

/** Every local beat written on the node from now on: when, which file, what. */
function recordLocal(w: World, node = 'm1'): Array<{ t: number; file: string; beat: Beat }> {
  const files = w.nodes.get(node)!.files;
  const out: Array<{ t: number; file: string; beat: Beat }> = [];
  const set = files.set.bind(files);
  files.set = (file, beat) => {
    out.push({ t: w.q.now, file, beat });
    return set(file, beat);
  };
  return out;
}

/**
 * The agent on m1 asks the sidecar of `key`'s pod to fence it, as the simulator's agent does:
 * production's fenceThroughSidecar over the node's ports (its process stays alive here). Resolves
 * once the request is written and the wait begins; `outcome` is the answer or the error's message.
 */
async function askFence(w: World, key: string, why: Reason = { code: 'ParentHung', message: 'test' }) {
  const m1 = w.nodes.get('m1')!;
  const uid = w.api.podFor('m1', key)!.uid;
  const outcome = fenceThroughSidecar(
    agentFencePorts(w, m1, (fn) => fn()),
    { namespace: 'kube-system', key },
    uid,
    why,
  ).then(
    (r) => r,
    (e: Error) => e.message,
  );
  await w.settle();
  return { uid, outcome };
}

/** The timeout message of production's fence, with the simulated folder's path of the request. */
const NO_ANSWER = /^pod \S+'s sidecar did not answer the fence request m1:\S+ within 20s \(it needs lastseen heartbeat/;

const FLANNEL = localBeatFile('kube-system', 'kube-flannel', 'parent');

describe('the sidecar in the simulator is production’s', () => {
  it('one round every interval on every channel, one sequence per round, the Lease carrying the local file’s round', async () => {
    const w = world();
    const writes = recordLocal(w);
    const interval = w.parentDef('kube-flannel').beatIntervalMs;
    expect(await run(w, 60_000)).toBe(true);
    const mine = writes.filter((x) => x.file === FLANNEL);
    expect(mine.length).toBeGreaterThanOrEqual(Math.floor(55_000 / interval));
    for (let i = 1; i < mine.length; i++) {
      expect(mine[i]!.t - mine[i - 1]!.t).toBeCloseTo(interval, 6);
      expect(mine[i]!.beat.sequence).toBe(mine[i - 1]!.beat.sequence + 1);
    }
    expect(mine.at(-1)!.beat).toMatchObject({ phase: 'Ready', intervalMs: interval, holder: w.api.podFor('m1', 'kube-flannel')!.name });
    const lease = w.api.readBeat('lease', 'kube-system', leaseName('kube-flannel', 'm1', 'parent'))!;
    const same = mine.find((x) => x.beat.sequence === lease.sequence)!;
    expect(lease).toMatchObject({ channel: 'lease', phase: same.beat.phase, renewTime: same.beat.renewTime });
  });

  it('its interval is kept on its node’s monotonic clock, which drifts (the agent judges it on the same clock)', async () => {
    const w = world([], 1, 10_000);
    const writes = recordLocal(w);
    const interval = w.parentDef('kube-flannel').beatIntervalMs;
    expect(await run(w, 60_000)).toBe(true);
    const mine = writes.filter((x) => x.file === FLANNEL);
    // 1% fast: an interval on the node's clock is 1% shorter in true time.
    for (let i = 1; i < mine.length; i++) expect(mine[i]!.t - mine[i - 1]!.t).toBeCloseTo(interval / 1.01, 6);
  });

  it('a deleted pod’s sidecar writes a last Stopping round (its SIGTERM once the main container has exited: a native sidecar), the next sequence', async () => {
    const w = world([{ type: 'delete-pod', at: '2m', node: 'm1', key: 'kube-flannel' }]);
    const writes = recordLocal(w);
    expect(await run(w, 60_000)).toBe(true);
    const pod = w.api.podFor('m1', 'kube-flannel')!.name;
    expect(await run(w, 125_000)).toBe(true);
    const old = writes.filter((x) => x.file === FLANNEL && x.beat.holder === pod);
    const last = old.at(-1)!;
    const removed = w.logs.find((l) => l.text.startsWith(`pod ${pod} removed`))!;
    const exited = removed.t + w.scenario.kubelet.killMs + w.parentDef('kube-flannel').stopMs;
    expect(last).toMatchObject({ t: exited, beat: { phase: 'Stopping' } });
    expect(last.beat.sequence).toBe(old.at(-2)!.beat.sequence + 1);
  });

  it('a frozen pod writes nothing; at its thaw the loop beats at once and keeps its schedule (missed rounds skipped)', async () => {
    const w = world([{ type: 'hang', at: '2m', node: 'm1', key: 'kube-flannel', duration: '30s', scope: 'pod' }]);
    const writes = recordLocal(w);
    const interval = w.parentDef('kube-flannel').beatIntervalMs;
    expect(await run(w, 170_000)).toBe(true);
    const mine = writes.filter((x) => x.file === FLANNEL);
    const before = mine.filter((x) => x.t < 120_000).at(-1)!;
    const after = mine.filter((x) => x.t >= 120_000);
    expect(after[0]!.t).toBe(150_000);
    // The next round is back on the grid the loop started on: no burst of missed rounds.
    expect(((after[1]!.t - before.t) / interval) % 1).toBeCloseTo(0, 6);
    expect(after[1]!.t - after[0]!.t).toBeLessThanOrEqual(interval);
    expect(after[1]!.beat.sequence).toBe(after[0]!.beat.sequence + 1);
  });

  it('a hung process is fenced by its own sidecar: the agent’s request answered through the heartbeat folder, the process killed', async () => {
    const w = world([{ type: 'hang', at: '3m', node: 'm1', key: 'kube-apiserver', duration: '2m' }]);
    expect(await run(w, 260_000)).toBe(true);
    const killed = w.logs.find((l) => l.kind === 'kubelet' && l.text.includes(FENCED));
    expect(killed?.text).toMatch(/^kube-apiserver-1 exited/);
    expect(w.logs.find((l) => l.kind === 'agent' && /^fence of pod/.test(l.text))?.text).toMatch(/its hung process was killed$/);
    const folder = fenceFolder(w, w.nodes.get('m1')!);
    expect(JSON.parse(folder.read(fenceAnswerFile('kube-system', 'kube-apiserver'))!)).toMatchObject({
      killed: 1,
      detail: expect.stringMatching(/^SIGKILL of pid/),
    });
    expect(folder.read(fenceRequestFile('kube-system', 'kube-apiserver'))).toBeNull(); // the agent removed its request
  });

  it('a frozen pod’s sidecar answers nothing: the fence fails after production’s answer timeout; a hung process’s answers at once', async () => {
    const frozen = world([{ type: 'hang', at: '2m', node: 'm1', key: 'kube-flannel', duration: '2m', scope: 'pod' }]);
    expect(await run(frozen, 130_000)).toBe(true);
    const asked = await askFence(frozen, 'kube-flannel');
    let settled = false;
    void asked.outcome.then(() => (settled = true));
    expect(await run(frozen, 149_000)).toBe(true);
    expect(settled).toBe(false);
    expect(await run(frozen, 151_000)).toBe(true);
    expect(await asked.outcome).toMatch(NO_ANSWER);
    expect(frozen.logs.some((l) => l.text.includes(FENCED))).toBe(false);

    const hung = world([{ type: 'hang', at: '2m', node: 'm1', key: 'kube-flannel', duration: '2m' }]);
    expect(await run(hung, 121_000)).toBe(true); // before the agent would ask (two unanswered rounds)
    const at = hung.q.now;
    const answer = await askFence(hung, 'kube-flannel');
    const heardAt = answer.outcome.then(() => hung.q.now);
    expect(await run(hung, at + 1_000)).toBe(true);
    expect(await answer.outcome).toMatchObject({ killed: 1, detail: expect.stringMatching(/^SIGKILL/) });
    expect(hung.logs.find((l) => l.text.includes(FENCED))!.t).toBe(at + 50); // the sidecar's folder notice
    // The agent hears it at its next look at the answer file (production polls; it has no watch).
    expect(await heardAt).toBe(at + FENCE_ANSWER_POLL_MS);
  });

  it('the agent’s half is production’s: an answer that is not one (torn, for another request, without the pod) is no answer', async () => {
    // A frozen pod: its sidecar answers nothing, so every answer in the folder is written here.
    const w = world([{ type: 'hang', at: '2m', node: 'm1', key: 'kube-flannel', duration: '2m', scope: 'pod' }]);
    expect(await run(w, 130_000)).toBe(true);
    const folder = fenceFolder(w, w.nodes.get('m1')!);
    const requestName = fenceRequestFile('kube-system', 'kube-flannel');
    const answerName = fenceAnswerFile('kube-system', 'kube-flannel');
    const asked = await askFence(w, 'kube-flannel');
    const request = JSON.parse(folder.read(requestName)!) as { id: string; podUid: string; reason: string; requestedAt: string };
    expect(request).toMatchObject({ podUid: asked.uid, reason: 'ParentHung: test' });
    // requestedAt is the node's wall clock (virtual time), not the machine's.
    expect(Date.parse(request.requestedAt)).toBe(Math.trunc(w.nodes.get('m1')!.clock.wall(130_000)));
    let settled = false;
    void asked.outcome.then(() => (settled = true));
    const answer = (a: object) => `${JSON.stringify({ id: request.id, podUid: asked.uid, killed: 1, detail: 'SIGKILL of pid 1', ...a })}\n`;
    const { podUid: _, ...withoutPod } = JSON.parse(answer({})) as Record<string, unknown>;
    w.q.at(130_300, () => folder.write(answerName, answer({}).slice(0, 20))); // torn
    w.q.at(130_700, () => folder.write(answerName, answer({ id: 'another request' })));
    w.q.at(131_100, () => folder.write(answerName, `${JSON.stringify(withoutPod)}\n`));
    expect(await run(w, 132_000)).toBe(true);
    expect(settled).toBe(false);
    expect(folder.read(requestName)).not.toBeNull(); // still asking
    w.q.at(132_100, () => folder.write(answerName, answer({ killed: 0, detail: 'not fenced', error: 'kill 1: EPERM' })));
    expect(await run(w, 133_000)).toBe(true);
    expect(await asked.outcome).toBe(`pod ${asked.uid}'s sidecar could not fence it: kill 1: EPERM`);
    expect(folder.read(requestName)).toBeNull(); // the agent removed its request
  });

  it('a parent beating on its Lease only has no fence responder: the core does not ask, and a request would go unanswered', async () => {
    // Production's startHeartbeat answers fence requests only beside a local channel (the folder
    // they are written to), so the core asks only for parents with one (fence.ts requestFence).
    const w = world([{ type: 'hang', at: '2m', node: 'm1', key: 'kube-scheduler', duration: '2m' }]);
    expect(await run(w, 200_000)).toBe(true);
    const asked = w.logs.filter((l) => l.key === 'kube-scheduler' && l.kind === 'core' && /ParentHung: .* fencing it/.test(l.text));
    expect(asked).toEqual([]);
    expect(w.logs.some((l) => l.key === 'kube-scheduler' && (l.text.includes(FENCED) || /^fence of pod/.test(l.text)))).toBe(false);
    const unanswered = await askFence(w, 'kube-scheduler');
    expect(await run(w, 221_000)).toBe(true);
    expect(await unanswered.outcome).toMatch(NO_ANSWER);
  });
});
