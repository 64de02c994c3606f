// Random-sweep seeds that once broke not-served behind the redirect (handover: redirect): after a
// reboot (or a retire) the copy runs again under the uid of the copy before it (a static pod is
// named by its manifest), and the redirect waited for a Ready from "another" copy that never came.
// The redirect now waits for a Ready beat seen since the manifest was written (src/core/redirect.ts).
import { describe, expect, it } from 'vitest';
import { randomNetScenario, randomScenario, runScenario } from '../../src/sim/index.js';

describe('behind the redirect, a copy under the uid of the one before', () => {
  it.each([103135, 103798, 105238, 107698])('random seed %i: served after its reboot', async (seed) => {
    const r = await runScenario(randomScenario(seed), { seed, keepLogs: false });
    expect(r.invariantViolations).toEqual([]);
  });

  it('random --net seed 62965: served after its reboot', async () => {
    const r = await runScenario(randomNetScenario(62965), { seed: 62965, keepLogs: false });
    expect(r.invariantViolations).toEqual([]);
  });
});
