// The three-node bed's load-balancer poller: its failed polls as stretches, with why they failed.
import { describe, expect, it } from 'vitest';
import { Poller } from '../cluster/cases.js';

describe('cluster bed poller', () => {
  it('groups failed polls into stretches from moment zero, each with its reasons counted', async () => {
    const p = new Poller(async () => true, 1);
    await p.stop();
    p.samples.length = 0;
    const t0 = 1_000_000;
    const at = (s: number, ok: boolean, why?: string) => p.samples.push(why ? { t: t0 + s * 1000, ok, why } : { t: t0 + s * 1000, ok });
    at(-1, false, 'before'); // before moment zero: not counted
    at(0, true);
    at(0.1, false, 'HTTP 500 [-]shutdown failed');
    at(0.2, false, 'no answer within 1 s');
    at(1.2, false, 'no answer within 1 s');
    at(2.2, true);
    at(2.3, false, 'ECONNRESET');
    at(2.4, true);
    expect(p.darkStretches(t0)).toEqual([
      { fromS: 0.1, toS: 2.2, polls: 3, why: { 'HTTP 500 [-]shutdown failed': 1, 'no answer within 1 s': 2 } },
      { fromS: 2.3, toS: 2.4, polls: 1, why: { ECONNRESET: 1 } },
    ]);
    expect(p.between(t0)).toEqual({ polls: 7, failed: 4, failedS: 2.2 });
  });
});
