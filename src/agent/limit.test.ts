import { describe, expect, it } from 'vitest';
import { limitConcurrency } from './limit.js';

/** A call whose end the test decides. */
function gate() {
  let open!: () => void;
  let fail!: (e: Error) => void;
  const done = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { done, open, fail };
}

const settle = () => new Promise<void>((r) => setImmediate(r));

describe('limitConcurrency', () => {
  it('runs at most `limit` calls at once and starts the others in the order they were made', async () => {
    const started: number[] = [];
    const gates = Array.from({ length: 5 }, gate);
    const f = limitConcurrency(2, async (i: number) => {
      started.push(i);
      await gates[i]!.done;
      return i * 10;
    });
    const results = [0, 1, 2, 3, 4].map((i) => f(i));
    await settle();
    expect(started).toEqual([0, 1]);
    gates[1]!.open();
    await settle();
    expect(started).toEqual([0, 1, 2]);
    gates[0]!.open();
    await settle();
    expect(started).toEqual([0, 1, 2, 3]);
    gates[2]!.open();
    gates[3]!.open();
    await settle();
    expect(started).toEqual([0, 1, 2, 3, 4]);
    gates[4]!.open();
    expect(await Promise.all(results)).toEqual([0, 10, 20, 30, 40]);
  });

  it('a rejected call frees its place and its caller gets the rejection', async () => {
    const started: string[] = [];
    const a = gate();
    const f = limitConcurrency(1, async (name: string, g?: { done: Promise<void> }) => {
      started.push(name);
      await g?.done;
      return name;
    });
    const first = f('a', a);
    const second = f('b');
    await settle();
    expect(started).toEqual(['a']);
    a.fail(new Error('capture failed'));
    await expect(first).rejects.toThrow('capture failed');
    expect(await second).toBe('b');
    expect(started).toEqual(['a', 'b']);
    // The place is free again: a later call starts at once.
    expect(await f('c')).toBe('c');
  });

  it('refuses a limit that is not a positive integer, naming it', () => {
    expect(() => limitConcurrency(0, async () => {})).toThrow('limit must be a positive integer, got 0');
    expect(() => limitConcurrency(1.5, async () => {})).toThrow('got 1.5');
  });
});
