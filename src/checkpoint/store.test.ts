import { mkdtempSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Capture, capture } from './capture.js';
import { StoreError } from './errors.js';
import { FaultFs } from './fault-fs.test-helpers.js';
import { memoryResolver, parentPod } from './fixtures.test-helpers.js';
import { legacyManifestHash } from './sanitize.js';
import { Store } from './store.js';
import { tokenCopy } from './tokens.js';

const ID = 'kube-system/kube-apiserver';
let stateDir: string;

beforeEach(() => {
  stateDir = mkdtempSync(join(tmpdir(), 'lastseen-store-'));
});
afterEach(async () => {
  await fsp.rm(stateDir, { recursive: true, force: true });
});

interface Version {
  capture: Capture;
  data: Map<string, Buffer>;
}

/** A capture of the fixture pod; `generation` changes the image and the secret (a rollout). */
async function version(dir: string, generation: number, capturedAt = '2026-01-02T03:05:00.000Z'): Promise<Version> {
  const pod = parentPod();
  pod.spec!.containers[0]!.image = `registry.k8s.io/kube-apiserver:v1.34.${generation}`;
  const resolver = memoryResolver({ 'kube-system/apiserver-certs': { 'tls.crt': `CERT-${generation}`, 'tls.key': `KEY-${generation}` } });
  const store = new Store({ stateDir: dir });
  const opts = { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: store.checkpointDir(ID), capturedAt, lastReadyAt: null };
  const result = await capture(pod, opts, resolver);
  return { capture: result.capture, data: result.data };
}

