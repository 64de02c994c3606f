import { describe, expect, it } from 'vitest';
import { decide } from './decide.js';
import { beat, feed, fixtures, POD, POLICY } from './fixtures.test-helpers.js';
import type { Action, ParentPolicy } from './types.js';

const OVERLAP: ParentPolicy = { ...POLICY, handover: 'overlap' };
const DELETING = { uid: POD.uid, name: POD.name };
const kinds = (as: Action[]) => as.map((a) => a.type);

describe('a parent whose pod is being deleted (deletion.ts)', () => {
  it('under overlap, is covered as soon as the api-server says its pod is being deleted, while it still beats Ready', () => {
    const h = fixtures(OVERLAP).Healthy!;
    const d = decide(h.state, { type: 'pod', pod: null, deleting: DELETING }, 2100);
    expect(d.state.state).toBe('Active');
    expect(d.actions).toContainEqual({ type: 'activate', reason: expect.objectContaining({ code: 'ParentDeleted' }) });
    expect(d.state.reason.message).toContain(POD.name);
  });

  it('is not handed back to the beats of the pod being deleted: the copy serves until another pod is Ready', () => {
    const h = fixtures(OVERLAP).Healthy!;
    let r = feed(h.state, [
      [2100, { type: 'pod', pod: null, deleting: DELETING }],
      [2200, { type: 'activated' }],
    ]);
    expect(r.state.state).toBe('Active');
    // The old pod goes on beating Ready through its preStop pause: no retire.
    for (let t = 2500; t < 22_000; t += 2000) r = feed(r.state, [[t, { type: 'beat', beat: beat('Ready') }]]);
    expect(r.state.state).toBe('Active');
    expect(kinds(r.actions)).not.toContain('retire');
    expect(r.state.reason.code).toBe('ParentDeleted');
    // Its successor is listed and beats Ready: the copy is retired.
    const next = { uid: 'u2', name: 'kube-apiserver-n2', specHash: 'h1' };
    r = feed(r.state, [
      [23_000, { type: 'pod', pod: next }],
      [23_500, { type: 'beat', beat: beat('Ready', { holder: next.name, holderUid: next.uid }) }],
    ]);
    expect(r.state.state).toBe('Healthy');
    expect(kinds(r.actions)).toContain('retire');
  });

  it('changes nothing under release (the copy could not bind before the pod exits)', () => {
    const h = fixtures(POLICY).Healthy!;
    const d = decide(h.state, { type: 'pod', pod: null, deleting: DELETING }, 2100);
    expect(d.state.state).toBe('Healthy');
    expect(kinds(d.actions)).not.toContain('activate');
  });

  it('needs the beats to be that pod’s own, the api-server reachable and a stored checkpoint', () => {
    const h = fixtures(OVERLAP).Healthy!;
    // Another pod's deletion (the beats are not from it): nothing.
    const other = decide(h.state, { type: 'pod', pod: null, deleting: { uid: 'u-old', name: 'kube-apiserver-old' } }, 2100);
    expect(other.state.state).toBe('Healthy');
    // A live pod listed beside it: the list says pod, not deleting.
    const listed = decide(h.state, { type: 'pod', pod: { ...POD, uid: 'u2', name: 'n2' }, deleting: DELETING }, 2100);
    expect(listed.state.deleting).toBeNull();
    expect(kinds(listed.actions)).not.toContain('activate');
    // The api-server unreachable: an identity-only list says nothing of deletions.
    const away = feed(h.state, [
      [2050, { type: 'api', reachable: false }],
      [2100, { type: 'pod', pod: null, deleting: DELETING }],
      [2200, { type: 'beat', beat: beat('Ready') }],
    ]);
    expect(kinds(away.actions)).not.toContain('activate');
    // No checkpoint: nothing to cover with, and no warning either (the parent is not down).
    const bare = fixtures({ ...OVERLAP }).Healthy!.state;
    bare.checkpoint = { stored: false, active: false, specHash: null };
    const none = decide(bare, { type: 'pod', pod: null, deleting: DELETING }, 2100);
    expect(none.state.state).toBe('Healthy');
    expect(none.actions).toEqual([]);
  });

  it('a deletion that is over (the pod gone, nothing listed) leaves the usual rules', () => {
    const h = fixtures(OVERLAP).Healthy!;
    const r = feed(h.state, [
      [2100, { type: 'pod', pod: null, deleting: DELETING }],
      [2200, { type: 'activated' }],
      [5000, { type: 'pod', pod: null }],
    ]);
    expect(r.state.deleting).toBeNull();
    expect(r.state.state).toBe('Active');
  });
});
