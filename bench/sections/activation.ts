// 1 + 2. Activation and retire delays, end to end: `lastseen agent` and `lastseen heartbeat` as
// processes (from the bundle) against the real kube-apiserver, interval 250ms, window 1s.
//
// Activation delay = manifest seen in the manifest dir − (the agent's own last-beat time + window).
// The agent's last-beat time is `lastSeen` from its NodeCheckpoint status: its monotonic
// observation of the last beat change (lastChangeAt), converted to wall time by the agent itself.
// Retire delay = manifest seen gone − first beat of the restarted heartbeat seen written (by our own
// watch on the Lease / pod, or inotify on the local file).
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ControlPlane } from '../lib/cp.js';
import { createNamespace, createNode, createParentPod, nodeCheckpointParents } from '../lib/kube.js';
import { agentArgs, lastseen, type Pair, type Proc, tempDirs, writePolicy } from '../lib/procs.js';
import { progress, type Summary, sleep, summarize, waitFor } from '../lib/util.js';
import { BeatWatch, type Channel, PathWatch } from '../lib/watch.js';

const KEY = 'bench';
export const INTERVAL_MS = 250;
export const WINDOW_MS = 1000;
export const LOCAL_POLL_MS = 200;
const POLICY = (channel: Channel) =>
  `{ interval: ${INTERVAL_MS}ms, window: ${WINDOW_MS}ms, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, handoverBackoff: { initial: 1s, max: 4s }, channels: [${channel}] }`;

export interface ActivationFigures {
  channel: Channel;
  trials: number;
  failures: string[];
  /** manifest landed − (agent's last beat + window) */
  activationMs: Summary;
  /** manifest landed − SIGKILL of the heartbeat */
  fromKillMs: Summary;
  /** agent's last-beat time − our own sighting of that beat (watch/inotify); the agent's observation lag */
  agentLagMs: Summary;
  /** breakdown from the agent's logs: expiry → transition to Silent (timer), Silent → "activating checkpoint" (live read), → manifest landed (write) */
  expiryToSilentMs: Summary;
  silentToActivateMs: Summary;
  activateToLandedMs: Summary;
  /** manifest gone − first beat of the restarted heartbeat seen written */
  retireMs: Summary;
  raw: { activation: number[]; retire: number[] };
}

function logTime(l: Record<string, unknown>): number {
  return typeof l.time === 'number' ? l.time : Number.NaN;
}