/** Every path under `dir` with its kind, mode and content: a snapshot to compare states. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const visit = async (rel: string): Promise<void> => {
    for (const entry of await fsp.readdir(join(dir, rel), { withFileTypes: true })) {
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      const { mode } = await fsp.stat(join(dir, childRel));
      const perm = (mode & 0o777).toString(8);
      if (entry.isDirectory()) {
        out[`${childRel}/`] = perm;
        await visit(childRel);
      } else out[childRel] = `${perm} ${(await fsp.readFile(join(dir, childRel))).toString()}`;
    }
  };
  await visit('');
  return out;
}

describe('Store round trip', () => {
  it('saves and loads a checkpoint, lists it', async () => {
    const v1 = await version(stateDir, 1);
    const store = new Store({ stateDir });
    expect(await store.save(ID, v1.capture, v1.data)).toBe('written');
    expect(await store.load(ID)).toEqual(v1.capture);
    expect(await store.list()).toEqual({ checkpoints: [{ id: ID, capture: v1.capture }], problems: [] });
    const dir = store.checkpointDir(ID);
    expect(dir).toBe(join(stateDir, 'checkpoints', 'kube-system_kube-apiserver'));
    expect((await fsp.readFile(join(dir, 'secrets/certs/tls.key'))).toString()).toBe('KEY-1');
    const meta = JSON.parse((await fsp.readFile(join(dir, 'meta.json'))).toString());
    expect(meta).toMatchObject({ sourcePodUid: 'uid-parent-1', sourcePodName: 'kube-apiserver-x7k2p', specHash: v1.capture.specHash, lastReadyAt: null });
  });

  it('returns null / an empty list when there is nothing', async () => {
    const store = new Store({ stateDir });
    expect(await store.load(ID)).toBeNull();
    expect(await store.list()).toEqual({ checkpoints: [], problems: [] });
  });

  it('replaces a checkpoint completely: no file of the old version survives', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    v1.data.set('secrets/certs/only-in-v1', Buffer.from('x'));
    await store.save(ID, v1.capture, v1.data);
    const v2 = await version(stateDir, 2);
    expect(await store.save(ID, v2.capture, v2.data)).toBe('written');
    const snap = await snapshot(join(stateDir, 'checkpoints'));
    expect(Object.keys(snap).some((k) => k.includes('only-in-v1'))).toBe(false);
    expect(Object.keys(snap).filter((k) => k.startsWith('.'))).toEqual([]);
    expect(await store.load(ID)).toEqual(v2.capture);
  });

  it('removes a checkpoint; removing again is fine', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    await store.remove(ID);
    await store.remove(ID);
    expect(await store.load(ID)).toBeNull();
    expect(await fsp.readdir(join(stateDir, 'checkpoints'))).toEqual([]);
  });

  it('refuses a capture whose hash does not match its manifest, and data paths that escape', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await expect(store.save(ID, { ...v1.capture, specHash: 'f'.repeat(64) }, v1.data)).rejects.toThrow(/specHash/);
    for (const bad of ['../x', 'pod.json', 'secrets/../meta.json', '/etc/passwd', 'secrets']) {
      await expect(store.save(ID, v1.capture, new Map([[bad, Buffer.from('x')]]))).rejects.toMatchObject({ code: 'EINVAL' });
    }
    await expect(store.save('kube-system/../etc', v1.capture, v1.data)).rejects.toMatchObject({ code: 'EINVAL' });
    await expect(store.save('other/kube-apiserver', v1.capture, v1.data)).rejects.toThrow(/namespace/);
  });
});

describe('Store modes', () => {
  it('writes its own files 0600 in folders 0700, and each copied file and volume folder with its planned access', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    expect((await fsp.stat(stateDir)).mode & 0o777).toBe(0o700);
    const snap = await snapshot(stateDir);
    expect(Object.keys(snap).length).toBeGreaterThan(10);
    const planned: Record<string, string> = {
      'checkpoints/kube-system_kube-apiserver/secrets/certs/': '755',
      'checkpoints/kube-system_kube-apiserver/secrets/certs/tls.crt': '400',
      'checkpoints/kube-system_kube-apiserver/secrets/certs/tls.key': '400',
      'checkpoints/kube-system_kube-apiserver/configmaps/config/': '755',
      'checkpoints/kube-system_kube-apiserver/configmaps/config/config.yaml': '644',
      'checkpoints/kube-system_kube-apiserver/projected/kube-api-access/': '755',
      'checkpoints/kube-system_kube-apiserver/projected/kube-api-access/token': '644',
      'checkpoints/kube-system_kube-apiserver/projected/kube-api-access/ca.crt': '644',
      'checkpoints/kube-system_kube-apiserver/projected/kube-api-access/namespace': '644',
    };
    for (const [path, value] of Object.entries(snap)) {
      expect([path, value.split(' ')[0]]).toEqual([path, planned[path] ?? (path.endsWith('/') ? '700' : '600')]);
    }
  });

  it('puts changed modes and owners back when it reads a checkpoint', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    const key = join(store.checkpointDir(ID), 'secrets/certs/tls.key');
    await fsp.chmod(key, 0o644);
    await fsp.chmod(join(store.checkpointDir(ID), 'secrets'), 0o755);
    await fsp.chmod(join(store.checkpointDir(ID), 'secrets/certs'), 0o777);
    await store.load(ID);
    expect((await fsp.stat(key)).mode & 0o777).toBe(0o400);
    expect((await fsp.stat(join(store.checkpointDir(ID), 'secrets'))).mode & 0o777).toBe(0o700);
    expect((await fsp.stat(join(store.checkpointDir(ID), 'secrets/certs'))).mode & 0o777).toBe(0o755);
  });

  it('gives a non-root parent’s copies the owner, group and modes of its own volumes (runAsUser, fsGroup)', async () => {
    // Ids the test may chown to without being root: its own.
    const uid = process.getuid!();
    const gid = process.getgid!();
    const pod = parentPod();
    pod.spec!.securityContext = { runAsUser: uid, fsGroup: gid };
    const store = new Store({ stateDir });
    const opts = {
      parentKey: 'kube-apiserver',
      node: 'node-a',
      checkpointDir: store.checkpointDir(ID),
      capturedAt: '2026-01-02T03:05:00.000Z',
      lastReadyAt: null,
    };
    const r = await capture(pod, opts, memoryResolver());
    await store.save(ID, r.capture, r.data);
    const dir = store.checkpointDir(ID);
    const stat = async (rel: string) => {
      const st = await fsp.stat(join(dir, rel));
      return { mode: (st.mode & 0o7777).toString(8), uid: st.uid, gid: st.gid };
    };
    expect(await stat('secrets/certs/tls.key')).toEqual({ mode: '440', uid, gid });
    expect(await stat('configmaps/config/config.yaml')).toEqual({ mode: '644', uid, gid });
    expect(await stat('projected/kube-api-access/token')).toEqual({ mode: '640', uid, gid });
    expect(await stat('secrets/certs')).toEqual({ mode: '2755', uid, gid });
    // Nothing above a volume's folder lets anyone else in.
    for (const rel of ['.', 'secrets', 'configmaps', 'projected', 'pod.json', 'meta.json']) expect((await stat(rel)).mode).toMatch(/^[67]00$/);
    // The planned access is part of the copy: meta.json records it and a read puts it back.
    await fsp.chmod(join(dir, 'projected/kube-api-access/token'), 0o600);
    expect(await store.load(ID)).toEqual(r.capture);
    expect((await stat('projected/kube-api-access/token')).mode).toBe('640');
    // A token minted again in place keeps its owner, group and mode.
    const fresh = Buffer.from('fresh-token');
    await store.replaceToken(
      ID,
      tokenCopy('projected/kube-api-access/token', { namespace: 'kube-system', name: 'kube-apiserver', expirationSeconds: 3607 }, fresh, Date.now()),
      fresh,
    );
    expect(await stat('projected/kube-api-access/token')).toEqual({ mode: '640', uid, gid });
    expect(await fsp.readFile(join(dir, 'projected/kube-api-access/token'))).toEqual(fresh);
    // A new plan for the same bytes (another defaultMode) is a new copy, not 'unchanged'.
    pod.spec!.volumes![0]!.secret!.defaultMode = 0o600;
    const r2 = await capture(pod, opts, memoryResolver());
    expect(await store.save(ID, r2.capture, r2.data)).toBe('written');
    expect((await stat('secrets/certs/tls.key')).mode).toBe('640');
  });

  it('refuses an access for a path the copy does not have', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await expect(store.save(ID, { ...v1.capture, access: { ...v1.capture.access, 'secrets/nope': { mode: 0o644 } } }, v1.data)).rejects.toMatchObject({
      code: 'EINVAL',
    });
    await expect(store.save(ID, { ...v1.capture, access: { ...v1.capture.access, secrets: { mode: 0o755 } } }, v1.data)).rejects.toMatchObject({
      code: 'EINVAL',
    });
  });
});

describe('Store only-if-changed', () => {
  async function mtimes(dir: string): Promise<Record<string, number>> {
    const snap = await snapshot(dir);
    const out: Record<string, number> = {};
    for (const path of Object.keys(snap)) {
      const stat = await fsp.stat(join(dir, path));
      out[path] = stat.mtimeMs * 1e6 + stat.ino;
    }
    return out;
  }

  it('writes nothing when saving the same capture again', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    const before = await mtimes(stateDir);
    const log = new FaultFs();
    expect(await new Store({ stateDir, fs: log }).save(ID, v1.capture, new Map(v1.data))).toBe('unchanged');
    expect(await mtimes(stateDir)).toEqual(before);
    expect(log.log.filter((l) => /^(create|rename|unlink|rm|write) /.test(l))).toEqual([]);
  });

  it('rewrites only meta.json when only the capture times change', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    const before = await mtimes(stateDir);
    const later = { ...v1.capture, capturedAt: '2026-01-02T04:00:00.000Z', lastReadyAt: '2026-01-02T03:59:00.000Z' };
    expect(await store.save(ID, later, v1.data)).toBe('written');
    const after = await mtimes(stateDir);
    const changed = Object.keys(after).filter((k) => after[k] !== before[k]);
    expect(changed.sort()).toEqual(['checkpoints/kube-system_kube-apiserver/', 'checkpoints/kube-system_kube-apiserver/meta.json']);
    expect(await store.load(ID)).toEqual(later);
  });
});

describe('Store corruption', () => {
  const cases: Array<[string, string, (text: string) => string, RegExp]> = [
    ['truncated meta.json', 'meta.json', (t) => t.slice(0, t.length / 2), /meta\.json is not valid JSON/],
    ['meta.json of the wrong type', 'meta.json', () => '[1,2]', /not an object/],
    ['meta.json with a numeric specHash', 'meta.json', (t) => JSON.stringify({ ...JSON.parse(t), specHash: 12 }), /specHash must be/],
    ['meta.json with a bad time', 'meta.json', (t) => JSON.stringify({ ...JSON.parse(t), capturedAt: 'yesterday' }), /capturedAt/],
    ['truncated pod.json', 'pod.json', (t) => t.slice(0, 40), /pod\.json is not valid JSON/],
    ['pod.json of the wrong kind', 'pod.json', (t) => JSON.stringify({ ...JSON.parse(t), kind: 'Service' }), /kind must be Pod/],
    ['pod.json edited', 'pod.json', (t) => JSON.stringify({ ...JSON.parse(t), spec: { containers: [] } }), /does not match the specHash/],
    ['a data file edited', 'secrets/certs/tls.key', () => 'KEY-evil', /data files do not match/],
  ];

  it.each(cases)('reports %s with a reason, keeps listing the others', async (_name, file, corrupt, reason) => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    const other = 'kube-system/other';
    const o = await version(stateDir, 1);
    const pod = parentPod();
    pod.metadata!.labels!['lastseen.dev/parent'] = 'other';
    const oc = await capture(
      pod,
      { parentKey: 'other', node: 'n', checkpointDir: store.checkpointDir(other), capturedAt: o.capture.capturedAt, lastReadyAt: null },
      memoryResolver(),
    );
    await store.save(other, oc.capture, oc.data);

    const path = join(store.checkpointDir(ID), file);
    await fsp.writeFile(path, corrupt((await fsp.readFile(path)).toString()));
    const listed = await store.list();
    expect(listed.checkpoints.map((c) => c.id)).toEqual([other]);
    expect(listed.problems).toHaveLength(1);
    expect(listed.problems[0]!.id).toBe(ID);
    expect(listed.problems[0]!.reason).toMatch(reason);
    await expect(store.load(ID)).rejects.toMatchObject({ code: 'ECORRUPT' });
    // The next capture repairs it.
    expect(await store.save(ID, v1.capture, v1.data)).toBe('written');
    expect(await store.load(ID)).toEqual(v1.capture);
  });

  it("still loads a copy an older agent stored, whose specHash covered the pod's identity too", async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    const metaPath = join(store.checkpointDir(ID), 'meta.json');
    const legacy = legacyManifestHash(v1.capture.manifest);
    expect(legacy).not.toBe(v1.capture.specHash);
    await fsp.writeFile(metaPath, JSON.stringify({ ...JSON.parse((await fsp.readFile(metaPath)).toString()), specHash: legacy }));
    expect((await store.list()).problems).toEqual([]);
    expect((await store.load(ID))?.specHash).toBe(legacy);
  });

  it('treats a folder without meta.json as incomplete', async () => {
    const store = new Store({ stateDir });
    const v1 = await version(stateDir, 1);
    await store.save(ID, v1.capture, v1.data);
    await fsp.unlink(join(store.checkpointDir(ID), 'meta.json'));
    expect((await store.list()).problems[0]!.reason).toMatch(/incomplete/);
  });
});

describe('Store on a full or read-only disk', () => {
  it.each([
    ['ENOSPC', 'write', /full/],
    ['EROFS', 'create', /read-only/],
    ['EDQUOT', 'mkdir', /quota/],
  ] as const)('%s during %s: a clear error naming the path, the previous checkpoint intact', async (code, op, hint) => {
    const v1 = await version(stateDir, 1);
    await new Store({ stateDir }).save(ID, v1.capture, v1.data);
    const before = await snapshot(stateDir);
    const v2 = await version(stateDir, 2);
    const faulty = new FaultFs({ fail: (o, path) => (o === op && path.includes('.new-') ? code : null) });
    const err = await new Store({ stateDir, fs: faulty }).save(ID, v2.capture, v2.data).catch((e) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({ code });
    expect(err.message).toContain(join(stateDir, 'checkpoints', '.kube-system_kube-apiserver.new-'));
    expect(err.message).toMatch(hint);
    expect(await snapshot(stateDir)).toEqual(before);
    expect(await new Store({ stateDir }).load(ID)).toEqual(v1.capture);
  });

  it('ENOSPC while rewriting meta.json in place leaves the old meta.json', async () => {
    const v1 = await version(stateDir, 1);
    await new Store({ stateDir }).save(ID, v1.capture, v1.data);
    const before = await snapshot(stateDir);
    const faulty = new FaultFs({ fail: (o, path) => (o === 'write' && path.includes('.meta.json.') ? 'ENOSPC' : null) });
    const later = { ...v1.capture, capturedAt: '2026-01-02T04:00:00.000Z' };
    await expect(new Store({ stateDir, fs: faulty }).save(ID, later, v1.data)).rejects.toMatchObject({ code: 'ENOSPC' });
    expect(await snapshot(stateDir)).toEqual(before);
  });

  it('EROFS on the state dir itself names it', async () => {
    const v1 = await version(stateDir, 1);
    const faulty = new FaultFs({ fail: (o) => (o === 'mkdir' ? 'EROFS' : null) });
    await expect(new Store({ stateDir, fs: faulty }).save(ID, v1.capture, v1.data)).rejects.toThrow(`cannot mkdir ${stateDir}: EROFS`);
  });
});

describe('Store crash consistency', () => {
  /** A store whose fsyncs are counted, not performed: durability is not what these tests observe. */
  const quick = (dir: string) => new Store({ stateDir: dir, fs: new FaultFs() });

  /** Crash the n-th file-system call of `act`, for every n until `act` completes without reaching it. */
  async function everyCrash(
    setup: (dir: string) => Promise<void>,
    act: (store: Store) => Promise<unknown>,
    check: (dir: string, crashAt: number) => Promise<void>,
  ): Promise<number> {
    for (let crashAt = 1; crashAt < 1000; crashAt++) {
      const dir = mkdtempSync(join(tmpdir(), 'lastseen-crash-'));
      try {
        await setup(dir);
        const faulty = new FaultFs({ crashAt });
        await act(new Store({ stateDir: dir, fs: faulty })).catch((err) => {
          if (!faulty.crashed) throw err;
        });
        await check(dir, crashAt);
        if (!faulty.crashed) return crashAt;
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    }
    throw new Error('never completed');
  }

  const cases: Array<[string, number | null, number, string]> = [
    ['first save', null, 1, '2026-01-02T03:05:00.000Z'],
    ['a rollout (new spec and data)', 1, 2, '2026-01-02T03:05:00.000Z'],
    ['a refresh of the capture time only', 1, 1, '2026-01-02T09:00:00.000Z'],
  ];

  it.each(cases)('%s: after a crash at every step, the old or the new checkpoint, never a mix; a re-run converges', async (_name, oldGen, newGen, newTime) => {
    const refDir = mkdtempSync(join(tmpdir(), 'lastseen-ref-'));
    const vNew = await version(refDir, newGen, newTime);
    await quick(refDir).save(ID, vNew.capture, vNew.data);
    const reference = await snapshot(refDir);
    await fsp.rm(refDir, { recursive: true, force: true });
    const vOld = oldGen === null ? null : await version(stateDir, oldGen);
    const seen = new Set<string>();

    const steps = await everyCrash(
      async (dir) => {
        if (vOld) await quick(dir).save(ID, vOld.capture, vOld.data);
      },
      (store) => store.save(ID, vNew.capture, vNew.data),
      async (dir, crashAt) => {
        const store = quick(dir);
        const listed = await store.list();
        expect(listed.problems, `crash at ${crashAt}`).toEqual([]);
        const loaded = await store.load(ID);
        const state = loaded === null ? 'none' : loaded.capturedAt === vNew.capture.capturedAt && loaded.specHash === vNew.capture.specHash ? 'new' : 'old';
        if (state === 'old') expect(loaded).toEqual(vOld?.capture);
        if (state === 'none') expect(vOld).toBeNull();
        expect(listed.checkpoints.map((c) => c.capture)).toEqual(loaded ? [loaded] : []);
        // load() verified the data tree against meta.json; check the bytes a container would read too.
        if (loaded) {
          const want = state === 'new' ? vNew : vOld!;
          const key = (await fsp.readFile(join(store.checkpointDir(ID), 'secrets/certs/tls.key'))).toString();
          expect(key).toBe(want.data.get('secrets/certs/tls.key')!.toString());
        }
        seen.add(state);
        // A re-run reaches exactly the state of an uninterrupted save: no leftovers.
        await store.save(ID, vNew.capture, vNew.data);
        expect(await snapshot(dir), `crash at ${crashAt}`).toEqual(reference);
      },
    );
    expect(steps).toBeGreaterThan(oldGen === null ? 15 : 10);
    expect(seen).toEqual(new Set([vOld ? 'old' : 'none', 'new']));
  });

  it('remove: after a crash at every step, the checkpoint is whole or gone, never torn', async () => {
    const v1 = await version(stateDir, 1);
    await everyCrash(
      async (dir) => {
        await quick(dir).save(ID, v1.capture, v1.data);
      },
      (store) => store.remove(ID),
      async (dir, crashAt) => {
        const store = quick(dir);
        const loaded = await store.load(ID);
        if (loaded) expect(loaded).toEqual(v1.capture);
        expect((await store.list()).problems, `crash at ${crashAt}`).toEqual([]);
        await store.remove(ID);
        expect(await fsp.readdir(join(dir, 'checkpoints'))).toEqual([]);
      },
    );
  });
});

