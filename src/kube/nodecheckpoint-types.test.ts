// The NodeCheckpoint's status stays well inside etcd's object limit however many parents a node has.
import { describe, expect, it } from 'vitest';
import { MAX_STATUS_PARENTS, type ParentStatus, summarize } from './nodecheckpoint-types.js';

function parent(i: number, state: string): ParentStatus {
  return {
    namespace: 'kube-system',
    key: `p${String(i).padStart(4, '0')}`,
    state,
    phase: 'Ready',
    lastSeen: '2026-12-04T10:00:00.000Z',
    checkpointStored: true,
    checkpointActive: state === 'Active',
    reason: 'Ready',
    message: 'the parent reports Ready',
    lastTransitionTime: '2026-12-04T09:00:00.000Z',
    handoverAttempts: 0,
    policyOverrides: [],
  } as ParentStatus;
}

describe('summarize', () => {
  it(`lists at most ${MAX_STATUS_PARENTS} parents, the ones not Healthy first, keeps the counts of all, and says so`, () => {
    const parents = Array.from({ length: 1200 }, (_, i) => parent(i, i % 100 === 7 ? 'Active' : 'Healthy'));
    const s = summarize('n1', parents, [], '2026-12-04T10:00:01.000Z');
    expect(s.parents).toHaveLength(MAX_STATUS_PARENTS);
    expect(s.parentCount).toBe(1200);
    expect(s.activeCount).toBe(12);
    expect(s.parents!.filter((p) => p.state === 'Active')).toHaveLength(12);
    expect(s.conditions).toContainEqual(expect.objectContaining({ type: 'ParentsListed', status: 'False', reason: 'TooManyParents' }));
    expect(s.conditions!.find((c) => c.type === 'ParentsListed')!.message).toContain('700 Healthy ones are left out');
    // Well inside etcd's 1.5 MiB request limit.
    expect(Buffer.byteLength(JSON.stringify(s))).toBeLessThan(512 * 1024);
  });

  it('lists every parent and adds no condition at or below the limit', () => {
    const s = summarize(
      'n1',
      Array.from({ length: 200 }, (_, i) => parent(i, 'Healthy')),
      [],
      '2026-12-04T10:00:01.000Z',
    );
    expect(s.parents).toHaveLength(200);
    expect(s.conditions).toEqual([]);
  });
});
