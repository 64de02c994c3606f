// The informer's loop against a scripted api (fake transport) and fake time: relist diffs,
// watch events, restart with backoff, 410, the silence watchdog, the connect timeout, bad input.
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { FakeTime, settle as flush, memoryLogger } from '../core/fake-time.test-helpers.js';
import { HttpStatusError, type InformerTransport, type KubeObject, makeInformer } from './informer.js';

interface OpenWatch {
  query: Record<string, string>;
  signal: AbortSignal;
  send(type: string, object: unknown): void;
  line(text: string): void;
  end(): void;
  fail(err: Error): void;
}

class FakeApi implements InformerTransport {
  objects = new Map<string, KubeObject>();
  rv = 100;
  lists: Array<Record<string, string>> = [];
  watches: OpenWatch[] = [];
  listError: Error | null = null;
  /** When set, stream() never answers (a stalled connect) until aborted. */
  hangConnect = false;

  put(name: string, uid = `uid-${name}`, extra: Record<string, unknown> = {}): KubeObject {
    const o = { metadata: { name, namespace: 'ns', uid, resourceVersion: String(++this.rv) }, ...extra };
    this.objects.set(name, o);
    return o;
  }
  async getJson(_path: string, query: Record<string, string>, signal: AbortSignal): Promise<unknown> {
    this.lists.push(query);
    signal.throwIfAborted();
    if (this.listError) throw this.listError;
    return { items: [...this.objects.values()], metadata: { resourceVersion: String(this.rv) } };
  }
  stream(_path: string, query: Record<string, string>, signal: AbortSignal, onLine: (l: string) => void): Promise<{ done: Promise<void> }> {
    return new Promise((resolveOpen, rejectOpen) => {
      let endFn: () => void = () => undefined;
      let failFn: (e: Error) => void = () => undefined;
      const done = new Promise<void>((res, rej) => {
        endFn = res;
        failFn = rej;
      });
      done.catch(() => undefined);
      const w: OpenWatch = {
        query,
        signal,
        send: (type, object) => onLine(JSON.stringify({ type, object })),
        line: onLine,
        end: endFn,
        fail: failFn,
      };
      signal.addEventListener('abort', () => {
        const e = Object.assign(new Error('aborted'), { name: 'AbortError' });
        rejectOpen(e);
        failFn(e);
      });
      this.watches.push(w);
      if (!this.hangConnect) resolveOpen({ done });
    });
  }
  last(): OpenWatch {
    const w = this.watches.at(-1);
    if (!w) throw new Error('no watch opened');
    return w;
  }
}

async function setup(opts: { watchdogMs?: number; requestTimeoutMs?: number } = {}) {
  const time = new FakeTime();
  const api = new FakeApi();
  const { log, records } = await memoryLogger();
  const seen: string[] = [];
  const health: Array<[boolean, string]> = [];
  const name = (o: KubeObject) => o.metadata?.name ?? '?';
  const inf = makeInformer<KubeObject>({
    name: 'leases of node-1',
    kubeConfig: new KubeConfig(),
    path: '/apis/coordination.k8s.io/v1/leases',
    labelSelector: 'lastseen.dev/node=node-1',
    log,
    clock: time,
    timers: time,
    watchdogMs: opts.watchdogMs ?? 10_000,
    requestTimeoutMs: opts.requestTimeoutMs ?? 2_000,
    backoff: { initialMs: 1_000, maxMs: 8_000 },
    random: () => 0.5, // jitter factor exactly 1
    transport: api,
    onAdd: (o) => seen.push(`add ${name(o)}`),
    onUpdate: (o) => seen.push(`update ${name(o)}`),
    onDelete: (o) => seen.push(`delete ${name(o)}`),
    onSynced: () => seen.push('synced'),
    onHealth: (ok, reason) => health.push([ok, reason]),
  });
  return { time, api, inf, seen, health, records };
}

