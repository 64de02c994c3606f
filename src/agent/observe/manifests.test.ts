// The manifest observer over the node's real folders (a temporary store and manifest folder):
// what it reads, that a removal is noticed by inotify without waiting for the period, and that a
// removed folder is read as empty and watched again once it is back.
import { mkdtempSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { capture } from '../../checkpoint/capture.js';
import { memoryResolver, parentPod } from '../../checkpoint/fixtures.test-helpers.js';
import { ManifestDir } from '../../checkpoint/manifests.js';
import { Store } from '../../checkpoint/store.js';
import type { ManifestFile } from '../../core/manifest.js';
import { realTimers } from '../../core/time.js';
import { withoutPortSharing } from '../actuators.js';
import { nodeCheckpointDisk } from '../run-recover.js';
import { type ManifestCheck, watchManifestFolder, watchManifests } from './manifests.js';

const ID = 'kube-system/kube-apiserver';
const log = pino({ level: 'silent' });
let root: string;
let store: Store;
let dir: ManifestDir;
let specHash: string;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'lastseen-manifest-watch-'));
  store = new Store({ stateDir: join(root, 'state') });
  dir = new ManifestDir({ dir: join(root, 'manifests') });
  await mkdir(dir.dir, { recursive: true });
  const opts = {
    parentKey: 'kube-apiserver',
    node: 'node-a',
    checkpointDir: store.checkpointDir(ID),
    capturedAt: '2026-01-02T03:05:00.000Z',
    lastReadyAt: null,
  };
  const r = await capture(parentPod(), opts, memoryResolver());
  await store.save(ID, r.capture, r.data);
  specHash = r.capture.specHash;
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const check = (ticket = 0): ManifestCheck => ({ id: ID, specHash, ticket });

describe('nodeCheckpointDisk.manifests', () => {
  it('absent, ours (shared or not), changed, and absent again when the folder is gone', async () => {
    const disk = nodeCheckpointDisk(store, dir);
    const read = async () => (await disk.manifests([check()])).get(ID);
    expect(await read()).toBe('absent');
    const copy = (await store.load(ID))!.manifest;
    await dir.activate(ID, copy);
    expect(await read()).toBe('ours');
    await dir.activate(ID, withoutPortSharing(copy));
    expect(await read()).toBe('ours');
    // Edited by hand: another image.
    const edited = JSON.parse(await readFile(dir.pathOf(ID), 'utf8'));
    edited.spec.containers[0].image = 'registry.example/evil:1';
    await writeFile(dir.pathOf(ID), JSON.stringify(edited));
    expect(await read()).toBe('changed');
    await writeFile(dir.pathOf(ID), '{ not json');
    expect(await read()).toBe('changed');
    // Laid out differently but the same content: still ours.
    await writeFile(dir.pathOf(ID), JSON.stringify(copy, null, 2));
    expect(await read()).toBe('ours');
    await rm(dir.dir, { recursive: true });
    expect(await read()).toBe('absent');
  });

  it('what this process wrote is ours even when the stored copy moved on since', async () => {
    const disk = nodeCheckpointDisk(store, dir);
    const older = structuredClone((await store.load(ID))!.manifest);
    older.spec!.containers[0]!.image = 'registry.example/kube-apiserver:older';
    await dir.activate(ID, older);
    expect((await disk.manifests([check()])).get(ID)).toBe('changed');
    disk.written(ID, older);
    expect((await disk.manifests([check()])).get(ID)).toBe('ours');
  });
});

describe('watchManifests', () => {
  function observe(pollMs: number) {
    const seen: Array<{ file: ManifestFile; ticket: number }> = [];
    const w = watchManifests({
      subject: { manifestChecks: () => [check(7)], manifestSeen: (c, file) => seen.push({ file, ticket: c.ticket }) },
      reader: { manifests: (c) => nodeCheckpointDisk(store, dir).manifests(c), watch: watchManifestFolder(dir.dir) },
      pollMs,
      log,
      timers: realTimers,
    });
    return { w, seen, last: () => seen.at(-1)?.file };
  }
  const until = async (f: () => boolean, ms = 3_000) => {
    const t0 = Date.now();
    while (!f()) {
      if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it('hands each reading back with its ticket; a removal is noticed by inotify, long before the period', async () => {
    await dir.activate(ID, (await store.load(ID))!.manifest);
    const o = observe(60_000);
    o.w.start();
    await until(() => o.last() === 'ours');
    expect(o.seen[0]).toEqual({ file: 'ours', ticket: 7 });
    await rm(dir.pathOf(ID));
    await until(() => o.last() === 'absent');
    await o.w.stop();
  });

  it('a removed folder reads as absent at once; the first scan that finds it back watches it again', async () => {
    await dir.activate(ID, (await store.load(ID))!.manifest);
    const o = observe(60_000);
    o.w.start();
    await until(() => o.last() === 'ours');
    await rm(dir.dir, { recursive: true });
    await until(() => o.last() === 'absent'); // the watch saw its folder go
    await mkdir(dir.dir);
    await dir.activate(ID, (await store.load(ID))!.manifest);
    await o.w.scanOnce(); // what the period does: nothing watched the new folder yet
    expect(o.last()).toBe('ours');
    await rm(dir.pathOf(ID));
    await until(() => o.last() === 'absent'); // inotify again, not the 60 s period
    await o.w.stop();
  });
});
