import { expect, it } from 'vitest';
import { measureSpeed } from '../../src/sim/index.js';

it('simulates a 3-master cluster for a day of virtual time with periodic faults', async () => {
  const f = await measureSpeed(() => performance.now(), 24);
  console.log(
    `speed: ${f.virtualSeconds} virtual s in ${f.wallSeconds.toFixed(2)} wall s = ${f.virtualSecondsPerWallSecond} virtual s per wall s (${f.events} events, ${f.eventsPerWallSecond} events/s, ${f.violations} violations)`,
  );
  expect(f.violations).toBe(0);
  expect(f.virtualSecondsPerWallSecond).toBeGreaterThan(1000);
});

it('simulates 300 nodes (a DaemonSet parent on each, 3 api-server masters) through a fault, every invariant holding', async () => {
  const f = await measureSpeed(() => performance.now(), 0.2, 300);
  console.log(`speed at 300 nodes: ${f.events} events in ${f.wallSeconds.toFixed(2)} wall s = ${f.eventsPerWallSecond} events/s (${f.violations} violations)`);
  expect(f.violations).toBe(0);
  // About 840 events per virtual second at this size: the events, not the checks, are the cost.
  expect(f.events).toBeGreaterThan(500_000);
});
