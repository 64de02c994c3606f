import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseScenario, parseScenarioText, runScenario } from '../../src/sim/index.js';

const base = { name: 'x', nodes: [{ name: 'm1', master: true }], parents: [{ key: 'kube-apiserver', kind: 'apiserver' }] };

describe('scenario files', () => {
  it('the example file parses and passes', async () => {
    const r = parseScenarioText(readFileSync('examples/scenarios/master-reboot.yaml', 'utf8'));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect((await runScenario(r.scenario)).verdict).toBe('pass');
  });

  it.each([
    ['unknown node in a fault', { ...base, faults: [{ type: 'reboot', at: '1m', node: 'm9' }] }, 'faults[0].node'],
    ['bad duration', { ...base, faults: [{ type: 'reboot', at: 'soon', node: 'm1' }] }, 'faults[0].at'],
    ['unknown fault type', { ...base, faults: [{ type: 'meteor', at: '1m' }] }, 'faults[0].type'],
    ['bad policy field', { ...base, parents: [{ key: 'a', policy: { window: '1s' } }] }, 'parents[0].policy.window'],
    ['bad node name', { ...base, nodes: [{ name: 'M_1' }] }, 'nodes[0].name'],
    ['unknown field', { ...base, colour: 'red' }, '(document)'],
    ['no parents', { ...base, parents: [] }, 'parents'],
  ])('%s is refused with path %s', (_n, doc, path) => {
    const r = parseScenario(doc);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path)).toContain(path);
  });

  it('reports YAML syntax errors with a line', async () => {
    const r = parseScenarioText('name: [oops\n');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]!.path).toMatch(/^line \d+/);
  });
});
