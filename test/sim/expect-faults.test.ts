// `expect.faults`: expectations about the recovery after one fault, judged on its window's figures
// (outcome.perFault), each failure naming the fault and the figure.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseScenario, runScenario } from '../../src/sim/index.js';

/** examples/scenarios/process-faults.yaml: a kill at 2m (fault 0), a 2-minute hang at 5m (fault 1). */
const processFaults = () => parse(readFileSync('examples/scenarios/process-faults.yaml', 'utf8')) as Record<string, unknown>;

async function run(expectations: unknown) {
  const r = parseScenario({ ...processFaults(), expect: expectations });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return runScenario(r.scenario);
}

describe('expect.faults', () => {
  it('passes when every fault meets its own figures', async () => {
    const r = await run({
      faults: [
        { fault: 0, served: true, parentServed: true, maxUnserved: '10s', maxServedAt: '10s', noActivation: true },
        { fault: 1, served: true, maxServedAt: '30s', maxParentServedAt: '2m10s', maxActivations: 1, maxHandoverAttempts: 0, checkpointServedGeneration: 1 },
      ],
    });
    expect(r.expectationFailures).toEqual([]);
    expect(r.verdict).toBe('pass');
  });

  it('fails with a message that names the fault, its window and the figure', async () => {
    const r = await run({
      faults: [
        { fault: 1, maxServedAt: '5s', noActivation: true, checkpointServedGeneration: 2 },
        { fault: 0, checkpointServedGeneration: 1 },
      ],
    });
    expect(r.verdict).toBe('fail');
    expect(r.expectationFailures).toHaveLength(4);
    expect(r.expectationFailures[0]).toMatch(/^fault 1 \(hang at 300s, window until 600s\): expected servedAt <= 5s, got 2\d(\.\d)?s$/);
    expect(r.expectationFailures[1]).toBe('fault 1 (hang at 300s, window until 600s): expected no activation of the checkpoint, got 1');
    expect(r.expectationFailures[2]).toBe(
      'fault 1 (hang at 300s, window until 600s): expected the checkpoint that served to be generation 2, got generation(s) 1',
    );
    expect(r.expectationFailures[3]).toBe(
      'fault 0 (kill at 120s, window until 300s): expected the checkpoint that served to be generation 1, got no checkpoint served',
    );
  });

  it('a fault that is never served again within its window fails served: true with "not within the window"', async () => {
    // The hang starts at 5m and the run ends at 5m10s: the checkpoint needs a silent window first.
    const doc = { ...processFaults(), duration: '5m10s', expect: { faults: [{ fault: 1, served: true, maxServedAt: '1m' }] } };
    const short = parseScenario(doc);
    if (!short.ok) throw new Error(JSON.stringify(short.errors));
    const failed = await runScenario(short.scenario);
    expect(failed.expectationFailures).toEqual([
      'fault 1 (hang at 300s, window until 310s): expected the key to be served again within the window; it was not',
      'fault 1 (hang at 300s, window until 310s): expected servedAt <= 60s, got not within the window',
    ]);
  });

  it.each([
    [{ faults: [{ fault: 2 }] }, 'expect.faults[0].fault', 'no fault with index 2 (faults has indices 0..1)'],
    [{ faults: [{ fault: 0 }, { fault: -1 }] }, 'expect.faults[1].fault', undefined],
    [{ faults: [{ fault: 0, maxUnserved: 'soon' }] }, 'expect.faults[0].maxUnserved', undefined],
    [{ faults: [{ fault: 0, colour: 'red' }] }, 'expect.faults[0]', undefined],
    [{ faults: [{ served: true }] }, 'expect.faults[0].fault', undefined],
  ])('%j is refused at %s', (expectations, path, message) => {
    const r = parseScenario({ ...processFaults(), expect: expectations });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const err = r.errors.find((e) => e.path === path);
    expect(err, JSON.stringify(r.errors)).toBeDefined();
    if (message) expect(err!.message).toBe(message);
  });

  it('an index into a scenario without faults is refused', () => {
    const r = parseScenario({ ...processFaults(), faults: [], expect: { faults: [{ fault: 0 }] } });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors).toContainEqual({ path: 'expect.faults[0].fault', message: 'no fault with index 0 (the scenario has no faults)' });
  });
});
