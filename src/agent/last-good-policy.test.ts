// The last good policy on disk: written atomically, read back validated, refused with a reason when
// damaged, absent when never written (a restart must not fall back to the built-in defaults).
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LAST_GOOD_POLICY_FILE, LastGoodPolicyFile } from './last-good-policy.js';

const head = 'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\n';
const GOOD = `${head}defaults: { interval: 2s, window: 8s }\noverrides: [{ name: apiserver, selector: { parentKeys: [kube-apiserver] }, policy: { whenApiUnreachable: activate } }]\n`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lastseen-lastgood-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('LastGoodPolicyFile', () => {
  it('nothing persisted: null', async () => {
    expect(await new LastGoodPolicyFile(dir).load()).toBeNull();
  });

  it('a saved policy is read back by a new instance (an agent restart), overrides and all, with no temporary file left', async () => {
    await new LastGoodPolicyFile(dir).save(GOOD);
    const loaded = await new LastGoodPolicyFile(dir).load();
    expect(loaded?.ok).toBe(true);
    if (!loaded?.ok) return;
    expect(loaded.text).toBe(GOOD);
    expect(loaded.policy.defaults.intervalMs).toBe(2_000);
    expect(loaded.policy.overrides.map((o) => o.name)).toEqual(['apiserver']);
    expect(await readdir(dir)).toEqual([LAST_GOOD_POLICY_FILE]);
  });

  it('the last of several saves wins', async () => {
    const f = new LastGoodPolicyFile(dir);
    await Promise.all([f.save(`${head}defaults: { interval: 1s, window: 4s }\n`), f.save(GOOD)]);
    expect(await readFile(join(dir, LAST_GOOD_POLICY_FILE), 'utf8')).toBe(GOOD);
  });

  it('a damaged or invalid file is refused with a reason, never trusted', async () => {
    await writeFile(join(dir, LAST_GOOD_POLICY_FILE), `${head}defaults: { interval: 10s, window: 15s }\n`);
    const loaded = await new LastGoodPolicyFile(dir).load();
    expect(loaded).toMatchObject({ ok: false, reason: expect.stringContaining('defaults.window') });
  });

  it('a save into a missing folder rejects (the caller logs it)', async () => {
    await expect(new LastGoodPolicyFile(join(dir, 'nope')).save(GOOD)).rejects.toThrow();
  });
});
