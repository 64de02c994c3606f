import { mkdtempSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isTempName, writeFileAtomic } from './atomic.js';
import { StoreError } from './errors.js';
import { FaultFs } from './fault-fs.test-helpers.js';
import { parentPod } from './fixtures.test-helpers.js';
import { ManifestDir } from './manifests.js';
import { sanitize } from './sanitize.js';

const ID = 'kube-system/kube-apiserver';
const FILE = 'lastseen-kube-system-kube-apiserver.json';
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'lastseen-manifests-'));
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

function manifest(image = 'v1'): V1Pod {
  const pod = parentPod();
  pod.spec!.containers[0]!.image = image;
  return sanitize(pod, { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: '/var/lib/lastseen/checkpoints/kube-system_kube-apiserver' }).manifest;
}

describe('writeFileAtomic', () => {
  it('writes, then skips identical bytes without touching the file', async () => {
    const path = join(dir, 'f.json');
    expect(await writeFileAtomic(path, Buffer.from('a'), { mode: 0o600 })).toBe('written');
    const before = await fsp.stat(path);
    expect(await writeFileAtomic(path, Buffer.from('a'), { mode: 0o600 })).toBe('unchanged');
    const after = await fsp.stat(path);
    expect([after.ino, after.mtimeMs]).toEqual([before.ino, before.mtimeMs]);
    expect(await writeFileAtomic(path, Buffer.from('b'), { mode: 0o600 })).toBe('written');
    expect((await fsp.readFile(path)).toString()).toBe('b');
    expect((await fsp.stat(path)).mode & 0o777).toBe(0o600);
  });

  it('corrects the mode of identical bytes', async () => {
    const path = join(dir, 'f.json');
    await fsp.writeFile(path, 'a', { mode: 0o644 });
    expect(await writeFileAtomic(path, Buffer.from('a'), { mode: 0o600 })).toBe('unchanged');
    expect((await fsp.stat(path)).mode & 0o777).toBe(0o600);
  });

  it('renames a dot-temp file in the same folder and fsyncs the file and the folder', async () => {
    const fs = new FaultFs();
    await writeFileAtomic(join(dir, 'f.json'), Buffer.from('a'), { mode: 0o600, fs });
    const ops = fs.log.map((l) => l.replace(dir, 'D').replace(/\.f\.json\.[0-9a-f]{8}\.tmp/, '.f.json.TMP'));
    expect(ops).toEqual([
      'readFile D/f.json',
      'create D/.f.json.TMP',
      'write D/.f.json.TMP',
      'chmod D/.f.json.TMP',
      'sync D/.f.json.TMP',
      'close D/.f.json.TMP',
      `rename D/.f.json.TMP -> ${dir}/f.json`,
      'open D',
      'sync D',
      'close D',
    ]);
  });

  it.each(['create', 'write', 'sync', 'rename'] as const)('on %s failure: a StoreError naming the path, no temp file, old content kept', async (op) => {
    const path = join(dir, 'f.json');
    await fsp.writeFile(path, 'old');
    const fs = new FaultFs({ fail: (o) => (o === op ? 'ENOSPC' : null) });
    const err = await writeFileAtomic(path, Buffer.from('new'), { mode: 0o600, fs }).catch((e) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(err.message).toContain(path);
    expect(err.message).toMatch(/ENOSPC: the file system is full/);
    expect(await fsp.readdir(dir)).toEqual(['f.json']);
    expect((await fsp.readFile(path)).toString()).toBe('old');
  });

  it('recognises its temp names', () => {
    expect(isTempName('.lastseen-a-b.json.0123abcd.tmp')).toBe(true);
    expect(isTempName('lastseen-a-b.json')).toBe(false);
    expect(isTempName('.dockerconfigjson')).toBe(false);
  });
});

describe('ManifestDir', () => {
  it('activates, reports active, retires', async () => {
    const m = new ManifestDir({ dir });
    expect(await m.activate(ID, manifest())).toBe('written');
    expect(await m.activate(ID, manifest())).toBe('unchanged');
    expect(await m.active()).toEqual([ID]);
    expect(JSON.parse((await fsp.readFile(join(dir, FILE))).toString())).toEqual(manifest());
    expect((await fsp.stat(join(dir, FILE))).mode & 0o777).toBe(0o600);
    expect(await m.retire(ID)).toBe('removed');
    expect(await m.retire(ID)).toBe('absent');
    expect(await m.active()).toEqual([]);
  });

  it('an absent folder has nothing active', async () => {
    expect(await new ManifestDir({ dir: join(dir, 'missing') }).active()).toEqual([]);
  });

  it('refuses a manifest that is not this checkpoint', async () => {
    const m = new ManifestDir({ dir });
    await expect(m.activate('other/kube-apiserver', manifest())).rejects.toMatchObject({ code: 'EINVAL' });
    await expect(m.activate('kube-system/kube-apiserver', parentPod())).rejects.toThrow(/lastseen.dev\/parent/);
    await expect(m.activate('../etc/kube-apiserver', manifest())).rejects.toMatchObject({ code: 'EINVAL' });
  });

  it('reads ids from content, ignores other files, reports broken ones of ours', async () => {
    const m = new ManifestDir({ dir });
    await m.activate(ID, manifest());
    await fsp.writeFile(join(dir, 'kube-scheduler.yaml'), 'apiVersion: v1');
    await fsp.writeFile(join(dir, 'lastseen-torn.json'), '{"kind":"Po');
    await fsp.writeFile(join(dir, 'lastseen-kube-system-other.json'), JSON.stringify(manifest()));
    await fsp.writeFile(join(dir, 'lastseen-no-annotation.json'), JSON.stringify({ kind: 'Pod', metadata: { namespace: 'a' } }));
    const scan = await m.scan();
    expect(scan.active).toEqual([ID]);
    expect(scan.problems.map((p) => [p.file, p.reason.replace(/\(.*\)/, '()')])).toEqual([
      ['lastseen-kube-system-other.json', `its content names ${ID}, whose file would be ${FILE}`],
      ['lastseen-no-annotation.json', 'annotation lastseen.dev/checkpoint-of is missing'],
      ['lastseen-torn.json', 'not valid JSON ()'],
    ]);
  });

  it('removes only its own stray temp files', async () => {
    const m = new ManifestDir({ dir });
    await fsp.writeFile(join(dir, '.lastseen-kube-system-x.json.0123abcd.tmp'), '{');
    await fsp.writeFile(join(dir, '.kube-apiserver.yaml.swp'), '');
    await fsp.writeFile(join(dir, '.other.json.0123abcd.tmp'), '');
    expect(await m.removeStrays()).toEqual(['.lastseen-kube-system-x.json.0123abcd.tmp']);
    expect((await fsp.readdir(dir)).sort()).toEqual(['.kube-apiserver.yaml.swp', '.other.json.0123abcd.tmp']);
  });

  it('EROFS on activate: a clear error naming the manifest, the previous manifest intact', async () => {
    const m = new ManifestDir({ dir });
    await m.activate(ID, manifest('v1'));
    const faulty = new ManifestDir({ dir, fs: new FaultFs({ fail: (op) => (op === 'create' ? 'EROFS' : null) }) });
    const err = await faulty.activate(ID, manifest('v2')).catch((e) => e);
    expect(err).toMatchObject({ code: 'EROFS' });
    expect(err.message).toContain(`cannot create the temporary file of ${join(dir, FILE)}: EROFS`);
    expect(err.message).toMatch(/read-only/);
    expect(JSON.parse((await fsp.readFile(join(dir, FILE))).toString()).spec.containers[0].image).toBe('v1');
  });
});

describe('ManifestDir crash consistency', () => {
  it.each([
    ['first activation', null],
    ['a refresh of an active manifest', 'v1'],
  ])('%s: after a crash at every step the kubelet sees the old or the new manifest; a re-run converges', async (_name, oldImage) => {
    const seen = new Set<string>();
    let crashAt = 1;
    for (; crashAt < 100; crashAt++) {
      await fsp.rm(dir, { recursive: true, force: true });
      await fsp.mkdir(dir);
      if (oldImage) await new ManifestDir({ dir }).activate(ID, manifest(oldImage));
      const fs = new FaultFs({ crashAt });
      await new ManifestDir({ dir, fs }).activate(ID, manifest('v2')).catch((err) => {
        if (!fs.crashed) throw err;
      });
      const m = new ManifestDir({ dir });
      const scan = await m.scan();
      expect(scan.problems).toEqual([]);
      // What the kubelet would read: every non-dot file in the folder.
      const visible = (await fsp.readdir(dir)).filter((n) => !n.startsWith('.'));
      const images = await Promise.all(visible.map(async (n) => JSON.parse((await fsp.readFile(join(dir, n))).toString()).spec.containers[0].image));
      const state = images.length === 0 ? 'none' : images[0];
      expect(scan.active).toEqual(images.length ? [ID] : []);
      expect([oldImage ?? 'none', 'v2']).toContain(state);
      seen.add(state);
      await m.removeStrays();
      expect(await m.activate(ID, manifest('v2'))).toBe(state === 'v2' ? 'unchanged' : 'written');
      expect(await fsp.readdir(dir)).toEqual([FILE]);
      if (!fs.crashed) break;
    }
    expect(crashAt).toBeGreaterThan(8);
    expect(seen).toEqual(new Set([oldImage ?? 'none', 'v2']));
  });

  it('retire: a crash at any step leaves the manifest present or gone', async () => {
    for (let crashAt = 1; crashAt < 10; crashAt++) {
      await new ManifestDir({ dir }).activate(ID, manifest());
      const fs = new FaultFs({ crashAt });
      const outcome = await new ManifestDir({ dir, fs }).retire(ID).catch(() => 'crashed');
      expect((await new ManifestDir({ dir }).scan()).problems).toEqual([]);
      if (outcome !== 'crashed') {
        expect(await new ManifestDir({ dir }).active()).toEqual([]);
        return;
      }
      await new ManifestDir({ dir }).retire(ID);
    }
    throw new Error('retire never completed');
  });
});
