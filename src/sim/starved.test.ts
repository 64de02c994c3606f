// A parent starved of CPU is slow, not hung (src/core/fence.ts, HANG_STARVED_MS): its sidecar's
// probes go unanswered as a hung one's do, but it sees the process waiting for a CPU (Beat.starved).
// Found on the three-node test bed: at load 45-70 the agents fenced healthy api-servers as hung and
// the load balancer was left with none. A starved process is neither fenced nor covered before the
// bound; one starved past it is fenced then; a real hang is still fenced at once (apiserver-hang).
import { describe, expect, it } from 'vitest';
import { HANG_STARVED_MS } from '../core/fence.js';
import { runScenario } from './run.js';
import { NAMED } from './scenarios.js';
import { parseScenario } from './schema.js';

const AT = 180_000;

function starved(name: 'apiserver-hang' | 'apiserver-hang-release', durationMs: number, seed: number) {
  const r = parseScenario({
    ...NAMED[name]!,
    name: `${name}-starved`,
    seed,
    expect: { served: true, parentServed: true },
    faults: [{ type: 'hang', at: AT, key: 'kube-apiserver', node: 'm1', duration: durationMs, scope: 'starved' }],
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

const fenceAsks = (logs: { t: number; node: string; text: string }[]) => logs.filter((l) => l.node === 'm1' && /fence of pod/.test(l.text)).map((l) => l.t);
const activations = (logs: { t: number; node: string; kind: string; text: string }[]) =>
  logs.filter((l) => l.node === 'm1' && l.kind === 'core' && / -> Active/.test(l.text) && l.t >= AT).map((l) => l.t);

describe('a parent starved of CPU', () => {
  for (const name of ['apiserver-hang', 'apiserver-hang-release'] as const) {
    for (const seed of [1, 2, 3]) {
      it(`${name}, starved 100 s (seed ${seed}): neither fenced nor covered, serves again after`, async () => {
        const res = await runScenario(starved(name, 100_000, seed));
        expect(res.invariantViolations).toEqual([]);
        expect(fenceAsks(res.logs)).toEqual([]);
        expect(activations(res.logs)).toEqual([]);
        expect(res.verdict).toBe('pass');
      }, 120_000);

      it(`${name}, starved 5 min (seed ${seed}): fenced once the bound has passed, not before`, async () => {
        const res = await runScenario(starved(name, 300_000, seed));
        expect(res.invariantViolations).toEqual([]);
        const asks = fenceAsks(res.logs);
        expect(asks.length).toBeGreaterThan(0);
        expect(asks[0]! - AT).toBeGreaterThanOrEqual(HANG_STARVED_MS);
        // The first unanswered round is seen within a round or two of the starvation's start.
        expect(asks[0]! - AT).toBeLessThan(HANG_STARVED_MS + 30_000);
        expect(res.verdict).toBe('pass');
      }, 120_000);
    }
  }
});
