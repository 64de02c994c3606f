// The power cycle on a kubelet one minor older than the control plane (a supported version skew):
// scripts/node runs the kubelet named by LASTSEEN_NODE_KUBELET_VERSION, here its older one, under
// the same self-hosted control plane and lastseen; the node must come back as on the newer kubelet.
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_SCRIPT } from './env.js';
import { realNodeTestbed, rebootOnce, type Testbed } from './testbed.js';

/** scripts/node's older kubelet (`env` prints it), so the version is written down in one place. */
function olderKubeletVersion(): string {
  const m = execFileSync(NODE_SCRIPT, ['env'], { encoding: 'utf8' }).match(/^export LASTSEEN_NODE_OLDER_KUBELET_VERSION=(v\d+\.\d+\.\d+)$/m);
  if (!m?.[1]) throw new Error('scripts/node env did not print LASTSEEN_NODE_OLDER_KUBELET_VERSION');
  return m[1];
}

const OLDER = olderKubeletVersion();
const before = process.env.LASTSEEN_NODE_KUBELET_VERSION;
let tb: Testbed;

beforeAll(() => {
  tb = realNodeTestbed();
  // Every scripts/node command this file runs (up, kill, start, down) reads it: this worker's own environment.
  process.env.LASTSEEN_NODE_KUBELET_VERSION = OLDER;
});
afterAll(async () => {
  await tb?.node('down');
  if (before === undefined) delete process.env.LASTSEEN_NODE_KUBELET_VERSION;
  else process.env.LASTSEEN_NODE_KUBELET_VERSION = before;
});

describe(`a self-hosted control plane on an older kubelet (${OLDER})`, () => {
  it('with lastseen: comes back after a power cycle, and the self-hosted api-server takes over again', async () => {
    await tb.fresh(true);
    // The node runs the older kubelet, not the default one (`up` would refuse a missing binary).
    expect(await tb.kubeletVersion()).toBe(OLDER);
    const r = await rebootOnce(tb, { offS: 2, limitS: 240, settleS: 10, withAgent: true });
    console.log(`reboot on kubelet ${OLDER}: ${JSON.stringify(r)}`);
    expect(r).toMatchObject({ recovered: true, schedulerBack: true, controllerManagerBack: true, agentBack: true });
    expect(r.apiServedAfterS).not.toBeNull();
    expect(r.apiServedAfterS as number).toBeLessThan(60);
    // Still the older kubelet after the power cycle (scripts/node start reads the same variable).
    expect(await tb.kubeletVersion()).toBe(OLDER);
  });
});
