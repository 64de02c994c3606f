// The NodeCheckpoint's status stays well inside etcd's object limit however many parents a node has.
import { describe, expect, it } from 'vitest';
import { MAX_STATUS_PARENT_BYTES, MAX_STATUS_PARENTS, type ParentStatus, summarize } from './nodecheckpoint-types.js';

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
    expect(s.conditions!.find((c) => c.type === 'ParentsListed')!.message).toContain('more than the 500 a NodeCheckpoint lists: 700 Healthy ones are left out');
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

  /** A parent with every field at the CRD's longest: what makes a status big. */
  function largest(i: number, state: string): ParentStatus {
    const key = `p${String(i).padStart(4, '0')}`.padEnd(253, 'k');
    return {
      ...parent(i, state),
      namespace: 'n'.repeat(63),
      key,
      reason: 'R'.repeat(128),
      message: 'm'.repeat(1024),
      tokensExpireAt: '2026-12-04T11:00:00.000Z',
      covered: false,
      coverageReason: 'C'.repeat(128),
      coverageMessage: 'c'.repeat(1024),
      policyOverrides: ['o'.repeat(253)],
      policyOverridesSkipped: ['s'.repeat(253)],
    } as ParentStatus;
  }

  it(`at ${MAX_STATUS_PARENTS} parents of the largest kind the status stays within ${MAX_STATUS_PARENT_BYTES / 1024} KiB of parents, far from etcd's 1.5 MiB, and says who is left out`, () => {
    const parents = Array.from({ length: MAX_STATUS_PARENTS }, (_, i) => largest(i, i < 10 ? 'Active' : 'Healthy'));
    const s = summarize('n1', parents, [], '2026-12-04T10:00:01.000Z');
    const bytes = Buffer.byteLength(JSON.stringify(s));
    expect(bytes).toBeLessThan(MAX_STATUS_PARENT_BYTES + 4096);
    expect(bytes).toBeLessThan(1.5 * 1024 * 1024 * 0.75);
    expect(s.parentCount).toBe(MAX_STATUS_PARENTS);
    expect(s.parents!.length).toBeLessThan(MAX_STATUS_PARENTS);
    expect(s.parents!.filter((p) => p.state === 'Active')).toHaveLength(10);
    const c = s.conditions!.find((x) => x.type === 'ParentsListed')!;
    expect(c).toMatchObject({ status: 'False', reason: 'TooManyParents' });
    expect(c.message).toContain(
      `the listed ones fill the ${MAX_STATUS_PARENT_BYTES / 1024} KiB a NodeCheckpoint's parents may take: ${MAX_STATUS_PARENTS - s.parents!.length} Healthy ones are left out`,
    );
  });

  it('200 parents of the largest kind are all listed (the largest count the README sizes for)', () => {
    const s = summarize(
      'n1',
      Array.from({ length: 200 }, (_, i) => largest(i, 'Healthy')),
      [],
      '2026-12-04T10:00:01.000Z',
    );
    expect(s.parents).toHaveLength(200);
    expect(s.conditions).toEqual([]);
    expect(Buffer.byteLength(JSON.stringify(s))).toBeLessThan(MAX_STATUS_PARENT_BYTES);
  });
});
