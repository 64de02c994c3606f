// `lastseen simulate` as an operator runs it: the real CLI in a child process, its exit status
// and output. 0: passed, 1: failed verdict, 2: invalid input (documented in `simulate --help`).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLE = join(ROOT, 'examples/scenarios/process-faults.yaml');

function simulate(...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'simulate', ...args], { cwd: ROOT, encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function scenarioFile(edit: (doc: Record<string, unknown>) => void): string {
  const doc = parse(readFileSync(EXAMPLE, 'utf8')) as Record<string, unknown>;
  edit(doc);
  const file = join(mkdtempSync(join(tmpdir(), 'lastseen-sim-')), 'scenario.yaml');
  writeFileSync(file, stringify(doc));
  return file;
}

describe('lastseen simulate: exit status', () => {
  it('0 when the run passes', () => {
    const r = simulate('--file', EXAMPLE);
    expect(r.stdout).toMatch(/verdict: PASS/);
    expect(r.status).toBe(0);
  });

  it('1 when the verdict fails (an expectation does not hold)', () => {
    const file = scenarioFile((d) => {
      d.expect = { maxUnserved: '1s' };
    });
    const r = simulate('--file', file);
    expect(r.stdout).toMatch(/expectation failed: expected at most 1s unserved/);
    expect(r.stdout).toMatch(/verdict: FAIL/);
    expect(r.status).toBe(1);
  });

  it('2 when the scenario file is invalid, each error with its field path; the scenario is not run', () => {
    const file = scenarioFile((d) => {
      (d.faults as Array<Record<string, unknown>>)[1]!.duration = 'forever';
    });
    const r = simulate('--file', file);
    expect(r.stderr).toContain(`${file}: faults[1].duration:`);
    expect(r.stderr).toMatch(/1 error\(s\); the scenario was not run/);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it('random --net sweeps network schedules (0 when no invariant breaks); --net elsewhere is invalid input', () => {
    const r = simulate('random', '--net', '--seeds', '1..3');
    expect(r.stdout).toMatch(/^random --net seeds 1\.\.3 \(lastseen\): 3 runs, 3 passed, 0 failed/);
    expect(r.status).toBe(0);
    const one = simulate('random-one', '--net', '--seed', '4');
    expect(one.stdout).toMatch(/scenario random-net-4/);
    const bad = simulate('master-reboot', '--net');
    expect(bad.stderr).toMatch(/--net draws random network schedules/);
    expect(bad.status).toBe(2);
  });

  it('2 for an unreadable file, an unknown scenario and an unknown option', () => {
    expect(simulate('--file', join(ROOT, 'no-such-file.yaml')).status).toBe(2);
    expect(simulate('no-such-scenario').status).toBe(2);
    const bad = simulate('master-reboot', '--no-such-option');
    expect(bad.stderr).toMatch(/unknown option/);
    expect(bad.status).toBe(2);
  });

  it('--help documents the codes and exits 0', () => {
    const r = simulate('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/Exit status:\n\s+0 .*\n\s+1 .*verdict failed[\s\S]*\n\s+2 .*invalid input/);
  });
});

describe('lastseen simulate --json --events', () => {
  it('includes the timeline, one object per text line, in the same order', () => {
    const text = simulate('--file', EXAMPLE);
    const lines = text.stdout.split('\n\n')[0]!.split('\n');
    const r = simulate('--file', EXAMPLE, '--json', '--events');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as {
      events: number;
      outcome: unknown;
      timeline: Array<{ t: number; node: string; kind: string; text: string; key?: string }>;
    };
    // The existing fields stay: `events` is still the number of simulated events.
    expect(typeof out.events).toBe('number');
    expect(out.outcome).toMatchObject({ faultAt: 120 });
    expect(out.timeline).toHaveLength(lines.length);
    out.timeline.forEach((e, i) => {
      const fields = lines[i]!.trim().split(/\s+/);
      expect([fields[1], fields[2]]).toEqual([e.node, e.kind]);
      expect(lines[i]!.endsWith(` ${e.text}`)).toBe(true);
    });
    expect(out.timeline).toContainEqual({ t: 300, node: 'm1', kind: 'fault', text: "kube-flannel's process hangs for 120s", key: 'kube-flannel' });
    const ts = out.timeline.map((e) => e.t);
    expect([...ts].sort((a, b) => a - b)).toEqual(ts);
  });

  it('without --events the JSON has no timeline; --events without --json or with --seeds is invalid (2)', () => {
    const plain = JSON.parse(simulate('--file', EXAMPLE, '--json').stdout) as Record<string, unknown>;
    expect(plain).not.toHaveProperty('timeline');
    expect(simulate('--file', EXAMPLE, '--events').status).toBe(2);
    expect(simulate('--file', EXAMPLE, '--json', '--events', '--seeds', '1..2').status).toBe(2);
  });
});
