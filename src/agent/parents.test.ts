import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { deletingOnNode, deletingPodOf, parentPodOf, parentsOnNode } from './parents.js';

const stamp = (name: string, created: number) => ({ uid: `uid-${name}`, name, created });

describe('parentPodOf: which live pod of a key is the parent’s', () => {
  it('is null for no pod', () => {
    expect(parentPodOf([])).toBeNull();
  });

  it('takes the only pod, with nothing beside it', () => {
    const a = stamp('a', 5);
    expect(parentPodOf([a])).toEqual({ pod: a, alsoListed: [] });
  });

  it('takes the newest, whatever the order given, and lists the others in the order given', () => {
    const [a, b, c] = [stamp('a', 1), stamp('b', 2), stamp('c', 3)];
    expect(parentPodOf([b, a, c])).toEqual({
      pod: c,
      alsoListed: [
        { uid: 'uid-b', name: 'b' },
        { uid: 'uid-a', name: 'a' },
      ],
    });
    expect(parentPodOf([c, b, a])).toEqual({
      pod: c,
      alsoListed: [
        { uid: 'uid-b', name: 'b' },
        { uid: 'uid-a', name: 'a' },
      ],
    });
    expect(parentPodOf([a, c, b])?.pod).toBe(c);
  });

  it('keeps the first given of equal creation times', () => {
    const [a, b] = [stamp('a', 7), stamp('b', 7)];
    expect(parentPodOf([a, b])).toEqual({ pod: a, alsoListed: [{ uid: 'uid-b', name: 'b' }] });
    expect(parentPodOf([b, a])).toEqual({ pod: b, alsoListed: [{ uid: 'uid-a', name: 'a' }] });
  });

  it('returns the caller’s own object, so the caller keeps what it attached', () => {
    const pods = [
      { ...stamp('a', 1), extra: 'old' },
      { ...stamp('b', 2), extra: 'new' },
    ];
    expect(parentPodOf(pods)?.pod.extra).toBe('new');
  });
});

function pod(name: string, created: string | undefined, over: { key?: string; node?: string; uid?: string; deleting?: boolean } = {}): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'kube-system',
      uid: over.uid ?? `uid-${name}`,
      annotations: { 'lastseen.dev/checkpoint': 'true' },
      labels: { 'lastseen.dev/parent': over.key ?? 'kube-apiserver', gen: name },
      ...(created !== undefined ? { creationTimestamp: created as unknown as Date } : {}),
      ...(over.deleting ? { deletionTimestamp: new Date('2026-12-05T08:00:00Z') } : {}),
    },
    spec: { nodeName: over.node ?? 'm1', containers: [] },
  };
}

describe('parentsOnNode: production’s pod list through parentPodOf', () => {
  it('names a surge’s newer pod the parent’s, the older beside it, with the newer pod’s labels', () => {
    const old = pod('apiserver-old', '2026-12-05T08:00:00Z');
    const neu = pod('apiserver-new', '2026-12-05T08:05:00Z');
    for (const list of [
      [old, neu],
      [neu, old],
    ]) {
      const parents = parentsOnNode(list, 'm1');
      expect([...parents.keys()]).toEqual(['kube-system/kube-apiserver']);
      const p = parents.get('kube-system/kube-apiserver')!;
      expect(p.pod.metadata?.name).toBe('apiserver-new');
      expect(p.labels.gen).toBe('apiserver-new');
      expect(p.alsoListed).toEqual([{ uid: 'uid-apiserver-old', name: 'apiserver-old' }]);
    }
  });

  it('reads client-node’s parsed Dates as well as strings, and counts a missing or broken time as the oldest', () => {
    const dated = pod('dated', undefined);
    dated.metadata!.creationTimestamp = new Date('2026-12-05T08:01:00Z');
    const broken = pod('broken', 'not a time');
    const missing = pod('missing', undefined);
    const p = parentsOnNode([broken, dated, missing], 'm1').get('kube-system/kube-apiserver')!;
    expect(p.pod.metadata?.name).toBe('dated');
    expect(p.alsoListed?.map((o) => o.name)).toEqual(['broken', 'missing']);
  });

  it('lists nothing beside a single pod, keeps keys apart, and leaves out pods that are not parents here', () => {
    const parents = parentsOnNode(
      [
        pod('a', '2026-12-05T08:00:00Z'),
        pod('flannel', '2026-12-05T08:09:00Z', { key: 'kube-flannel' }),
        pod('gone', '2026-12-05T08:10:00Z', { deleting: true }),
        pod('elsewhere', '2026-12-05T08:11:00Z', { node: 'm2' }),
      ],
      'm1',
    );
    expect([...parents.keys()]).toEqual(['kube-system/kube-apiserver', 'kube-system/kube-flannel']);
    expect(parents.get('kube-system/kube-apiserver')?.pod.metadata?.name).toBe('a');
    expect(parents.get('kube-system/kube-apiserver')?.alsoListed).toBeUndefined();
    expect(parents.get('kube-system/kube-flannel')?.alsoListed).toBeUndefined();
  });
});

describe('deletingPodOf: which pod being deleted the core hears of', () => {
  it('none while a live pod is listed, else the newest (parentPodOf), none of none', () => {
    const [a, b] = [stamp('a', 1), stamp('b', 2)];
    expect(deletingPodOf(false, [b, a])).toEqual({ uid: 'uid-b', name: 'b' });
    expect(deletingPodOf(true, [b, a])).toBeNull();
    expect(deletingPodOf(false, [])).toBeNull();
  });
});

describe('deletingOnNode: the pod being deleted of a key with no live pod here', () => {
  it('names it for a key whose only pods are being deleted (the newest), not for one with a live pod, a foreign node or a non-parent', () => {
    const gone = pod('apiserver-old', '2026-12-05T08:00:00Z', { deleting: true });
    const goneToo = pod('apiserver-older', '2026-12-05T07:00:00Z', { deleting: true });
    const flannelGone = pod('flannel-old', '2026-12-05T08:00:00Z', { key: 'kube-flannel', deleting: true });
    const flannelNew = pod('flannel-new', '2026-12-05T08:01:00Z', { key: 'kube-flannel' });
    const elsewhere = pod('sched-old', '2026-12-05T08:00:00Z', { key: 'kube-scheduler', node: 'm2', deleting: true });
    const notParent = pod('cm-old', '2026-12-05T08:00:00Z', { key: 'kube-controller-manager', deleting: true });
    delete notParent.metadata!.annotations!['lastseen.dev/checkpoint'];
    const list = [goneToo, gone, flannelGone, flannelNew, elsewhere, notParent];
    const parents = parentsOnNode(list, 'm1');
    expect([...parents.keys()]).toEqual(['kube-system/kube-flannel']);
    expect(deletingOnNode(list, 'm1', parents)).toEqual(new Map([['kube-system/kube-apiserver', { uid: 'uid-apiserver-old', name: 'apiserver-old' }]]));
  });
});
