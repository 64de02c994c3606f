// specHashOf sanitizes a pod object once: every pod event hands the loop every parent's pod again,
// and sanitizing them all each time made a node's pod events cost O(parents).
import { describe, expect, it, vi } from 'vitest';
import { parentPod } from '../checkpoint/fixtures.test-helpers.js';
import { Store } from '../checkpoint/store.js';

const calls = vi.hoisted(() => ({ sanitize: 0 }));
vi.mock('../checkpoint/sanitize.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../checkpoint/sanitize.js')>();
  return {
    ...real,
    sanitize: (...args: Parameters<typeof real.sanitize>) => {
      calls.sanitize++;
      return real.sanitize(...args);
    },
  };
});

const { specHashOf } = await import('./actuators.js');

describe('specHashOf', () => {
  const deps = { node: 'node-a', store: new Store({ stateDir: '/var/lib/lastseen' }) };
  const id = 'kube-system/kube-apiserver';

  it('sanitizes each pod object once; a new object (a changed pod) is hashed anew', () => {
    const pod = parentPod();
    const before = calls.sanitize;
    const h = specHashOf(deps, id, 'kube-apiserver', pod);
    for (let i = 0; i < 200; i++) expect(specHashOf(deps, id, 'kube-apiserver', pod)).toBe(h);
    expect(calls.sanitize - before).toBe(1);

    const changed = parentPod();
    changed.spec!.containers[0]!.image = 'registry.k8s.io/kube-apiserver:v9.9.9';
    const h2 = specHashOf(deps, id, 'kube-apiserver', changed);
    expect(h2).not.toBe(h);
    expect(calls.sanitize - before).toBe(2);
    // The same object as another parent's (another key) is its own entry.
    specHashOf(deps, 'kube-system/other', 'other', pod);
    expect(calls.sanitize - before).toBe(3);
  });

  it('an unsanitizable pod hashes to "" (capture says why), once', () => {
    const pod = parentPod();
    delete (pod as { spec?: unknown }).spec;
    const before = calls.sanitize;
    expect(specHashOf(deps, id, 'kube-apiserver', pod)).toBe('');
    expect(specHashOf(deps, id, 'kube-apiserver', pod)).toBe('');
    expect(calls.sanitize - before).toBe(1);
  });
});
