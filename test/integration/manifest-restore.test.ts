// The node's files observed, end to end against the real kube-apiserver: `lastseen agent` and
// `lastseen heartbeat` as processes (fault-helpers.ts), the parent killed so its checkpoint is
// Active, then the kubelet's folder changed from outside:
// 1. the active manifest removed: written again within 5 s (ManifestRemoved, CheckpointRestored);
// 2. the whole folder removed: made again and the manifest written within 5 s;
// 3. the manifest edited by hand: the stored copy written again within 5 s;
// 4. a folder that cannot be made (a regular file in its place) when the parent dies: a Warning
//    ActivationFailed with the errno, never CheckpointActivated, until the path is free again and
//    the write succeeds.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { appears, captured, exists, faultSetup, healthy } from './fault-helpers.js';
import { kubeConfigFor, waitFor } from './harness.js';

const POLICY = '{ interval: 250ms, window: 1s, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, channels: [lease] }';
/** What the brief of this rule promises: a lost manifest is back within this long. */
const RESTORED_WITHIN_MS = 5_000;

async function events(ns: string): Promise<CoreV1Event[]> {
  const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  return (await core.listNamespacedEvent({ namespace: ns })).items;
}
const reasons = async (ns: string) => (await events(ns)).map((e) => e.reason ?? '');

describe("the kubelet's folder observed", () => {
  it('an Active parent whose manifest is removed, whose folder is removed, or whose manifest is edited gets it back within 5 s', async () => {
    const s = await faultSetup('mrestore', { policy: POLICY });
    const hb = s.heartbeat();
    await captured(s);
    await healthy(s.agent);
    await hb.stop('SIGKILL');
    await appears(s.manifest);
    const written = await readFile(s.manifest, 'utf8');
    await waitFor(async () => (await reasons(s.ns)).includes('CheckpointActivated'), { what: 'CheckpointActivated' });

    // 1. The manifest removed by hand.
    await rm(s.manifest);
    const removedMs = await appears(s.manifest, RESTORED_WITHIN_MS);
    expect(removedMs).toBeLessThan(RESTORED_WITHIN_MS);
    expect(await readFile(s.manifest, 'utf8')).toBe(written);
    const after1 = await waitFor(
      async () => {
        const r = await reasons(s.ns);
        return r.includes('ManifestRemoved') && r.includes('CheckpointRestored') ? r : undefined;
      },
      { what: 'ManifestRemoved and CheckpointRestored Events' },
    );
    expect(after1.filter((r) => r === 'CheckpointActivated')).toHaveLength(1);

    // 2. The whole folder removed.
    await rm(s.dirs.manifests, { recursive: true });
    const folderMs = await appears(s.manifest, RESTORED_WITHIN_MS);
    expect(folderMs).toBeLessThan(RESTORED_WITHIN_MS);
    expect(await readFile(s.manifest, 'utf8')).toBe(written);

    // 3. The manifest edited by hand (another image): the stored copy is written again.
    const edited = JSON.parse(written);
    edited.spec.containers[0].image = 'registry.example/not-the-parent:1';
    await writeFile(s.manifest, JSON.stringify(edited));
    await waitFor(async () => (await readFile(s.manifest, 'utf8').catch(() => '')) === written, {
      timeoutMs: RESTORED_WITHIN_MS,
      intervalMs: 25,
      what: 'the edited manifest to be written again',
    });
    await waitFor(async () => (await reasons(s.ns)).includes('ManifestChanged'), { what: 'a ManifestChanged Event' });
    // Still covered as before: the state never left Active.
    expect(s.agent.logs.filter((l) => l.msg === 'transition' && l.from === 'Active')).toEqual([]);
    await s.agent.stop();
  });

  it('an activation that cannot write is a Warning ActivationFailed with the errno, never CheckpointActivated, until it can', async () => {
    const s = await faultSetup('mfail', { policy: POLICY });
    const hb = s.heartbeat();
    await captured(s);
    await healthy(s.agent);
    // A regular file where the folder should be: neither the folder nor the manifest can be made.
    await rm(s.dirs.manifests, { recursive: true });
    await writeFile(s.dirs.manifests, 'not a folder');
    await hb.stop('SIGKILL');
    const failed = await waitFor(async () => (await events(s.ns)).find((e) => e.reason === 'ActivationFailed'), {
      what: 'an ActivationFailed Event',
    });
    expect(failed.type).toBe('Warning');
    expect(failed.message).toMatch(/EEXIST|ENOTDIR/);
    // Failing for a while (a retry or two): never claimed as activated.
    await new Promise((r) => setTimeout(r, 6_000));
    expect(await reasons(s.ns)).not.toContain('CheckpointActivated');
    expect(await exists(s.manifest)).toBe(false);
    // The path is free again: the next retry makes the folder and writes the manifest.
    await rm(s.dirs.manifests);
    await appears(s.manifest, 60_000);
    await waitFor(async () => (await reasons(s.ns)).includes('CheckpointActivated'), { what: 'CheckpointActivated once written' });
    await s.agent.stop();
  });
});
