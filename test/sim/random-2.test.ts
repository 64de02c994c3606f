import { describe, expect, it } from 'vitest';
import { randomScenario, runScenario } from '../../src/sim/index.js';

// Seeds 251..500 of the random sweep (split over four files so vitest runs them in parallel).
describe('random fault schedules, seeds 251..500', () => {
  it('hold every invariant under the lastseen strategy', async () => {
    const failing: string[] = [];
    for (let seed = 251; seed <= 500; seed++) {
      const r = await runScenario(randomScenario(seed), { seed, keepLogs: false });
      for (const v of r.invariantViolations) failing.push(`seed ${seed}: ${v.invariant} at ${v.t}s on ${v.node}/${v.key}: ${v.message}`);
    }
    expect(failing).toEqual([]);
  });
});
