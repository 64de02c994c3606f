/**
 * The single-file bundle the container image ships: `npm run bundle` builds dist/lastseen.mjs,
 * and that file alone (copied away from node_modules, as in the image) runs the CLI, including
 * the parts that talk to a real kube-apiserver through @kubernetes/client-node.
 */
import { copyFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlane } from './harness.js';
import { type RunResult, runCommand } from './processes.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** A budget, not a target: it catches a dependency pulled in by mistake (4.4 MiB whitespace-minified with every subcommand; 8.5 MiB readable, of which client-node was 4.4 MiB). */
const MAX_BUNDLE_BYTES = 12 * 1024 * 1024;
const RUN_TIMEOUT_MS = 120_000;

function run(cmd: string, args: string[], cwd: string): Promise<RunResult> {
  return runCommand(cmd, args, { cwd, timeoutMs: RUN_TIMEOUT_MS });
}

let away: string;
let bundle: string;

beforeAll(async () => {
  const built = await run('npm', ['run', '--silent', 'bundle'], ROOT);
  expect(built.stderr).toBe('');
  expect(built.code).toBe(0);
  // Away from the repository, so that nothing can be resolved from node_modules: as in the image.
  away = await mkdtemp(join(tmpdir(), 'lastseen-bundle-'));
  bundle = join(away, 'lastseen.mjs');
  await copyFile(join(ROOT, 'dist', 'lastseen.mjs'), bundle);
});

afterAll(async () => {
  if (away) await rm(away, { recursive: true, force: true });
});

describe('dist/lastseen.mjs', () => {
  it('is one ES module for Node 22+ with a shebang, importing only Node built-ins, within its size budget', async () => {
    const text = await readFile(bundle, 'utf8');
    expect(text.startsWith('#!/usr/bin/env node\n')).toBe(true);
    const imports = [...text.matchAll(/^import .* from ["']([^"']+)["'];?$/gm)].map((m) => m[1]);
    expect(imports.length).toBeGreaterThan(0);
    const builtin = (m: string) => m.startsWith('node:') || builtinModules.includes(m);
    expect(imports.filter((m) => !builtin(m ?? ''))).toEqual([]);
    const { size } = await stat(bundle);
    process.stderr.write(`bundle size: ${size} bytes (${(size / 1024 / 1024).toFixed(2)} MiB)\n`);
    expect(size).toBeLessThan(MAX_BUNDLE_BYTES);
  });

  it('is pure ASCII, so V8 holds its source one byte per character (a two-byte source cost about 9 MiB of RSS)', async () => {
    const bytes = await readFile(bundle);
    const at = bytes.findIndex((b) => b > 0x7f);
    expect(at === -1 ? 'ascii' : `non-ASCII byte at ${at}: ${bytes.subarray(Math.max(0, at - 40), at + 10).toString('latin1')}`).toBe('ascii');
  });

  it('prints its help, listing the subcommands', async () => {
    const r = await run(process.execPath, [bundle, '--help'], away);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    for (const cmd of ['policy', 'status']) expect(r.stdout).toMatch(new RegExp(`^\\s+${cmd}\\b`, 'm'));
  });

  it('validates the shipped policy, and names the field of a bad one', async () => {
    const good = await run(process.execPath, [bundle, 'policy', 'validate', join(ROOT, 'deploy/base/policy.yaml')], away);
    expect(good.stderr).toBe('');
    expect(good.code).toBe(0);
    expect(good.stdout).toContain('whenApiUnreachable: activate');
    const badFile = join(away, 'bad.yaml');
    await writeFile(badFile, 'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults:\n  interval: 10s\n  window: 15s\n');
    const bad = await run(process.execPath, [bundle, 'policy', 'validate', badFile], away);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('defaults.window');
  });

  it('talks to a real kube-apiserver (client-node survives bundling)', async () => {
    const r = await run(process.execPath, [bundle, 'status', '--kubeconfig', controlPlane().adminKubeconfig, '--node', 'no-such-node', '-o', 'json'], away);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ kind: 'ParentStatusList', items: [] });
  });
});
