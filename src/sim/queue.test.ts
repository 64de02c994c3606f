import { describe, expect, it } from 'vitest';
import { EventQueue } from './queue.js';
import { Rng } from './rng.js';

describe('EventQueue', () => {
  it('runs by time, then by insertion order', () => {
    const q = new EventQueue();
    const seen: string[] = [];
    q.at(20, () => seen.push('b'));
    q.at(10, () => seen.push('a1'));
    q.at(10, () => seen.push('a2'));
    q.at(10, () => q.after(0, () => seen.push('a3')));
    q.runUntil(100, () => true);
    expect(seen).toEqual(['a1', 'a2', 'a3', 'b']);
    expect(q.now).toBe(100);
  });

  it('stops when the check fails', () => {
    const q = new EventQueue();
    let n = 0;
    for (let i = 0; i < 5; i++) q.at(i, () => n++);
    expect(q.runUntil(10, () => n < 3)).toBe(false);
    expect(n).toBe(3);
  });
});

describe('Rng', () => {
  it('replays from a seed, and forks are independent of draws elsewhere', () => {
    const a = new Rng(5);
    const b = new Rng(5);
    expect([a.next(), a.next()]).toEqual([b.next(), b.next()]);
    const f1 = new Rng(5).fork('kubelet');
    const r = new Rng(5);
    r.next();
    expect(r.fork('kubelet').next()).toBe(f1.next());
    expect(new Rng(5).fork('agent').next()).not.toBe(new Rng(5).fork('kubelet').next());
  });
});
