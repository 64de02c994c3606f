// The agent restarts while its parent already hangs (a DaemonSet upgrade, an OOM kill): the new
// agent's first beat of the parent is already unanswered, and it has no answered beat of its own
// to tell a hang (a process that was Ready and stopped answering) from a slow start. The sidecar
// says which (Beat.afterReady): it saw the last answered probe. Without that the hang counted as a
// slow start and was covered only after startTimeout (5 minutes), never fenced.
import { describe, expect, it } from 'vitest';
import { runScenario } from './run.js';
import { NAMED } from './scenarios.js';
import { parseScenario } from './schema.js';

function hangThenAgentRestart(name: 'apiserver-hang' | 'apiserver-hang-release', restartAfterMs: number, seed: number) {
  const base = NAMED[name]!;
  const r = parseScenario({
    ...base,
    name: `${name}-agent-restart`,
    seed,
    // The hang starts at 3m: the agent is killed before its second unanswered round.
    faults: [...(base.faults ?? []), { type: 'agent-restart', at: 180_000 + restartAfterMs, node: 'm1' }],
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

describe('an agent restarted while its parent hangs', () => {
  for (const name of ['apiserver-hang', 'apiserver-hang-release'] as const) {
    for (const [restartAfterMs, seed] of [
      [500, 1],
      [1_500, 2],
      [2_500, 3],
      [3_500, 4],
      [6_000, 5],
    ] as const) {
      it(`${name}, agent killed ${restartAfterMs / 1000}s into the hang (seed ${seed}): fenced and served within 30 s of the hang's start`, async () => {
        const res = await runScenario(hangThenAgentRestart(name, restartAfterMs, seed));
        expect(res.invariantViolations).toEqual([]);
        const m1 = res.logs.filter((l) => l.node === 'm1').map((l) => l.text);
        expect(m1.some((t) => /agent/i.test(t) && /restart|killed|start/i.test(t))).toBe(true);
        expect(m1.filter((t) => /ParentFenced|fenced/.test(t)).length).toBeGreaterThan(0);
        // The scenario's own expectation (maxUnserved 30 s) is judged into the verdict.
        expect(res.expectationFailures).toEqual([]);
        expect(res.verdict).toBe('pass');
      }, 120_000);
    }
  }
});
