import { describe, expect, it } from 'vitest';
import { FakeTime } from './fake-time.test-helpers.js';
import { every } from './time.js';

describe('every', () => {
  it('runs every period counted from the end of the last run, goes on after a failure, stops', async () => {
    const time = new FakeTime();
    const runs: number[] = [];
    const errors: unknown[] = [];
    const p = every(
      time,
      1_000,
      async () => {
        runs.push(time.now());
        if (runs.length === 2) throw new Error('boom');
        await time.sleep(300); // a slow run: the next period starts after it
      },
      { onError: (e) => errors.push(e) },
    );
    await time.advance(1_000);
    expect(runs).toEqual([1_000]);
    await time.advance(1_300);
    expect(runs).toEqual([1_000, 2_300]);
    expect(errors).toHaveLength(1);
    await time.advance(1_000);
    expect(runs).toEqual([1_000, 2_300, 3_300]);
    // stop() waits for the run in progress (sleeping until 3 600), then nothing more runs.
    const stopping = p.stop();
    await time.advance(300);
    await stopping;
    await time.advance(10_000);
    expect(runs).toHaveLength(3);
    expect(time.pending()).toBe(0);
  });

  it('jitters the period within ms * (1 ± jitter/2)', async () => {
    const time = new FakeTime();
    const runs: number[] = [];
    const p = every(time, 1_000, () => runs.push(time.now()), { jitter: 0.2, random: () => 1 });
    await time.advance(1_100);
    expect(runs).toEqual([1_100]);
    await p.stop();
  });
});
