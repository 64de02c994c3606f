// `wait-checkpoint`, the heartbeat sidecar's postStart hook, as the kubelet runs it: the sidecar's
// own entry point in a process of its own. It returns (exit 0) when the parent may start.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEARTBEAT_MAIN, RUN_TIMEOUT_MS, runCli } from './cli-process.test-helpers.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'lastseen-wait-checkpoint-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const beat = (phase: string) =>
  `${JSON.stringify({
    version: 1,
    node: 'm1',
    namespace: 'kube-system',
    key: 'kube-apiserver',
    holder: 'kube-apiserver-checkpoint-m1',
    holderUid: '',
    role: 'checkpoint',
    phase,
    sequence: 2,
    renewTime: '2026-12-06T22:00:00.000000Z',
    intervalMs: 1000,
  })}\n`;
const args = () => ['wait-checkpoint', '--heartbeat-dir', dir, '--max', '20s'];
const env = { NODE_NAME: 'm1', POD_NAMESPACE: 'kube-system', LASTSEEN_PARENT_KEY: 'kube-apiserver', LASTSEEN_ROLE: '' };

describe('lastseen wait-checkpoint', () => {
  it('holds the parent while its copy starts and returns when the copy is Ready', { timeout: RUN_TIMEOUT_MS + 5_000 }, async () => {
    const file = join(dir, 'kube-system_kube-apiserver.checkpoint.json');
    writeFileSync(file, beat('Starting'));
    // The copy keeps beating Starting, then turns Ready, while the hook waits.
    const beats = setInterval(() => writeFileSync(file, beat('Starting')), 400);
    const started = Date.now();
    const run = runCli(HEARTBEAT_MAIN, args(), env);
    // tsx takes a while to start on a loaded machine: Ready comes well after the hook has looked.
    setTimeout(() => {
      clearInterval(beats);
      writeFileSync(file, beat('Ready'));
    }, 6_000);
    const r = await run;
    rmSync(file);
    expect(r.code).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(6_000);
    expect(r.stdout).toContain("the checkpoint kube-apiserver-checkpoint-m1 is starting: the parent's containers wait (at most 20s)");
    expect(r.stdout).toMatch(/the checkpoint kube-apiserver-checkpoint-m1 is Ready; starting after \d+\.\ds/);
  });

  it('returns at once when no copy of the parent runs here, and in the copy itself', async () => {
    const none = await runCli(HEARTBEAT_MAIN, args(), env);
    expect(none).toMatchObject({ code: 0, stderr: '' });
    expect(none.stdout).toContain('no checkpoint of this parent runs on this node; starting at once');
    writeFileSync(join(dir, 'kube-system_kube-apiserver.checkpoint.json'), beat('Starting'));
    const copy = await runCli(HEARTBEAT_MAIN, args(), { ...env, LASTSEEN_ROLE: 'checkpoint' });
    expect(copy.code).toBe(0);
    expect(copy.stdout).toContain('this is the checkpoint itself; starting at once');
  });

  it('exits 2 naming every missing identity and a bad --max', async () => {
    const r = await runCli(HEARTBEAT_MAIN, ['wait-checkpoint', '--max', 'soon'], { NODE_NAME: '', POD_NAMESPACE: '', LASTSEEN_PARENT_KEY: '' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--node (or env NODE_NAME) is required');
    expect(r.stderr).toContain('--parent-key (or env LASTSEEN_PARENT_KEY) is required');
    expect(r.stderr).toContain('--max:');
  });
});
