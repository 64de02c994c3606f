// The beat rule as a table: each row feeds a sequence of beats (with the pods listed at that moment)
// to judgeBeat and names the verdict expected for each.
import { describe, expect, it } from 'vitest';
import { type BeatTrust, type BeatVerdict, emptyTrust, type Holder, judgeBeat, leadingBeat, takePending } from './beats.js';
import type { Beat, Channel, Phase } from './types.js';

const POD: Holder = { uid: 'u1', name: 'api-n1' };
const NEXT: Holder = { uid: 'u2', name: 'api-n1-new' };

function b(channel: Channel, sequence: number, over: Partial<Beat> = {}): Beat {
  return { channel, holder: POD.name, holderUid: POD.uid, role: 'parent', phase: 'Ready', sequence, renewTime: `t${sequence}`, ...over };
}

type Step = [beat: Beat, listed: Holder[] | null, verdict: BeatVerdict['kind'] | `refused:${'foreign' | 'frozen'}`];

function run(steps: Step[], t: BeatTrust = emptyTrust()): { trust: BeatTrust; got: string[]; reports: boolean[] } {
  const got: string[] = [];
  const reports: boolean[] = [];
  steps.forEach(([beat, listed], i) => {
    const r = judgeBeat(t, beat, listed, 1000 + i * 100);
    t = r.trust;
    got.push(r.verdict.kind === 'refused' ? `refused:${r.verdict.why}` : r.verdict.kind);
    if (r.verdict.kind === 'refused') reports.push(r.verdict.report);
  });
  return { trust: t, got, reports };
}

const L = [POD];
const table: Array<{ name: string; steps: Step[] }> = [
  {
    name: 'the listed pod: first sighting per channel is a baseline, then each new round counts once',
    steps: [
      [b('local', 5), L, 'baseline'],
      [b('local', 6), L, 'change'],
      [b('lease', 6), L, 'baseline'],
      [b('lease', 7), L, 'change'],
      [b('local', 7), L, 'old'],
    ],
  },
  {
    name: 'another holder uid is foreign on every channel (the first beat is held until the next pod list)',
    steps: [
      [b('lease', 1), L, 'baseline'],
      [b('lease', 2, { holderUid: '00000000-0000-0000-0000-000000000000' }), L, 'unlisted'],
      [b('lease', 3, { holderUid: '00000000-0000-0000-0000-000000000000' }), L, 'refused:foreign'],
      [b('local', 3, { holderUid: '00000000-0000-0000-0000-000000000000' }), L, 'refused:foreign'],
      [b('annotation', 4, { holderUid: '00000000-0000-0000-0000-000000000000' }), L, 'refused:foreign'],
    ],
  },
  {
    name: "another holder name with the pod's uid is foreign",
    steps: [
      [b('local', 1), L, 'baseline'],
      [b('local', 2, { holder: 'intruder' }), L, 'unlisted'],
      [b('local', 3, { holder: 'intruder' }), L, 'refused:foreign'],
    ],
  },
  {
    name: "a run's first round surfacing late on another channel is that round again, not a writer restart",
    steps: [
      [b('local', 5), L, 'baseline'],
      [b('lease', 5), L, 'baseline'],
      [b('local', 6), L, 'change'],
      [b('lease', 6), L, 'old'],
      // The writer restarts (a new run: sequence 1, a new renew time), seen on the local file.
      [b('local', 1, { renewTime: 'r2-1' }), L, 'change'],
      [b('local', 2, { renewTime: 'r2-2' }), L, 'change'],
      // Its first Lease write, queued in a frozen api-server, lands after the later rounds.
      [b('lease', 1, { renewTime: 'r2-1' }), L, 'old'],
      [b('local', 3, { renewTime: 'r2-3' }), L, 'change'],
      // A real restart again (another round 1) still counts.
      [b('local', 1, { renewTime: 'r3-1' }), L, 'change'],
    ],
  },
  {
    name: "after a reboot the new run's round 1 counts on the Lease though the empty local folder showed it first",
    steps: [
      [b('lease', 41), L, 'baseline'], // the last run's, left in the api-server
      [b('local', 1, { renewTime: 'r2-1' }), L, 'baseline'], // a first sighting: proves nothing
      [b('lease', 1, { renewTime: 'r2-1' }), L, 'change'], // the same round, a change of the Lease
      [b('local', 2, { renewTime: 'r2-2' }), L, 'change'],
    ],
  },
  {
    name: 'a frozen sequence whose renew time moves is not a beat',
    steps: [
      [b('lease', 10), L, 'baseline'],
      [b('lease', 11), L, 'change'],
      [b('lease', 11, { renewTime: 'later' }), L, 'refused:frozen'],
      [b('lease', 11, { renewTime: 'later still' }), L, 'refused:frozen'],
      [b('lease', 12), L, 'change'],
    ],
  },
  {
    name: 'a sequence going down is refused; a restart at 1 counts',
    steps: [
      [b('local', 20), L, 'baseline'],
      [b('local', 21), L, 'change'],
      [b('local', 19), L, 'refused:frozen'],
      [b('local', 18), L, 'refused:frozen'],
      [b('local', 17), L, 'refused:frozen'],
      [b('local', 1), L, 'change'],
      [b('local', 2), L, 'change'],
    ],
  },
  {
    name: 'a late Lease write older than what the local file showed is not fresh (frozen api-server)',
    steps: [
      [b('local', 30), L, 'baseline'],
      [b('lease', 30), L, 'baseline'],
      [b('local', 37), L, 'change'],
      [b('lease', 37), L, 'old'],
      [b('local', 50), L, 'change'],
      [b('lease', 38), L, 'old'],
    ],
  },
  {
    name: "after a reboot the Lease's higher numbers from the last run do not hold the new run back",
    steps: [
      [b('lease', 400), L, 'baseline'],
      [b('local', 1), L, 'baseline'],
      [b('local', 2), L, 'change'],
      [b('lease', 3), L, 'restart'],
      [b('local', 3), L, 'old'],
      [b('local', 4), L, 'change'],
    ],
  },
  {
    name: 'two live pods of one key (a surge rollout): both are the parent',
    steps: [
      [b('lease', 1), [POD, NEXT], 'baseline'],
      [b('lease', 2), [POD, NEXT], 'change'],
      [b('lease', 1, { holder: NEXT.name, holderUid: NEXT.uid }), [POD, NEXT], 'change'],
      [b('lease', 3, { phase: 'Stopping' }), [POD, NEXT], 'change'],
    ],
  },
  {
    name: "a former pod no longer listed stays the parent's (a rollout's old pod, a deleted pod's Stopping)",
    steps: [
      [b('lease', 1), L, 'baseline'],
      [b('lease', 2), L, 'change'],
      [b('lease', 3, { phase: 'Stopping' }), [NEXT], 'change'],
    ],
  },
  {
    name: 'no pod known: the first holder to change is the parent, provisionally; another is foreign',
    steps: [
      [b('local', 7, { holderUid: 'left-over', holder: 'old-pod' }), null, 'baseline'],
      [b('local', 1), null, 'change'],
      [b('local', 8, { holderUid: 'left-over', holder: 'old-pod' }), null, 'unlisted'],
      [b('local', 2), null, 'change'],
      [b('local', 9, { holderUid: 'left-over', holder: 'old-pod' }), null, 'refused:foreign'],
    ],
  },
  {
    name: 'a uid-less writer matches the listed pod by name',
    steps: [
      [b('local', 1, { holderUid: '' }), L, 'baseline'],
      [b('local', 2, { holderUid: '' }), L, 'change'],
    ],
  },
];

