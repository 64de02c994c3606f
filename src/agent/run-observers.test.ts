// observerFeed: the order and gating of what the observers hand the loop, the same code the
// simulator's model watches call (src/sim/lastseen.ts).
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { localBeatText } from '../channels/local.js';
import { FakeTime } from '../core/fake-time.test-helpers.js';
import type { Phase } from '../core/types.js';
import { type Actuators, Agent, type ObservedParent } from './agent.js';
import { type PodStatusLike, v1PodInfo } from './parents.js';
import { observerFeed } from './run-observers.js';

function setup() {
  const time = new FakeTime();
  // Actuators added since are never reached here: spread in untyped, as no-ops.
  const later = { fence: async () => ({ killed: 0, detail: 'not reached' }) };
  const activated: string[] = [];
  const actuators: Actuators = {
    ...later,
    capture: async (_p, pod) => ({ specHash: pod.specHash }),
    activate: async (p) => {
      activated.push(p.id);
    },
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
  const pods = new Map<string, ObservedParent<PodStatusLike>>([
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
  return { agent, feed, bad, verdicts, pods, time, activated };
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

  it('while the api-server is judged unreachable, a pod list names who may beat: a surge’s new pod is the parent’s', async () => {
    const { agent, feed, pods, time, activated, bad } = setup();
    let seq = 0;
    const write = (holder: string, holderUid: string, phase: Phase) =>
      feed.localFile(
        'kube-system_kube-apiserver.json',
        localBeatText(
          { node: 'n1', namespace: 'kube-system', key: 'kube-apiserver', role: 'parent' },
          {
            channel: 'local',
            holder,
            holderUid,
            role: 'parent',
            phase,
            sequence: ++seq,
            renewTime: `${new Date(time.wallNow()).toISOString().slice(0, 23)}000Z`,
          },
        ),
      );
    const state = () => agent.views()[0]!.state;
    feed.reachable(true);
    feed.podsListed();
    for (let i = 0; i < 4; i++) {
      write('a-n1', 'u1', 'Ready');
      await time.advance(2_000);
    }
    expect(state().state).toBe('Healthy');
    expect(state().checkpoint.stored).toBe(true); // a copy the Stopping below could activate

    // The probe gives up on a slow api-server; its pod watch still hears the surge's new pod.
    feed.reachable(false);
    seq = 0; // the new pod's writer starts its own count
    write('a-n1-new', 'u2', 'Starting'); // before the watch names it: held, not foreign yet
    await time.advance(1_000);
    pods.set('kube-system/kube-apiserver', {
      namespace: 'kube-system',
      key: 'kube-apiserver',
      pod: { metadata: { uid: 'u2', name: 'a-n1-new' } },
      labels: {},
      alsoListed: [{ uid: 'u1', name: 'a-n1' }],
    });
    feed.podsChanged();
    expect(state().pod?.uid).toBe('u1'); // identity only: the pod tracked stays the last full list's
    expect(state().pod?.alsoListed).toEqual([{ uid: 'u2', name: 'a-n1-new' }]);
    for (let i = 0; i < 3; i++) {
      write('a-n1-new', 'u2', 'Ready');
      await time.advance(2_000);
    }
    // The old pod's last beat is Stopping, while the new one beats Ready: no deliberate stop.
    const oldSeq = seq;
    seq = 100;
    write('a-n1', 'u1', 'Stopping');
    seq = oldSeq;
    write('a-n1-new', 'u2', 'Ready');
    await time.advance(2_000);
    expect(state().state).toBe('Healthy');
    expect(activated).toEqual([]);
    expect(bad).toEqual([]);
  });

  it('while unreachable, a pod list never takes away a pod the last full list named, nor adds a parent', () => {
    const { agent, feed, pods } = setup();
    feed.reachable(true);
    feed.podsListed();
    feed.reachable(false);
    pods.set('kube-system/kube-apiserver', { namespace: 'kube-system', key: 'kube-apiserver', pod: { metadata: { uid: 'u3', name: 'a-n1-3' } }, labels: {} });
    pods.set('kube-system/etcd', { namespace: 'kube-system', key: 'etcd', pod: { metadata: { uid: 'e1', name: 'etcd-n1' } }, labels: {} });
    feed.podsChanged();
    expect(agent.views().map((v) => v.id)).toEqual(['kube-system/kube-apiserver']);
    expect(agent.views()[0]!.state.pod).toMatchObject({ uid: 'u1', name: 'a-n1', alsoListed: [{ uid: 'u3', name: 'a-n1-3' }] });
    pods.delete('kube-system/kube-apiserver');
    feed.podsChanged();
    expect(agent.views()[0]!.state.pod).toMatchObject({ uid: 'u1', alsoListed: [{ uid: 'u3', name: 'a-n1-3' }] });
    expect(agent.views()[0]!.state.unscheduledSince).toBeNull();
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
