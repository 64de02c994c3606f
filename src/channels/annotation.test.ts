import { describe, expect, it } from 'vitest';
import type { Beat } from '../core/types.js';
import { annotationPatch, beatFromPod } from './annotation.js';

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
