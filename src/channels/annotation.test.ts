import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FakeTime } from '../core/fake-time.test-helpers.js';
import { ANNOTATION_SEQUENCE } from '../core/names.js';
import type { Beat } from '../core/types.js';
import type { BeatClient, JsonPatchOp } from '../kube/beat-client.js';
import { applyAnnotationOps } from '../sim/beat-client.js';
import { AnnotationChannel, annotationPatch, beatFromPod, conditionalAnnotationPatch } from './annotation.js';

// biome-ignore lint/suspicious/noExplicitAny: the tables below break arbitrary fields of a JSON document on purpose
type Loose = Record<string, any>;

const uid = '1b4e28ba-2fa1-11d2-883f-0016d3cca427';
const beat: Beat = {
  channel: 'annotation',
  holder: 'api-1',
  holderUid: uid,
  role: 'parent',
  phase: 'Starting',
  sequence: 3,
  renewTime: '2026-12-02T10:00:01.000001Z',
};

function pod(edit: (p: Loose) => void = () => {}): unknown {
  const p: Loose = {
    metadata: { name: 'api-1', namespace: 'kube-system', uid, annotations: { other: 'x', ...annotationPatch(beat).metadata.annotations } },
    spec: { nodeName: 'n1', containers: [] },
  };
  edit(p);
  return p;
}

describe('beatFromPod', () => {
  it('reads the beat the patch wrote', () => {
    expect(annotationPatch(beat)).toEqual({
      metadata: {
        annotations: {
          'lastseen.dev/last-seen': '2026-12-02T10:00:01.000001Z',
          'lastseen.dev/phase': 'Starting',
          'lastseen.dev/sequence': '3',
          'lastseen.dev/role': 'parent',
          'lastseen.dev/holder-uid': uid,
          'lastseen.dev/unprobed': 'false',
          'lastseen.dev/unanswered': 'false',
          'lastseen.dev/unanswered-after-ready': 'false',
          'lastseen.dev/unanswered-starved': 'false',
        },
      },
    });
    expect(beatFromPod(pod(), 'n1')).toEqual({ ok: true, beat });
  });

  it('marks an unprobed Ready (--probe none) and reads it back; absent reads as probed', () => {
    const unprobed = { ...beat, phase: 'Ready' as const, unprobed: true };
    const p = pod((x) => Object.assign(x.metadata.annotations, annotationPatch(unprobed).metadata.annotations));
    expect(annotationPatch(unprobed).metadata.annotations['lastseen.dev/unprobed']).toBe('true');
    expect(beatFromPod(p, 'n1')).toEqual({ ok: true, beat: unprobed });
    const older = pod((x) => {
      Object.assign(x.metadata.annotations, annotationPatch({ ...beat, phase: 'Ready' }).metadata.annotations);
      delete x.metadata.annotations['lastseen.dev/unprobed'];
    });
    expect(beatFromPod(older, 'n1')).toEqual({ ok: true, beat: { ...beat, phase: 'Ready' } });
  });

  it('an unanswered beat says whether its process was Ready before, read back; absent (an older writer) reads as not saying', () => {
    for (const afterReady of [true, false]) {
      const hung = { ...beat, unanswered: true, afterReady };
      const p = pod((x) => Object.assign(x.metadata.annotations, annotationPatch(hung).metadata.annotations));
      expect(beatFromPod(p, 'n1')).toEqual({ ok: true, beat: hung });
    }
    const older = pod((x) => {
      Object.assign(x.metadata.annotations, annotationPatch({ ...beat, unanswered: true }).metadata.annotations);
      delete x.metadata.annotations['lastseen.dev/unanswered-after-ready'];
    });
    expect(beatFromPod(older, 'n1')).toEqual({ ok: true, beat: { ...beat, unanswered: true } });
  });

  it('an unanswered beat says whether its process waited for a CPU, read back; absent reads as not starved', () => {
    const starved = { ...beat, unanswered: true, afterReady: true, starved: true };
    const p = pod((x) => Object.assign(x.metadata.annotations, annotationPatch(starved).metadata.annotations));
    expect(annotationPatch(starved).metadata.annotations['lastseen.dev/unanswered-starved']).toBe('true');
    expect(beatFromPod(p, 'n1')).toEqual({ ok: true, beat: starved });
    const older = pod((x) => {
      Object.assign(x.metadata.annotations, annotationPatch(starved).metadata.annotations);
      delete x.metadata.annotations['lastseen.dev/unanswered-starved'];
    });
    expect(beatFromPod(older, 'n1')).toEqual({ ok: true, beat: { ...beat, unanswered: true, afterReady: true } });
    // Only beside unanswered: a stray "true" on an answered beat means nothing.
    const stray = pod((x) => Object.assign(x.metadata.annotations, annotationPatch(beat).metadata.annotations, { 'lastseen.dev/unanswered-starved': 'true' }));
    expect(beatFromPod(stray, 'n1')).toEqual({ ok: true, beat });
  });

  it('declares the interval as an annotation, read back', () => {
    const declared = { ...beat, intervalMs: 2500 };
    const p = pod((x) => Object.assign(x.metadata.annotations, annotationPatch(declared).metadata.annotations));
    expect(annotationPatch(declared).metadata.annotations['lastseen.dev/interval-ms']).toBe('2500');
    expect(beatFromPod(p, 'n1')).toEqual({ ok: true, beat: declared });
    const bad = pod((x) => (x.metadata.annotations['lastseen.dev/interval-ms'] = '99999999999999'));
    expect(beatFromPod(bad, 'n1')).toMatchObject({ ok: false });
  });

  it.each<[string, unknown, RegExp]>([
    ['undefined', undefined, /not a Pod/],
    ['an array', [], /not a Pod/],
    ['no name', pod((p) => delete p.metadata.name), /pod name is missing/],
    ['another node', pod((p) => (p.spec.nodeName = 'n2')), /"n2", not this node "n1"/],
    ['unscheduled', pod((p) => delete p.spec.nodeName), /nodeName is missing/],
    ['no beat yet', pod((p) => (p.metadata.annotations = { other: 'x' })), /no lastseen.dev\/last-seen/],
    ['annotations not an object', pod((p) => (p.metadata.annotations = 'x')), /no lastseen.dev\/last-seen/],
    ['last-seen truncated', pod((p) => (p.metadata.annotations['lastseen.dev/last-seen'] = '2026-12-02T10:00')), /six fractional digits/],
    ['last-seen 1960 (past)', pod((p) => (p.metadata.annotations['lastseen.dev/last-seen'] = '1960-01-01T00:00:00.000000Z')), /before the Unix epoch/],
    ['last-seen Feb 29 2027', pod((p) => (p.metadata.annotations['lastseen.dev/last-seen'] = '2027-02-29T00:00:00.000000Z')), /not a real instant/],
    ['bad phase', pod((p) => (p.metadata.annotations['lastseen.dev/phase'] = 'ready')), /phase is "ready"/],
    ['sequence huge', pod((p) => (p.metadata.annotations['lastseen.dev/sequence'] = '9007199254740993')), /impossibly large/],
    ['sequence hex', pod((p) => (p.metadata.annotations['lastseen.dev/sequence'] = '0x10')), /not a positive integer/],
    ['role missing', pod((p) => delete p.metadata.annotations['lastseen.dev/role']), /role is missing/],
    ['annotations copied from another pod', pod((p) => (p.metadata.uid = 'ffffffff-2fa1-11d2-883f-0016d3cca427')), /names another pod/],
  ])('refuses %s', (_n, input, reason) => {
    const r = beatFromPod(input, 'n1');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });
});

