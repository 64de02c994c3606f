// Every file in examples/scenarios/ validates and passes (verdict, invariants and its own
// expectations), and together they show every fault type the schema accepts: a new fault type
// without an example fails here.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseScenarioText, runScenario } from '../../src/sim/index.js';
import { scenarioSchema } from '../../src/sim/schema.js';

const DIR = 'examples/scenarios';
const FILES = readdirSync(DIR)
  .filter((f) => /\.(ya?ml|json)$/.test(f))
  .sort();

/** The fault types of the schema's discriminated union (`faults[].type`). */
function faultTypes(): string[] {
  const faults = scenarioSchema.shape.faults.unwrap();
  return faults.element.options.map((o) => o.shape.type.value);
}

describe(DIR, () => {
  it('has the examples this suite is about', () => {
    expect(FILES).toEqual(expect.arrayContaining(['master-reboot.yaml', 'process-faults.yaml', 'network-faults.yaml', 'rollouts.yaml', 'operations.yaml']));
  });

  it.each(FILES)('%s validates and passes', async (file) => {
    const r = parseScenarioText(readFileSync(join(DIR, file), 'utf8'));
    if (!r.ok) throw new Error(`${file}: ${r.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`);
    const run = await runScenario(r.scenario);
    expect(run.invariantViolations).toEqual([]);
    expect(run.expectationFailures).toEqual([]);
    expect(run.verdict).toBe('pass');
  });

  it('every fault type is shown by some example, and some example judges a fault on its own (expect.faults)', () => {
    const docs = FILES.map((f) => parse(readFileSync(join(DIR, f), 'utf8')) as { faults?: Array<{ type: string }>; expect?: { faults?: unknown[] } });
    const shown = new Set(docs.flatMap((d) => (d.faults ?? []).map((f) => f.type)));
    const types = faultTypes();
    expect(types.length).toBeGreaterThanOrEqual(10);
    expect(types.filter((t) => !shown.has(t))).toEqual([]);
    expect(docs.some((d) => (d.expect?.faults ?? []).length > 0)).toBe(true);
  });
});