describe('Store: re-captures of re-created pods', () => {
  /** The fixture pod as the ServiceAccount admission plugin would have made it, with its own suffix. */
  async function recreated(suffix: string): Promise<Version> {
    const pod = parentPod();
    pod.metadata!.name = `kube-apiserver-${suffix}`;
    pod.metadata!.uid = `uid-${suffix}`;
    pod.spec!.volumes![2]!.name = `kube-api-access-${suffix}`;
    pod.spec!.containers[0]!.volumeMounts![2]!.name = `kube-api-access-${suffix}`;
    const store = new Store({ stateDir });
    const opts = {
      parentKey: 'kube-apiserver',
      node: 'node-a',
      checkpointDir: store.checkpointDir(ID),
      capturedAt: '2026-01-02T03:05:00.000Z',
      lastReadyAt: null,
    };
    const r = await capture(pod, opts, memoryResolver());
    return { capture: r.capture, data: r.data };
  }

  it('the manifest already active keeps finding every folder it mounts after a re-capture from the next pod', async () => {
    const store = new Store({ stateDir });
    const first = await recreated('ab12c');
    await store.save(ID, first.capture, first.data);
    const active = first.capture.manifest; // what the kubelet's folder holds while the copy runs
    const next = await recreated('zz9x8');
    await store.save(ID, next.capture, next.data);
    const stored = (await store.load(ID))!.manifest;
    for (const manifest of [active, stored]) {
      for (const v of manifest.spec!.volumes!.filter((x) => x.hostPath?.path.startsWith(store.checkpointDir(ID)))) {
        expect([v.name, (await fsp.stat(v.hostPath!.path)).isDirectory()]).toEqual([v.name, true]);
      }
    }
    expect(stored.spec!.volumes).toEqual(active.spec!.volumes);
    expect(stored.spec!.containers[0]!.volumeMounts).toEqual(active.spec!.containers[0]!.volumeMounts);
  });
});