describe('informer', () => {
  it('refuses an unscoped informer', () => {
    const time = new FakeTime();
    expect(() =>
      makeInformer({ name: 'all pods', kubeConfig: new KubeConfig(), path: '/api/v1/pods', log: undefined as never, clock: time, timers: time }),
    ).toThrow(/selector is required/);
  });

  it('lists, reports synced and healthy, then watches from the list resourceVersion with bookmarks and the selector', async () => {
    const { time, api, inf, seen, health } = await setup();
    api.put('a');
    api.put('b');
    inf.start();
    await time.advance(0);
    expect(seen).toEqual(['add a', 'add b', 'synced']);
    expect(inf.isSynced()).toBe(true);
    expect(health).toEqual([[true, 'watching']]);
    expect(api.lists[0]).toMatchObject({ labelSelector: 'lastseen.dev/node=node-1', limit: '500' });
    expect(api.last().query).toMatchObject({ watch: '1', allowWatchBookmarks: 'true', resourceVersion: '102', labelSelector: 'lastseen.dev/node=node-1' });
    await inf.stop();
  });

  it('delivers watch events in order and ignores a DELETED for an unknown object', async () => {
    const { time, api, inf, seen } = await setup();
    inf.start();
    await time.advance(0);
    const w = api.last();
    const a = api.put('a');
    w.send('ADDED', a);
    w.send('MODIFIED', api.put('a'));
    w.send('MODIFIED', api.objects.get('a')); // same resourceVersion: no update
    w.send('DELETED', { metadata: { name: 'zzz', namespace: 'ns', resourceVersion: '999' } });
    w.send('DELETED', api.objects.get('a'));
    expect(seen).toEqual(['synced', 'add a', 'update a', 'delete a']);
    expect(inf.list()).toEqual([]);
    await inf.stop();
  });

  it('after a broken stream backs off, goes unhealthy, and re-watches from the last (bookmark) resourceVersion without relisting', async () => {
    const { time, api, inf, health } = await setup();
    inf.start();
    await time.advance(0);
    api.last().send('BOOKMARK', { metadata: { resourceVersion: '555' } });
    api.last().fail(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    await time.advance(0);
    expect(health.at(-1)?.[0]).toBe(false);
    expect(api.watches).toHaveLength(1);
    await time.advance(999);
    expect(api.watches).toHaveLength(1);
    await time.advance(1);
    expect(api.watches).toHaveLength(2);
    expect(api.last().query.resourceVersion).toBe('555');
    expect(api.lists).toHaveLength(1);
    expect(health.at(-1)).toEqual([true, 'watching']);
    await inf.stop();
  });

  it('backs off exponentially while the list fails, capped, and recovers', async () => {
    const { time, api, inf, health, records } = await setup();
    api.listError = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    inf.start();
    await time.advance(0);
    const at: number[] = [];
    for (let i = 0; i < 7; i++) {
      const n = api.lists.length;
      while (api.lists.length === n) await time.advance(100);
      at.push(time.now());
    }
    const gaps = at.slice(1).map((t, i) => t - (at[i] ?? 0));
    expect(gaps).toEqual([2_000, 4_000, 8_000, 8_000, 8_000, 8_000]);
    expect(health).toEqual([[false, expect.stringContaining('ECONNREFUSED')]]);
    expect(records.some((r) => r.msg === 'list/watch failed; will retry' && r.kind === 'unreachable')).toBe(true);
    api.listError = null;
    await time.advance(8_000);
    expect(inf.isSynced()).toBe(true);
    expect(health.at(-1)).toEqual([true, 'watching']);
    await inf.stop();
  });

  it('relists on 410 and diffs: deleted while away -> onDelete, re-created (new uid) -> delete+add, changed -> update', async () => {
    const { time, api, inf, seen } = await setup();
    api.put('keep');
    api.put('gone');
    api.put('recreated');
    api.put('changed');
    inf.start();
    await time.advance(0);
    seen.length = 0;
    api.objects.delete('gone');
    api.put('recreated', 'uid-new');
    api.put('changed');
    api.put('new');
    api.last().send('ERROR', { kind: 'Status', code: 410, reason: 'Expired' });
    await time.advance(0);
    expect(api.lists).toHaveLength(2);
    expect(api.lists[1]?.resourceVersion).toBeUndefined();
    expect(seen).toEqual(['delete gone', 'delete recreated', 'add recreated', 'update changed', 'add new', 'synced']);
    expect(inf.get('ns', 'recreated')?.metadata?.uid).toBe('uid-new');
    await inf.stop();
  });

  it('a list answered with 410 (expired continue token) relists at once', async () => {
    const { time, api, inf } = await setup();
    api.listError = new HttpStatusError(410, '{"reason":"Expired"}', 'GET leases');
    inf.start();
    await time.advance(0);
    api.listError = null;
    await time.advance(0);
    expect(api.lists.length).toBeGreaterThanOrEqual(2);
    expect(inf.isSynced()).toBe(true);
    await inf.stop();
  });

  it('the watchdog aborts a silent watch and re-opens it; events and bookmarks keep it alive', async () => {
    const { time, api, inf, records, health } = await setup({ watchdogMs: 10_000 });
    inf.start();
    await time.advance(0);
    const first = api.last();
    await time.advance(9_000);
    first.send('BOOKMARK', { metadata: { resourceVersion: '200' } });
    await time.advance(9_000);
    expect(first.signal.aborted).toBe(false);
    await time.advance(1_000);
    expect(first.signal.aborted).toBe(true);
    expect(api.watches).toHaveLength(2);
    expect(api.last().query.resourceVersion).toBe('200');
    expect(records.some((r) => r.msg === 'watch silent past the watchdog; re-opening' && r.silentMs === 10_000)).toBe(true);
    // A silence alone is not reported as unhealthy: the re-opened watch answered.
    expect(health).toEqual([[true, 'watching']]);
    await inf.stop();
  });

  it('a watch whose headers never arrive fails after requestTimeoutMs and goes unhealthy', async () => {
    const { time, api, inf, health } = await setup({ requestTimeoutMs: 2_000 });
    api.hangConnect = true;
    inf.start();
    await time.advance(1_999);
    expect(health).toEqual([]);
    await time.advance(1);
    expect(health).toEqual([[false, expect.stringContaining('timed out')]]);
    api.hangConnect = false;
    await time.advance(1_000);
    expect(health.at(-1)).toEqual([true, 'watching']);
    await inf.stop();
  });

  it('resync() ends an open watch and lists afresh (a cache current after the api-server returns), and wakes a back-off', async () => {
    const { time, api, inf, seen, records } = await setup();
    api.put('a');
    inf.start();
    await time.advance(0);
    expect(seen).toEqual(['add a', 'synced']);
    // A change the open watch never delivered (a connection dead without knowing it).
    api.put('a');
    inf.resync();
    await time.advance(0);
    expect(api.lists).toHaveLength(2);
    expect(seen).toEqual(['add a', 'synced', 'update a', 'synced']);
    expect(records.some((r) => r.msg === 'relisting on request')).toBe(true);
    // While backing off after a failure, resync() lists at once instead of waiting out the delay.
    api.listError = new Error('connect ECONNREFUSED');
    api.last().fail(new Error('stream broke'));
    await time.advance(0);
    const lists = api.lists.length;
    api.listError = null;
    inf.resync();
    await time.advance(0);
    expect(api.lists.length).toBeGreaterThan(lists);
    expect(seen.at(-1)).toBe('synced');
    await inf.stop();
  });

  it('skips bad lines and objects, survives a throwing callback, and calls nothing after stop()', async () => {
    const { time, api, inf, seen, records } = await setup();
    inf.start();
    await time.advance(0);
    const w = api.last();
    w.line('{not json');
    w.send('ADDED', { spec: {} });
    w.send('WHATEVER', { metadata: { name: 'x', namespace: 'ns' } });
    expect(records.filter((r) => r.level === 40).map((r) => r.msg)).toEqual([
      'watch line is not JSON; skipped',
      'watch event without an object; skipped',
      'unknown watch event type; skipped',
    ]);
    w.send('ADDED', api.put('ok'));
    expect(seen).toEqual(['synced', 'add ok']);
    await inf.stop();
    w.send('ADDED', api.put('late'));
    expect(seen).toEqual(['synced', 'add ok']);
    expect(time.pending()).toBe(0);
  });

  it('logs a throwing callback and carries on', async () => {
    const time = new FakeTime();
    const api = new FakeApi();
    const { log, records } = await memoryLogger();
    const added: string[] = [];
    const inf = makeInformer<KubeObject>({
      name: 't',
      kubeConfig: new KubeConfig(),
      path: '/api/v1/pods',
      fieldSelector: 'spec.nodeName=n',
      log,
      clock: time,
      timers: time,
      transport: api,
      onAdd: (o) => {
        added.push(o.metadata?.name ?? '');
        throw new Error('consumer bug');
      },
    });
    api.put('a');
    inf.start();
    await time.advance(0);
    api.last().send('ADDED', api.put('b'));
    await flush();
    expect(added).toEqual(['a', 'b']);
    expect(records.filter((r) => r.msg === 'informer callback threw; carrying on')).toHaveLength(2);
    await inf.stop();
  });
});
