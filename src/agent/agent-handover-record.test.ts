// A hand-over's deadline is durable before its checkpoint is retired (docs/architecture.md,
// docs/decisions/0002-hand-over.md): the agent with production's HandoverRecords over a store that fails.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { FakeTime } from '../core/fake-time.test-helpers.js';
import type { Beat, Phase } from '../core/types.js';
import { parsePolicyText } from '../policy/policy.js';
import { type Actuators, Agent } from './agent.js';
import { HandoverRecords, type HandoverStore } from './handovers.js';
import { type PodStatusLike, v1PodInfo } from './parents.js';

const policy = (() => {
  const r = parsePolicyText(
    'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults: { interval: 1s, window: 3s, startupGrace: 4s, handoverTimeout: 5s, handoverBackoff: { initial: 2s, max: 8s } }\n',
  );
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
})();

describe('the hand-over record guards the retire', () => {
  it('a failed write of the record is a failed retire: the checkpoint stays until the record is on disk', async () => {
    const time = new FakeTime();
    const calls: string[] = [];
    let diskFull = false;
    const texts: string[] = [];
    const store: HandoverStore = {
      where: 'test:handovers.json',
      read: async () => null,
      write: async (text) => {
        if (diskFull) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
        texts.push(text);
      },
    };
    // Actuators added since (a fence) are never reached by this story: spread in untyped, as no-ops.
    const later = { fence: async () => ({ killed: 0, detail: 'not reached' }) };
    const actuators: Actuators = {
      ...later,
      capture: async (_p, pod) => ({ specHash: pod.specHash }),
      activate: async () => void calls.push('activate'),
      retire: async () => void calls.push('retire'),
      collect: async () => void calls.push('collect'),
      readLive: async () => ({ beats: [] }),
      event: async (_p, e) => void calls.push(`event:${e.reason}`),
    };
    const agent = new Agent({
      node: 'n1',
      clock: time,
      timers: time,
      logger: pino({ level: 'silent' }),
      actuators,
      podInfo: (pod: PodStatusLike) => v1PodInfo(pod, 'h-u1'),
      policy,
      handovers: new HandoverRecords(store, () => 1_000_000 + time.now()),
    });
    let seq = 0;
    const beat = (phase: Phase): Beat => ({
      channel: 'lease',
      holder: 'apiserver-n1',
      holderUid: 'u1',
      role: 'parent',
      phase,
      sequence: ++seq,
      renewTime: new Date(1_000_000 + time.now()).toISOString(),
    });
    agent.restore('kube-system', 'kube-apiserver', { stored: true, active: true, specHash: 'h-u1' });
    agent.api(true);
    agent.podsObserved(
      new Map([
        ['kube-system/kube-apiserver', { namespace: 'kube-system', key: 'kube-apiserver', pod: { metadata: { uid: 'u1', name: 'apiserver-n1' } }, labels: {} }],
      ]),
    );
    agent.beat('kube-system', 'kube-apiserver', beat('Starting')); // baseline
    await time.advance(500);
    diskFull = true;
    agent.beat('kube-system', 'kube-apiserver', beat('Starting')); // a fresh beat of a starting parent: hand over
    await time.advance(100);
    expect(calls).not.toContain('retire');
    // The core heard of the failed retire: the checkpoint is kept active.
    expect(agent.views()[0]!.state.checkpoint.active).toBe(true);
    // Space again: a later attempt writes the record first, then retires.
    diskFull = false;
    for (let i = 0; i < 40 && !calls.includes('retire'); i++) {
      agent.beat('kube-system', 'kube-apiserver', beat('Starting'));
      await time.advance(500);
    }
    expect(calls).toContain('retire');
    expect(texts.at(-1)).toMatch(/"kube-system\/kube-apiserver":\{"deadlineWall":/);
    await agent.stop();
  });
});