describe('judgeBeat', () => {
  for (const row of table) {
    it(row.name, () => {
      expect(run(row.steps).got).toEqual(row.steps.map((s) => s[2]));
    });
  }

  it('reports a refused holder once, and each refusal carries a message naming it', () => {
    const foreign = (seq: number) => b('lease', seq, { holderUid: 'other-uid' });
    const { reports } = run([
      [b('lease', 1), L, 'baseline'],
      [foreign(2), L, 'unlisted'],
      [foreign(3), L, 'refused:foreign'],
      [foreign(4), L, 'refused:foreign'],
      [foreign(5), L, 'refused:foreign'],
    ]);
    expect(reports).toEqual([true, false, false]);
    const r = judgeBeat(run([[b('lease', 1), L, 'baseline']]).trust, foreign(2), L, 0);
    expect(r.verdict.kind).toBe('unlisted');
    const again = judgeBeat(r.trust, foreign(3), L, 0);
    expect(again.verdict.kind === 'refused' && again.verdict.message).toMatch(/other-uid\/api-n1 is not from a pod the api-server lists.*u1\/api-n1/);
  });

  it("a new pod's beat that came before the pod list naming it is taken when that list arrives; a list without it drops it", () => {
    const { trust } = run([
      [b('lease', 5), L, 'baseline'],
      [b('lease', 1, { holder: NEXT.name, holderUid: NEXT.uid }), L, 'unlisted'],
    ]);
    const held = takePending(copy(trust), [NEXT]);
    expect(held?.holderUid).toBe(NEXT.uid);
    const r = judgeBeat(trust, held!, [NEXT], 5000);
    expect(r.verdict.kind).toBe('change');
    expect(takePending(copy(trust), L)).toBeNull();
  });

  it('the leading phase: Ready of one live pod outweighs the Stopping of the other; alone, Stopping counts', () => {
    let t = emptyTrust();
    const feed = (beat: Beat, at: number) => {
      t = judgeBeat(t, beat, [POD, NEXT], at).trust;
    };
    feed(b('lease', 1), 0);
    feed(b('lease', 2), 100);
    feed(b('lease', 1, { holder: NEXT.name, holderUid: NEXT.uid }), 200);
    feed(b('lease', 3, { phase: 'Stopping' }), 300);
    const lead = (now: number) => leadingBeat(t, now, 1000);
    expect(lead(300)).toMatchObject({ phase: 'Ready' satisfies Phase, holderUid: NEXT.uid });
    // The new pod's last beat is older than the window: the old pod's Stopping is all there is.
    expect(lead(1250)).toMatchObject({ phase: 'Stopping', holderUid: POD.uid });
  });
});

function copy(t: BeatTrust): BeatTrust {
  return structuredClone(t);
}
