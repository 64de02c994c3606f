// An api-server starved of CPU on the real node is slow, not hung (decision 0005): its own
// container held to 2% of one CPU (a cfs quota on its cgroup: throttled time is run-queue time) for
// 60 s. Its sidecar's probes go unanswered as a hung process's do, but it sees the process waiting
// for a CPU, so the agent neither fences it nor runs its checkpoint, and the api-server is the same
// process after. Before the starved rule, two unanswered rounds in a row fenced it within ~10 s.
// The SIGSTOP hang, which waits for no CPU, is still fenced at once (reboot.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { starveOnce } from './hang.js';
import { realNodeTestbed, type Testbed } from './testbed.js';

let tb: Testbed;
beforeAll(async () => {
  tb = realNodeTestbed();
  await tb.node('down');
  await tb.node('up');
  await tb.bootstrap(true);
});
afterAll(async () => {
  await tb?.node('down');
});

describe('an api-server starved of CPU on a real node', () => {
  it('is neither fenced nor covered: its unanswered rounds are starved ones, and the process lives on', async () => {
    const r = await starveOnce(tb, { seconds: 60, hogs: 0, nice: 0, where: 'quota', quotaPct: 2, settleS: 10 });
    console.log(`starved 60 s at 2% of a CPU: ${JSON.stringify(r)}`);
    // The quota did starve it: its sidecar saw rounds go unanswered (else this proves nothing).
    expect(r.rounds, 'sidecar rounds read from its local beat file').toBeGreaterThan(5);
    expect(r.unanswered, 'unanswered rounds (the quota must starve the api-server)').toBeGreaterThanOrEqual(2);
    // Every one of them seen waiting for a CPU, none taken for a hang.
    expect(r.unansweredNotStarved, 'unanswered rounds not seen waiting for a CPU').toBe(0);
    expect(r.fences, `fences asked for: ${r.decisions.join('; ')}`).toBe(0);
    expect(r.activations, `activations: ${r.decisions.join('; ')}`).toBe(0);
    expect(r.samePidAfter, 'the api-server is the same process after the starvation').toBe(true);
  });
});
