// Every validation names every problem in one run: a scenario's schema errors, its references and
// its parents' policies together; a policy's schema errors and its cross-field rules together, in
// the plain document and in its ConfigMap. The CLI exits 2 with each error on a line of its own,
// path first, and no stack trace.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAIN, runCli } from '../../src/cli/cli-process.test-helpers.js';
import { parsePolicyText } from '../../src/policy/policy.js';
import { parseScenarioText } from '../../src/sim/index.js';

const STACK = /^\s+at .+(\(|:\d+)/m;

const lastseen = (args: string[]) => runCli(MAIN, args);

/** Three schema errors, five reference errors, two policy errors (one schema, one cross-field). */
const SCENARIO = `name: multi
duration: 10m
nodes:
  - { name: m1, master: true }
  - { name: M2 }
parents:
  - key: kube-apiserver
    kind: apiserver
    startTime: soon
    policy: { interval: 10s, window: 5s }
  - key: app
    nodes: [m1, m9]
    policy: { whenApiUnreachable: maybe }
faults:
  - { type: reboot, at: 1m, node: m3 }
  - { type: kill, at: 20m, key: nope, node: m1 }
  - { type: bogus, at: 1m }
expect:
  faults:
    - fault: 7
`;
const SCENARIO_PATHS = {
  schema: ['nodes[1].name', 'parents[0].startTime', 'faults[2].type'],
  references: ['parents[1].nodes[1]', 'faults[0].node', 'faults[1].key', 'faults[1].at', 'expect.faults[0].fault'],
  policy: ['parents[0].policy.window', 'parents[1].policy.whenApiUnreachable'],
};

/**
 * Schema errors of every kind the document can have (an unknown top-level key, an unknown field in
 * defaults, a bad enum, a bad selector, a bad duration in an override) beside the cross-field
 * rules they must not hide (defaults' window, a repeated override name, each override's merge).
 */
const POLICY = `apiVersion: lastseen.dev/v1alpha1
kind: Policy
bogus: 1
defaults:
  interval: 10s
  window: 5s
  windw: 3s
  whenApiUnreachable: maybe
overrides:
  - name: a
    selector: { namespace: [x] }
    policy: { startupGrace: 1s }
  - name: a
    selector: {}
    policy: { interval: nope, window: 1s }
`;
const POLICY_PATHS = {
  schema: ['(document)', 'defaults', 'defaults.whenApiUnreachable', 'overrides[0].selector', 'overrides[1].policy.interval'],
  crossField: ['defaults.window', 'overrides[1].name', 'overrides[0].policy.startupGrace', 'overrides[1].policy.window'],
};

const indent = (text: string, by: string) =>
  text
    .split('\n')
    .map((l) => (l ? by + l : l))
    .join('\n');
const CONFIGMAP = `apiVersion: v1\nkind: ConfigMap\nmetadata: { name: lastseen-policy, namespace: lastseen-system }\ndata:\n  policy.yaml: |\n${indent(POLICY, '    ')}`;

/** The field paths of `file: path: message` lines, after `prefix`. */
function pathsIn(stderr: string, file: string, prefix = ''): string[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith(`${file}: ${prefix}`))
    .map((l) => l.slice(`${file}: ${prefix}`.length).split(': ')[0]!);
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lastseen-onepass-'));
  await writeFile(join(dir, 'scenario.yaml'), SCENARIO);
  await writeFile(join(dir, 'policy.yaml'), POLICY);
  await writeFile(join(dir, 'configmap.yaml'), CONFIGMAP);
});

describe('a scenario: schema, references and policy in one pass', () => {
  it('parseScenarioText returns every error', () => {
    const r = parseScenarioText(SCENARIO);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const paths = r.errors.map((e) => e.path);
    expect([...paths].sort()).toEqual([...SCENARIO_PATHS.schema, ...SCENARIO_PATHS.references, ...SCENARIO_PATHS.policy].sort());
    expect(r.errors.find((e) => e.path === 'faults[0].node')?.message).toBe('no node named "m3"');
    expect(r.errors.find((e) => e.path === 'parents[0].policy.window')?.message).toMatch(/at least 2 x interval/);
  });

  it('a node whose name is malformed still answers references to it (only its name is reported)', () => {
    const r = parseScenarioText('name: x\nnodes: [{ name: M1 }]\nparents: [{ key: a }]\nfaults: [{ type: reboot, at: 1m, node: M1 }]\n');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path)).toEqual(['nodes[0].name']);
  });

  it('a valid scenario still parses (no error from the cross checks)', () => {
    const r = parseScenarioText(
      'name: ok\nduration: 5m\nnodes: [{ name: m1, master: true }]\nparents: [{ key: kube-apiserver, kind: apiserver }]\nfaults: [{ type: reboot, at: 1m, node: m1 }]\n',
    );
    expect(r.ok ? [] : r.errors).toEqual([]);
  });

  it('lastseen simulate --file prints them all, exits 2, no stack trace', async () => {
    const file = join(dir, 'scenario.yaml');
    const r = await lastseen(['simulate', '--file', file]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toMatch(STACK);
    expect(pathsIn(r.stderr, file).sort()).toEqual([...SCENARIO_PATHS.schema, ...SCENARIO_PATHS.references, ...SCENARIO_PATHS.policy].sort());
    expect(r.stderr).toMatch(/10 error\(s\); the scenario was not run/);
  });
});

describe('a policy: schema and cross-field rules in one pass', () => {
  it('parsePolicyText returns every error, even beside unknown keys and a bad selector', () => {
    const r = parsePolicyText(POLICY);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path).sort()).toEqual([...POLICY_PATHS.schema, ...POLICY_PATHS.crossField].sort());
  });

  it('lastseen policy validate FILE prints them all, exits 2, no stack trace', async () => {
    const file = join(dir, 'policy.yaml');
    const r = await lastseen(['policy', 'validate', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toMatch(STACK);
    const paths = pathsIn(r.stderr, file);
    for (const p of [...POLICY_PATHS.schema, ...POLICY_PATHS.crossField]) expect(paths).toContain(p);
  });

  it('lastseen policy validate CONFIGMAP prints them all under data.policy.yaml, exits 2, no stack trace', async () => {
    const file = join(dir, 'configmap.yaml');
    const r = await lastseen(['policy', 'validate', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toMatch(STACK);
    const paths = pathsIn(r.stderr, file, 'data.policy.yaml: ');
    for (const p of [...POLICY_PATHS.schema, ...POLICY_PATHS.crossField]) expect(paths).toContain(p);
  });
});
