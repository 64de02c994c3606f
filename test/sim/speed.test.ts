import { expect, it } from 'vitest';
import { measureSpeed } from '../../src/sim/index.js';

it('simulates a 3-master cluster for a day of virtual time with periodic faults', async () => {
  const f = await measureSpeed(() => performance.now(), 24);
  console.log(
    `speed: ${f.virtualSeconds} virtual s in ${f.wallSeconds.toFixed(2)} wall s = ${f.virtualSecondsPerWallSecond} virtual s per wall s (${f.events} events, ${f.violations} violations)`,
  );
  expect(f.violations).toBe(0);
  expect(f.virtualSecondsPerWallSecond).toBeGreaterThan(1000);
});