/** `pair`: run agent and heartbeat on that Node binary and bundle (runtime section); `tag` keeps its node apart. */
export async function activation(cp: ControlPlane, channel: Channel, trials: number, pair?: Pair, tag = ''): Promise<ActivationFigures> {
  const kc = cp.kc();
  const ns = await createNamespace(kc, `act-${channel}${tag}`);
  const node = `act-${channel}${tag}-node`;
  const dirs = await tempDirs();
  await writePolicy(dirs.policy, POLICY(channel));
  await createNode(kc, node);
  const pod = await createParentPod(kc, ns, node, KEY, undefined, { ready: true });
  const manifest = new PathWatch(await mkdirp(dirs.manifests), `lastseen-${ns}-${KEY}.json`);
  const beats = new BeatWatch({ channel, kc, node, namespace: ns, key: KEY, heartbeatDir: dirs.heartbeats });
  const agent = lastseen(
    agentArgs({
      node,
      namespace: ns,
      kubeconfig: cp.adminKubeconfig,
      dirs,
      extra: ['--api-probe', '500ms', '--local-poll', `${LOCAL_POLL_MS}ms`, '--watchdog', '10s'],
    }),
    'bundle',
    pair,
  );
  const hbArgs = [
    'heartbeat',
    ...['--node', node, '--pod-name', pod.name, '--namespace', ns, '--pod-uid', pod.uid, '--parent-key', KEY],
    ...['--channels', channel, '--interval', `${INTERVAL_MS}ms`, '--probe', 'none', '--heartbeat-dir', dirs.heartbeats, '--kubeconfig', cp.adminKubeconfig],
  ];
  const parentId = `${ns}/${KEY}`;
  const transitions = (p: Proc, after: number) => p.logs.filter((l) => l.msg === 'transition' && l.parent === parentId && logTime(l) >= after);
  const r = {
    activation: [] as number[],
    fromKill: [] as number[],
    lag: [] as number[],
    silent: [] as number[],
    decide: [] as number[],
    write: [] as number[],
    retire: [] as number[],
  };
  const failures: string[] = [];
  let hb: Proc | null = null;
  try {
    await waitFor(() => agent.logs.some((l) => l.msg === 'agent started'), 'the agent to start', 60_000);
    for (let trial = 0; trial <= trials; trial++) {
      try {
        const started = Date.now();
        const first = beats.next(30_000);
        hb = lastseen(hbArgs, 'bundle', pair);
        const firstBeat = await first;
        if (trial > 0) {
          const gone = await manifest.wait(false, 30_000);
          r.retire.push(gone - firstBeat);
        }
        if (trial === trials) break;
        if (trial === 0) await waitFor(() => existsSync(join(dirs.state, 'checkpoints', `${ns}_${KEY}`, 'meta.json')), 'the first capture', 60_000);
        await waitFor(() => transitions(agent, started).some((l) => l.to === 'Healthy'), 'the parent to be Healthy', 30_000);
        await sleep(4 * INTERVAL_MS); // steady beats before the kill
        // SIGKILL synchronously on the next beat we see written: no Stopping beat, no later beat.
        const h = hb;
        const killed = new Promise<{ beatT: number; killT: number }>((resolve) =>
          beats.onNext((beatT) => {
            h.child.kill('SIGKILL');
            resolve({ beatT, killT: Date.now() });
          }),
        );
        const { beatT, killT } = await killed;
        await hb.exited;
        hb = null;
        const landed = await manifest.wait(true, 30_000);
        const st = await waitFor(
          async () => (await nodeCheckpointParents(kc, node)).find((p) => p.namespace === ns && p.key === KEY && p.state === 'Active' && p.lastSeen),
          'NodeCheckpoint status Active',
          30_000,
          100,
        );
        const agentLast = Date.parse(st.lastSeen!);
        const expiry = agentLast + WINDOW_MS;
        r.activation.push(landed - expiry);
        r.fromKill.push(landed - killT);
        r.lag.push(agentLast - beatT);
        const silentL = transitions(agent, killT).find((l) => l.to === 'Silent');
        const actL = agent.logs.find((l) => l.msg === 'activating checkpoint' && l.parent === parentId && logTime(l) >= killT);
        if (silentL) r.silent.push(logTime(silentL) - expiry);
        if (silentL && actL) r.decide.push(logTime(actL) - logTime(silentL));
        if (actL) r.write.push(landed - logTime(actL));
      } catch (e) {
        failures.push(`trial ${trial}: ${(e as Error).message}`);
        progress(`activation ${channel} trial ${trial} failed: ${(e as Error).message}`);
        if (hb) await hb.stop('SIGKILL');
        hb = null;
        if (failures.length > 3) break;
      }
    }
  } finally {
    if (hb) await hb.stop('SIGKILL');
    await agent.stop('SIGTERM');
    manifest.close();
    await beats.close();
  }
  return {
    channel,
    trials: r.activation.length,
    failures,
    activationMs: summarize(r.activation),
    fromKillMs: summarize(r.fromKill),
    agentLagMs: summarize(r.lag),
    expiryToSilentMs: summarize(r.silent),
    silentToActivateMs: summarize(r.decide),
    activateToLandedMs: summarize(r.write),
    retireMs: summarize(r.retire),
    raw: { activation: r.activation, retire: r.retire },
  };
}

async function mkdirp(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  return dir;
}
