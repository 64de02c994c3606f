// Copied tokens refreshed in place (a running copy's token must not expire): the file inside the existing folder is
// replaced by a rename within that folder, so a running container's hostPath mount of the folder
// sees it; the folders keep their inodes; a crash at any step leaves a loadable copy.
import { mkdtempSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { capture, type DataResolver } from './capture.js';
import { FaultFs } from './fault-fs.test-helpers.js';
import { memoryResolver, parentPod } from './fixtures.test-helpers.js';
import { Store } from './store.js';
import { isDue, tokenCopy, tokenTimes } from './tokens.js';
import { jwt } from './tokens.test-helpers.js';

const ID = 'kube-system/kube-apiserver';
const TOKEN = 'projected/kube-api-access/token';
const T0 = Date.parse('2026-01-02T03:00:00.000Z');

/** The fixture resolver, but tokens are JWTs issued at `now()` living `lifetimeS`. */
function jwtResolver(now: () => number, lifetimeS: number): DataResolver & { minted: number } {
  const base = memoryResolver();
  const r = {
    ...base,
    minted: 0,
    serviceAccountToken: async () => {
      r.minted++;
      return jwt(now(), lifetimeS, `mint-${r.minted}`);
    },
  };
  return r;
}

let stateDir: string;
beforeEach(() => {
  stateDir = mkdtempSync(join(tmpdir(), 'lastseen-tokens-'));
});
afterEach(async () => {
  await fsp.rm(stateDir, { recursive: true, force: true });
});

async function saved(dir: string, fs?: FaultFs) {
  const store = new Store({ stateDir: dir, ...(fs ? { fs } : {}) });
  const resolver = jwtResolver(() => T0, 600);
  const r = await capture(
    parentPod(),
    { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: store.checkpointDir(ID), capturedAt: new Date(T0).toISOString(), lastReadyAt: null },
    resolver,
  );
  await store.save(ID, r.capture, r.data);
  return { store, capture: r.capture };
}

describe('token lifetimes', () => {
  it('reads iat and exp from a JWT, else assumes the requested lifetime from now', () => {
    expect(tokenTimes(jwt(T0, 600), 3607, T0 + 5_000)).toEqual({ issuedAtMs: T0, expiresAtMs: T0 + 600_000 });
    expect(tokenTimes(Buffer.from('opaque'), 900, T0)).toEqual({ issuedAtMs: T0, expiresAtMs: T0 + 900_000 });
    expect(tokenTimes(Buffer.from('a.b.c'), undefined, T0)).toEqual({ issuedAtMs: T0, expiresAtMs: T0 + 3_600_000 });
  });

  it("is due once 80% of its lifetime is gone (the kubelet's rule)", () => {
    const t = tokenCopy(TOKEN, { namespace: 'kube-system', name: 'kube-apiserver' }, jwt(T0, 600), T0);
    expect(isDue(t, T0 + 479_000)).toBe(false);
    expect(isDue(t, T0 + 480_000)).toBe(true);
  });

  it('a capture records each copied token with its service account and expiry', async () => {
    const { capture: c, store } = await saved(stateDir);
    expect(c.tokens).toEqual([
      {
        relPath: TOKEN,
        namespace: 'kube-system',
        serviceAccount: 'kube-apiserver',
        expirationSeconds: 3607,
        issuedAt: new Date(T0).toISOString(),
        expiresAt: new Date(T0 + 600_000).toISOString(),
      },
    ]);
    expect((await store.load(ID))?.tokens).toEqual(c.tokens);
  });
});

describe('Store.replaceToken', () => {
  it('replaces the token file inside the same folders (same inodes) and keeps the copy loadable', async () => {
    const { store } = await saved(stateDir);
    const dir = store.checkpointDir(ID);
    const folderIno = (await fsp.stat(dir)).ino;
    const volumeIno = await fsp.stat(join(dir, 'projected/kube-api-access')).then((s) => s.ino);
    const oldFileIno = (await fsp.stat(join(dir, TOKEN))).ino;
    const fresh = jwt(T0 + 500_000, 600, 'fresh');
    const copy = tokenCopy(TOKEN, { namespace: 'kube-system', name: 'kube-apiserver', expirationSeconds: 3607 }, fresh, T0 + 500_000);
    expect(await store.replaceToken(ID, copy, fresh)).toBe('written');
    expect((await fsp.stat(dir)).ino).toBe(folderIno);
    expect((await fsp.stat(join(dir, 'projected/kube-api-access'))).ino).toBe(volumeIno);
    expect((await fsp.stat(join(dir, TOKEN))).ino).not.toBe(oldFileIno); // a new file renamed over the old one
    expect(await fsp.readFile(join(dir, TOKEN))).toEqual(fresh);
    // The access its own volume gives it (the fixture pod: no securityContext, so root's 0644).
    expect(((await fsp.stat(join(dir, TOKEN))).mode & 0o777).toString(8)).toBe('644');
    expect((await fsp.readdir(join(dir, 'projected/kube-api-access'))).sort()).toEqual(['ca.crt', 'namespace', 'token']);
    const loaded = await store.load(ID);
    expect(loaded?.tokens?.[0]?.expiresAt).toBe(new Date(T0 + 1_100_000).toISOString());
    const meta = JSON.parse(await fsp.readFile(join(dir, 'meta.json'), 'utf8'));
    expect(meta.pendingDataHash).toBeUndefined();
  });

  it('refuses a path that is not a copied token', async () => {
    const { store } = await saved(stateDir);
    const copy = tokenCopy('secrets/certs/tls.key', { namespace: 'kube-system', name: 'kube-apiserver' }, jwt(T0, 600), T0);
    await expect(store.replaceToken(ID, copy, Buffer.from('x'))).rejects.toMatchObject({ code: 'EINVAL' });
  });

  it('after a crash at every step, the old or the new token, and the checkpoint still loads', async () => {
    const fresh = jwt(T0 + 500_000, 600, 'fresh');
    const copy = tokenCopy(TOKEN, { namespace: 'kube-system', name: 'kube-apiserver', expirationSeconds: 3607 }, fresh, T0 + 500_000);
    const seen = new Set<string>();
    let completed = false;
    for (let crashAt = 1; crashAt < 200 && !completed; crashAt++) {
      const dir = mkdtempSync(join(tmpdir(), 'lastseen-tokcrash-'));
      try {
        const { capture: before } = await saved(dir, new FaultFs());
        const faulty = new FaultFs({ crashAt });
        await new Store({ stateDir: dir, fs: faulty }).replaceToken(ID, copy, fresh).catch((e) => {
          if (!faulty.crashed) throw e;
        });
        completed = !faulty.crashed;
        const store = new Store({ stateDir: dir });
        const loaded = await store.load(ID); // throws ECORRUPT on a torn copy
        const bytes = await fsp.readFile(join(store.checkpointDir(ID), TOKEN));
        seen.add(bytes.equals(fresh) ? 'new' : 'old');
        if (!bytes.equals(fresh)) expect(loaded?.tokens).toEqual(before.tokens);
        // A second attempt after the crash converges on the new token.
        await store.replaceToken(ID, copy, fresh);
        expect(await fsp.readFile(join(store.checkpointDir(ID), TOKEN))).toEqual(fresh);
        expect((await store.load(ID))?.tokens).toEqual([copy]);
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    }
    expect(completed).toBe(true);
    expect(seen).toEqual(new Set(['old', 'new']));
  });
});

describe('Store.replaceToken alongside a save', () => {
  /** Holds the refresh's first meta.json write until `gate` resolves. */
  class GateFs extends FaultFs {
    gate: (() => Promise<void>) | null = null;
    override async open(path: string, flags: string, mode?: number) {
      const gate = this.gate;
      if (gate && flags.includes('w') && path.includes('/.meta.json.')) {
        this.gate = null;
        await gate();
      }
      return super.open(path, flags, mode);
    }
  }

  it('a token refresh and a re-capture of the same checkpoint at once leave a loadable copy', async () => {
    await saved(stateDir);
    const fs = new GateFs();
    const store = new Store({ stateDir, fs });
    const pod = parentPod();
    pod.spec!.containers[0]!.image = 'registry.k8s.io/kube-apiserver:v1.34.9';
    const later = T0 + 500_000;
    const r = await capture(
      pod,
      { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: store.checkpointDir(ID), capturedAt: new Date(later).toISOString(), lastReadyAt: null },
      jwtResolver(() => later, 600),
    );
    const fresh = jwt(later, 600, 'fresh');
    const copy = tokenCopy(TOKEN, { namespace: 'kube-system', name: 'kube-apiserver', expirationSeconds: 3607 }, fresh, later);
    let saving: Promise<unknown> = Promise.resolve();
    // Paused after reading the live folder: if the save gets to run now, let it finish first (the
    // worst interleaving); if it waits its turn, go on.
    fs.gate = async () => {
      const before = fs.calls;
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
      if (fs.calls > before) await saving;
    };
    const refreshing = store.replaceToken(ID, copy, fresh);
    saving = store.save(ID, r.capture, r.data);
    await Promise.all([refreshing, saving]);
    const loaded = await new Store({ stateDir }).load(ID);
    expect(loaded?.specHash).toBe(r.capture.specHash);
  });
});

describe('why in place', () => {
  it('a whole-copy save moves the folder a running container has mounted', async () => {
    const { store } = await saved(stateDir);
    const dir = store.checkpointDir(ID);
    const folderIno = (await fsp.stat(dir)).ino;
    const resolver = jwtResolver(() => T0 + 500_000, 600);
    const r = await capture(
      parentPod(),
      { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: dir, capturedAt: new Date(T0 + 500_000).toISOString(), lastReadyAt: null },
      resolver,
    );
    await store.save(ID, r.capture, r.data);
    expect((await fsp.stat(dir)).ino).not.toBe(folderIno);
  });
});
