import { describe, expect, it } from 'vitest';
import { EventQueue, promiseCallbacksRun } from './queue.js';
import { Rng } from './rng.js';

describe('EventQueue', () => {
  it('runs by time, then by insertion order', async () => {
    const q = new EventQueue();
    const seen: string[] = [];
    q.at(20, () => seen.push('b'));
    q.at(10, () => seen.push('a1'));
    q.at(10, () => seen.push('a2'));
    q.at(10, () => q.after(0, () => seen.push('a3')));
    await q.runUntil(100, () => true);
    expect(seen).toEqual(['a1', 'a2', 'a3', 'b']);
    expect(q.now).toBe(100);
  });

  it('stops when the check fails', async () => {
    const q = new EventQueue();
    let n = 0;
    for (let i = 0; i < 5; i++) q.at(i, () => n++);
    expect(await q.runUntil(10, () => n < 3)).toBe(false);
    expect(n).toBe(3);
  });

  it('drops a cancelled event unrun and uncounted', async () => {
    const q = new EventQueue();
    const seen: string[] = [];
    const gone = q.at(5, () => seen.push('cancelled'));
    q.at(6, () => seen.push('kept'));
    gone.cancel();
    await q.runUntil(10, () => true);
    expect(seen).toEqual(['kept']);
    expect(q.executed).toBe(1);
  });

  it('lets the promise callbacks an event released finish before the next event and the check', async () => {
    const q = new EventQueue();
    const seen: string[] = [];
    let pending = false;
    const settle = () => {
      if (!pending) return null;
      pending = false;
      return new Promise<void>((r) => setImmediate(r));
    };
    q.at(1, () => {
      pending = true;
      void Promise.resolve()
        .then(() => seen.push('then'))
        .then(() => q.after(0, () => seen.push('scheduled by the chain')));
    });
    q.at(1, () => seen.push('next event'));
    await q.runUntil(
      10,
      () => {
        seen.push(`check at ${q.now}`);
        return true;
      },
      settle,
    );
    expect(seen).toEqual(['then', 'check at 1', 'next event', 'check at 1', 'scheduled by the chain', 'check at 1']);
  });
});

describe('promiseCallbacksRun', () => {
  it('resolves only after a chain of callbacks, each queuing the next, has run to its end', async () => {
    let depth = 0;
    const step = (): Promise<void> | undefined => (++depth < 200 ? Promise.resolve().then(step) : undefined);
    void Promise.resolve().then(step);
    await promiseCallbacksRun();
    expect(depth).toBe(200);
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
