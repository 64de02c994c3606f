// observerFeed: the order and gating of what the observers hand the loop, the same code the
// simulator's model watches call (src/sim/lastseen.ts).
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { localBeatText } from '../channels/local.js';
import { FakeTime } from '../core/fake-time.test-helpers.js';
import { type Actuators, Agent } from './agent.js';
import { type PodStatusLike, v1PodInfo } from './parents.js';
import { observerFeed } from './run-observers.js';

function setup() {
  const time = new FakeTime();
  // Actuators added since are never reached here: spread in untyped, as no-ops.
  const later = { fence: async () => ({ killed: 0, detail: 'not reached' }) };
  const actuators: Actuators = {
    ...later,
    capture: async (_p, pod) => ({ specHash: pod.specHash }),
    activate: async () => {},
    retire: async () => {},
    collect: async () => {},
    readLive: async () => ({ beats: [] }),
    event: async () => {},
  };
  const agent = new Agent({
    node: 'n1',
    clock: time,
    timers: time,
    logger: pino({ level: 'silent' }),
    actuators,
    podInfo: (pod: PodStatusLike) => v1PodInfo(pod, 'h1'),
  });
  const pods = new Map([
    ['kube-system/kube-apiserver', { namespace: 'kube-system', key: 'kube-apiserver', pod: { metadata: { uid: 'u1', name: 'a-n1' } }, labels: {} }],
  ]);
  const bad: string[] = [];
  const verdicts: boolean[] = [];
  const feed = observerFeed({
    agent,
    node: 'n1',
    parents: () => pods,
    badInput: (source, reason) => bad.push(`${source}: ${reason}`),
    onVerdict: (ok) => verdicts.push(ok),
  });
  return { agent, feed, bad, verdicts };
}

describe('observerFeed', () => {
  it('hands pods over only once the pod watch listed and while the api-server is reachable', () => {
    const { agent, feed, verdicts } = setup();
    feed.reachable(true);
    expect(agent.views()).toEqual([]); // not listed yet: no word on what is scheduled here
    feed.podsListed();
    expect(agent.views().map((v) => v.id)).toEqual(['kube-system/kube-apiserver']);
    expect(agent.views()[0]!.state.pod?.uid).toBe('u1');
    feed.reachable(false);
    expect(agent.isApiReachable()).toBe(false);
    expect(verdicts).toEqual([true, false]);
  });

  it('a reachable verdict hands the pods over again at once, before any watch event', () => {
    const { agent, feed } = setup();
    feed.podsListed(); // listed while unreachable: held back
    expect(agent.views()).toEqual([]);
    feed.reachable(true);
    expect(agent.views().map((v) => v.id)).toEqual(['kube-system/kube-apiserver']);
  });

  it('parses local files and refuses the malformed and the foreign, with a reason', () => {
    const { feed, bad } = setup();
    feed.localFile('not-a-beat.txt', '{}');
    feed.localFile('kube-system_kube-apiserver.json', '{"version":1');
    const other = localBeatText(
      { node: 'n2', namespace: 'kube-system', key: 'kube-apiserver', role: 'parent' },
      { channel: 'local', holder: 'a-n2', holderUid: 'u2', role: 'parent', phase: 'Ready', sequence: 1, renewTime: '2026-12-04T10:00:00.000000Z' },
    );
    feed.localFile('kube-system_kube-apiserver.json', other);
    expect(bad).toEqual([
      'local: not-a-beat.txt: not a heartbeat file name (<namespace>_<key>.json)',
      expect.stringMatching(/^local: kube-system_kube-apiserver\.json: not JSON/),
      expect.stringMatching(/^local: kube-system_kube-apiserver\.json: node is "n2", not this node "n1"/),
    ]);
  });
});
