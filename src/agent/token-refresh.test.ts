// A running checkpoint's tokens outlive their one-hour copies (a copy that runs for hours must keep talking to the api-server): with a short
// token lifetime and a fake wall clock, a token near expiry is minted again and written in place,
// whatever the parent's state; with no api-server answering nothing is written.
import { mkdtempSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { capture, type DataResolver } from '../checkpoint/capture.js';
import { memoryResolver, parentPod } from '../checkpoint/fixtures.test-helpers.js';
import { ManifestDir } from '../checkpoint/manifests.js';
import { Store } from '../checkpoint/store.js';
import { jwt } from '../checkpoint/tokens.test-helpers.js';
import { FakeTime } from '../core/fake-time.test-helpers.js';
import { startTokenRefresh, TOKEN_CHECK_MS, TokenRefresher, type TokenRefreshResult } from './token-refresh.js';

const ID = 'kube-system/kube-apiserver';
const TOKEN = 'projected/kube-api-access/token';
const T0 = Date.parse('2026-01-02T03:00:00.000Z');
/** A short lifetime, so the test crosses several expiries. */
const LIFETIME_S = 120;

let root: string;
let store: Store;
let manifests: ManifestDir;
let wall: number;
let api: 'up' | 'down';
let minted: number;

const resolver: DataResolver = {
  ...memoryResolver(),
  serviceAccountToken: async (ns, sa) => {
    if (api === 'down') throw new Error(`TokenRequest for serviceaccount ${ns}/${sa}: connect ECONNREFUSED`);
    minted++;
    return jwt(wall, LIFETIME_S, `mint-${minted}`);
  },
};

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'lastseen-tokref-'));
  store = new Store({ stateDir: join(root, 'state') });
  manifests = new ManifestDir({ dir: join(root, 'manifests') });
  await fsp.mkdir(manifests.dir);
  wall = T0;
  api = 'up';
  minted = 0;
  const r = await capture(
    parentPod(),
    { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: store.checkpointDir(ID), capturedAt: new Date(T0).toISOString(), lastReadyAt: null },
    resolver,
  );
  await store.save(ID, r.capture, r.data);
  minted = 0;
});
afterEach(async () => {
  await fsp.rm(root, { recursive: true, force: true });
});

const tokenFile = () => join(store.checkpointDir(ID), TOKEN);
const refresher = () => new TokenRefresher({ store, manifests, resolver: () => resolver, wallNow: () => wall, logger: pino({ level: 'silent' }) });

describe('TokenRefresher', () => {
  it("re-mints an active checkpoint's token near expiry and writes it in place, pass after pass", async () => {
    await manifests.activate(ID, (await store.load(ID))!.manifest);
    const r = refresher();
    const folderIno = (await fsp.stat(join(store.checkpointDir(ID), 'projected/kube-api-access'))).ino;
    const first = await fsp.readFile(tokenFile());

    wall = T0 + 60_000; // half its life: not due
    expect(await r.pass()).toEqual([]);
    expect(await fsp.readFile(tokenFile())).toEqual(first);
    expect(r.expiries().get(ID)).toBe(new Date(T0 + 120_000).toISOString());

    // Three lifetimes later the checkpoint still holds a live token: each pass past 80% re-mints.
    for (let i = 1; i <= 3; i++) {
      wall = T0 + i * 100_000;
      const results = await r.pass();
      expect(results).toEqual([{ id: ID, relPath: TOKEN, outcome: 'refreshed', expiresAt: new Date(wall + 120_000).toISOString() }]);
      expect(await fsp.readFile(tokenFile())).toEqual(jwt(wall, LIFETIME_S, `mint-${i}`));
      expect((await fsp.stat(join(store.checkpointDir(ID), 'projected/kube-api-access'))).ino).toBe(folderIno);
      expect(r.expiries().get(ID)).toBe(new Date(wall + 120_000).toISOString());
      expect((await store.load(ID))?.tokens?.[0]?.expiresAt).toBe(new Date(wall + 120_000).toISOString());
    }
    expect(minted).toBe(3);
  });

  it('writes nothing when no api-server answers, and catches up once one does', async () => {
    await manifests.activate(ID, (await store.load(ID))!.manifest);
    const r = refresher();
    const before = await fsp.readFile(tokenFile());
    const metaBefore = await fsp.readFile(join(store.checkpointDir(ID), 'meta.json'));
    api = 'down';
    wall = T0 + 110_000;
    expect(await r.pass()).toEqual([{ id: ID, relPath: TOKEN, outcome: 'failed', expiresAt: new Date(T0 + 120_000).toISOString() }]);
    expect(await fsp.readFile(tokenFile())).toEqual(before);
    expect(await fsp.readFile(join(store.checkpointDir(ID), 'meta.json'))).toEqual(metaBefore);
    expect(minted).toBe(0);
    api = 'up';
    wall = T0 + 115_000;
    expect((await r.pass())[0]?.outcome).toBe('refreshed');
    expect(await fsp.readFile(tokenFile())).toEqual(jwt(wall, LIFETIME_S, 'mint-1'));
  });

  it("leaves a checkpoint that is not active alone (its parent's capture keeps it fresh)", async () => {
    const r = refresher();
    wall = T0 + 110_000;
    expect(await r.pass()).toEqual([]);
    expect(minted).toBe(0);
    expect(r.expiries().size).toBe(0);
  });

  it('runs every TOKEN_CHECK_MS on the injected timers until stopped', async () => {
    await manifests.activate(ID, (await store.load(ID))!.manifest);
    const time = new FakeTime();
    const passes: TokenRefreshResult[][] = [];
    let settled: () => void = () => {};
    const stop = startTokenRefresh(refresher(), time, (results) => {
      passes.push(results);
      settled();
    });
    wall = T0 + 100_000;
    const done = new Promise<void>((r) => {
      settled = r;
    });
    await time.advance(TOKEN_CHECK_MS);
    await done; // the pass does real file I/O
    expect(passes).toHaveLength(1);
    expect(passes[0]?.[0]?.outcome).toBe('refreshed');
    stop();
    await time.advance(10 * TOKEN_CHECK_MS);
    expect(passes).toHaveLength(1);
  });
});
