// `ready`, the heartbeat sidecar's readiness probe, as the kubelet runs it: the sidecar's own entry
// point (heartbeat-main.ts) in a process of its own; the exit code is the verdict and a failure's
// reason is on stderr (the kubelet puts it in the probe's Event).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEARTBEAT_MAIN, runCli } from './cli-process.test-helpers.js';

const ready = (args: string[]) => runCli(HEARTBEAT_MAIN, ['ready', ...args]);

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'lastseen-ready-cli-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function stateFile(name: string, content: string): string {
  const f = join(dir, name);
  writeFileSync(f, content);
  return f;
}
const state = (o: Record<string, unknown>) => JSON.stringify({ v: 1, phase: 'Ready', at: Date.now(), intervalMs: 5000, ...o });

describe('lastseen ready --ready-file FILE', () => {
  it('exits 0 on a fresh Ready proof', async () => {
    const r = await ready([`--ready-file=${stateFile('fresh', state({}))}`]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toContain("ready: this pod's own process holds its port and answers");
  });

  it('exits 1 on a stale Ready proof, saying how old it is', async () => {
    const r = await ready(['--ready-file', stateFile('stale', state({ at: Date.now() - 60_000 }))]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not ready: the last proof \(Ready\) is from \d+\.\ds ago, older than 3 intervals of 5000ms/);
  });

  it('exits 1 while Starting, with the proof that failed', async () => {
    const why = '0 of 20 probes answered within 2000ms (port 6443 is shared by 2 listeners)';
    const r = await ready([`--ready-file=${stateFile('starting', state({ phase: 'Starting', why }))}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(why);
  });

  it('exits 1 on a missing or corrupt file, naming it', async () => {
    const missing = join(dir, 'never-written');
    const m = await ready([`--ready-file=${missing}`]);
    expect(m.code).toBe(1);
    expect(m.stderr).toContain(`not ready: ${missing} does not exist`);
    const corrupt = stateFile('corrupt', '{"v":1,"pha');
    const c = await ready([`--ready-file=${corrupt}`]);
    expect(c.code).toBe(1);
    expect(c.stderr).toContain(`not ready: ${corrupt} is not JSON`);
    expect(c.stderr).not.toMatch(/^\s+at /m);
  });

  it('exits 2 without --ready-file', async () => {
    const r = await ready([]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--ready-file is required');
  });
});
