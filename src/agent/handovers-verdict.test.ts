import { describe, expect, it } from 'vitest';
import { HandoverRecords, type HandoverStore } from './handovers.js';

function memoryStore(): HandoverStore & { text: string | null; writes: number } {
  const m = {
    where: 'memory',
    text: null as string | null,
    writes: 0,
    read: async () => m.text,
    write: async (t: string) => {
      m.text = t;
      m.writes++;
    },
  };
  return m;
}

describe('the hand-over record keeps a verdict on probation', () => {
  it('keeps its strikes and the time its probation has left, on the wall clock, across instances', async () => {
    const store = memoryStore();
    let wall = 1_000_000;
    const a = new HandoverRecords(store, () => wall);
    await a.set('ns/k', {
      remainingMs: 0,
      attempts: 2,
      nextBackoffMs: 60_000,
      inProgress: false,
      knownBad: { specHash: 'h-bad', podUid: 'u2', strikes: 3, remainingMs: 90_000 },
    });
    wall += 30_000;
    const b = new HandoverRecords(store, () => wall);
    expect(await b.load()).toBeNull();
    expect(b.recovered('ns/k')).toEqual({
      remainingMs: expect.any(Number), // no hand-over in progress: its deadline means nothing
      attempts: 2,
      nextBackoffMs: 60_000,
      inProgress: false,
      knownBad: { specHash: 'h-bad', podUid: 'u2', strikes: 3, remainingMs: 60_000 },
    });
  });

  it('a verdict-only record is not rewritten on every transition while its probation runs', async () => {
    const store = memoryStore();
    let wall = 5_000_000;
    const r = new HandoverRecords(store, () => wall);
    const until = 100_000; // the verdict's end on the monotonic clock
    let mono = 10_000;
    const rec = () => ({
      remainingMs: 0,
      attempts: 1,
      nextBackoffMs: 60_000,
      inProgress: false as const,
      knownBad: { specHash: 'h', podUid: 'u', strikes: 1, remainingMs: until - mono },
    });
    await r.set('ns/k', rec());
    const writes = store.writes;
    for (let i = 0; i < 20; i++) {
      wall += 1234;
      mono += 1234;
      await r.set('ns/k', rec());
    }
    expect(store.writes).toBe(writes);
  });
});