// ---- the writer: late writes ----

/** A timed-out request, as the light client reports it (classifyKubeError: unreachable). */
const timeout = () => Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' });

/**
 * A model api-server for one pod's annotations that can "freeze": a write sent while frozen times
 * out at the client but is kept, and applied later (`release`) in whatever order the test picks,
 * as a server that finishes abandoned requests would. Applying follows RFC 6902 for the two
 * operations the writer sends (a failed `test` applies nothing: 422).
 */
class ModelServer {
  annotations: Record<string, string> = {};
  frozen = false;
  queued: Array<() => void> = [];
  /** The sequence annotation after every applied write, in order. */
  history: number[] = [];
  requests: string[] = [];

  private apply(kind: 'merge' | 'json', body: unknown): void {
    if (kind === 'merge') {
      Object.assign(this.annotations, (body as { metadata: { annotations: Record<string, string> } }).metadata.annotations);
    } else {
      // As the simulator's model api-server applies it (a failed test: 422, nothing applied).
      this.annotations = applyAnnotationOps(this.annotations, body as JsonPatchOp[]);
    }
    this.history.push(Number(this.annotations[ANNOTATION_SEQUENCE]));
  }

  private send(kind: 'merge' | 'json', body: unknown): Promise<unknown> {
    this.requests.push(kind);
    if (!this.frozen) {
      this.apply(kind, body);
      return Promise.resolve({});
    }
    this.queued.push(() => {
      try {
        this.apply(kind, body);
      } catch {
        // Refused when it is finally applied: the client left long ago.
      }
    });
    return Promise.reject(timeout());
  }

  /** Thaw, applying the queued writes in `order` (indices into the queue). */
  release(order: number[]): void {
    this.frozen = false;
    const q = this.queued;
    this.queued = [];
    for (const i of order) q[i]?.();
  }

