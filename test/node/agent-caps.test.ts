// The agent's capabilities (deploy/base/agent-daemonset.yaml) are enough for copies of non-root
// parents, and needed: the store's work for a runAsUser 1000 / fsGroup 1000 parent (files given to
// that user and group, a mode put back, a token replaced in place) run as root with exactly the
// DaemonSet's capability set, and with none (every capability dropped, as before copies of non-root parents got their owners and modes).
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { REPO } from './env.js';

const run = promisify(execFile);
let dir = '';

/** The capabilities the agent's container adds to an empty set. */
async function agentCapabilities(): Promise<string[]> {
  const docs = parseAllDocuments(await readFile(join(REPO, 'deploy', 'base', 'agent-daemonset.yaml'), 'utf8')).map((d) => d.toJSON());
  const ds = docs.find((d) => d?.kind === 'DaemonSet');
  const sc = ds.spec.template.spec.containers[0].securityContext;
  expect(sc.capabilities.drop).toEqual(['ALL']);
  return sc.capabilities.add ?? [];
}

/** store-as-agent.ts as root with only `caps` (setpriv: bounding set, nothing inherited). */
async function storeAs(caps: string[]): Promise<{ ok: boolean; error?: string }> {
  const set = ['-all', ...caps.map((c) => `+${c.toLowerCase()}`)].join(',');
  const tsx = join(REPO, 'node_modules', '.bin', 'tsx');
  const r = await run('setpriv', [`--bounding-set=${set}`, '--inh-caps=-all', '--', tsx, join(REPO, 'test', 'node', 'store-as-agent.ts'), dir], {
    timeout: 60_000,
  });
  return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}');
}

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('this test needs root: it runs the store as the agent does, as root with a reduced capability set');
});
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the agent’s capabilities and copies of non-root parents', () => {
  it('the DaemonSet’s capability set does the store’s work for a runAsUser 1000 / fsGroup 1000 parent', async () => {
    dir = await mkdtemp(join(tmpdir(), 'lastseen-caps-'));
    expect(await storeAs(await agentCapabilities())).toEqual({ ok: true });
  });

  it('with every capability dropped it cannot', async () => {
    dir = await mkdtemp(join(tmpdir(), 'lastseen-caps-'));
    const r = await storeAs([]);
    expect(r.ok).toBe(false);
    expect(r.error).toMatch(/EPERM|EACCES/);
  });
});