  client(): BeatClient {
    const no = () => Promise.reject(new Error('not used'));
    return {
      readLease: no,
      createLease: no,
      replaceLease: no,
      mergePatchLease: no,
      readPod: () => {
        this.requests.push('read');
        return this.frozen ? Promise.reject(timeout()) : Promise.resolve({ metadata: { annotations: { ...this.annotations } } } as never);
      },
      mergePatchPod: ({ body }) => this.send('merge', body),
      jsonPatchPod: ({ body }) => this.send('json', body),
      close: () => {},
    };
  }
}

/** Beats 1.., `frozenRounds` of them during a freeze, the queue applied in `order`, then `after` more. */
async function beatThroughFreeze(order: number[], after = 3): Promise<ModelServer> {
  const server = new ModelServer();
  const clock = new FakeTime({ io: true });
  const ch = new AnnotationChannel({ namespace: 'kube-system', podName: 'api-1', makeClient: () => server.client(), clock, random: () => 0.5 });
  let sequence = 0;
  const round = async () => {
    sequence++;
    // deadline now: one attempt per round, as when the interval is short against the timeout.
    await ch.write({ ...beat, sequence, renewTime: `2026-12-02T10:00:${String(sequence).padStart(2, '0')}.000001Z` }, clock.now()).catch(() => {});
  };
  for (let i = 0; i < 3; i++) await round();
  server.frozen = true;
  for (let i = 0; i < order.length; i++) await round();
  server.release(order);
  for (let i = 0; i < after; i++) await round();
  return server;
}

const backwards = (h: number[]) => h.flatMap((s, i) => (i > 0 && s < (h[i - 1] ?? 0) ? [`${h[i - 1]} -> ${s}`] : []));

describe('AnnotationChannel: writes that land late', () => {
  it('rounds 4, 5, 6 queued in a frozen api-server and applied 6, 4, 5: only the first applies, the sequence never goes back', async () => {
    const server = await beatThroughFreeze([2, 0, 1]);
    expect(backwards(server.history)).toEqual([]);
    // 1-3 before, 6 from the queue (4 and 5 fail their test), then 7-9 after a re-read.
    expect(server.history).toEqual([1, 2, 3, 6, 7, 8, 9]);
    expect(server.requests.filter((r) => r === 'read')).toHaveLength(1);
  });

  it('any order of up to 8 queued rounds: the stored sequence never goes back, and the writer goes on after', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }).chain((n) => fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n })),
        async (order) => {
          const server = await beatThroughFreeze(order);
          expect(backwards(server.history)).toEqual([]);
          expect(server.history.at(-1)).toBe(3 + order.length + 3);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a sequence written by someone else: one re-read, then the writer writes on top of it', async () => {
    const server = new ModelServer();
    const clock = new FakeTime({ io: true });
    const ch = new AnnotationChannel({ namespace: 'kube-system', podName: 'api-1', makeClient: () => server.client(), clock });
    await ch.write({ ...beat, sequence: 1 }, clock.now());
    server.annotations[ANNOTATION_SEQUENCE] = '999';
    await ch.write({ ...beat, sequence: 2 }, clock.now());
    await ch.write({ ...beat, sequence: 3 }, clock.now());
    expect(server.requests).toEqual(['merge', 'json', 'read', 'json', 'json']);
    expect(server.annotations[ANNOTATION_SEQUENCE]).toBe('3');
  });

  it('the annotation gone: the re-read finds none and the next write is unconditional', async () => {
    const server = new ModelServer();
    const clock = new FakeTime({ io: true });
    const ch = new AnnotationChannel({ namespace: 'kube-system', podName: 'api-1', makeClient: () => server.client(), clock });
    await ch.write({ ...beat, sequence: 1 }, clock.now());
    server.annotations = {};
    await ch.write({ ...beat, sequence: 2 }, clock.now());
    expect(server.requests).toEqual(['merge', 'json', 'read', 'merge']);
    expect(server.annotations[ANNOTATION_SEQUENCE]).toBe('2');
  });

  it('the conditional patch escapes the keys as JSON pointers and tests the sequence first', () => {
    const ops = conditionalAnnotationPatch({ ...beat, sequence: 8 }, '7');
    expect(ops[0]).toEqual({ op: 'test', path: '/metadata/annotations/lastseen.dev~1sequence', value: '7' });
    expect(ops.slice(1).every((o) => o.op === 'add' && o.path.startsWith('/metadata/annotations/') && !o.path.slice(22).includes('/'))).toBe(true);
    expect(ops).toContainEqual({ op: 'add', path: '/metadata/annotations/lastseen.dev~1sequence', value: '8' });
  });
});
