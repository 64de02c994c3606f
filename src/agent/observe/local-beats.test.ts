// The local heartbeat folder observer over a real temp folder, scanned by explicit pollOnce()
// calls (and once through fake timers): change detection, skipped names, unreadable files, removal.
import { mkdir, mkdtemp, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_BEAT_FILE_BYTES } from '../../channels/local.js';
import { FakeTime, memoryLogger } from '../../core/fake-time.test-helpers.js';
import { type BeatFolder, isBeatFileName, watchLocalBeats } from './local-beats.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lastseen-beats-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function setup(folder = dir, notify = false) {
  const time = new FakeTime();
  const { log, records } = await memoryLogger();
  const calls: string[] = [];
  const w = watchLocalBeats({
    dir: folder,
    pollMs: 1_000,
    notify,
    log,
    timers: time,
    onFile: (name, text) => calls.push(`file ${name} ${text}`),
    onRemoved: (name) => calls.push(`removed ${name}`),
  });
  return { time, w, calls, records };
}

/** As the local channel writes: a dot-prefixed temporary, then rename. */
async function writeAtomic(name: string, text: string) {
  const tmp = join(dir, `.${name}.tmp`);
  await writeFile(tmp, text);
  await rename(tmp, join(dir, name));
}

describe('local beats observer', () => {
  it.each([
    ['kube-system_kube-apiserver.json', true],
    ['kube-system_kube-apiserver.checkpoint.json', true],
    ['.kube-system_kube-apiserver.json.tmp', false],
    ['.hidden.json', false],
    ['x.json.tmp', false],
    ['notes.txt', false],
  ])('%s is a beat file: %s', (name, yes) => {
    expect(isBeatFileName(name)).toBe(yes);
  });

  it('hands over new and changed files once, skips unchanged bytes, reports removal', async () => {
    const { w, calls } = await setup();
    await writeAtomic('a.json', '{"sequence":1}');
    await writeFile(join(dir, '.a.json.tmp'), 'half');
    await writeFile(join(dir, 'readme.txt'), 'nope');
    await w.pollOnce();
    expect(calls).toEqual(['file a.json {"sequence":1}']);
    await w.pollOnce();
    expect(calls).toHaveLength(1);
    // Same bytes rewritten (new inode, new mtime): read again but not handed over.
    await writeAtomic('a.json', '{"sequence":1}');
    await w.pollOnce();
    expect(calls).toHaveLength(1);
    await writeAtomic('a.json', '{"sequence":2}');
    await w.pollOnce();
    expect(calls.at(-1)).toBe('file a.json {"sequence":2}');
    await rm(join(dir, 'a.json'));
    await w.pollOnce();
    expect(calls.at(-1)).toBe('removed a.json');
    await w.pollOnce();
    expect(calls).toHaveLength(3);
  });

  it('sees an in-place rewrite of the same size with a restored mtime (bytes are compared, not stamps)', async () => {
    const { w, calls } = await setup();
    const p = join(dir, 'b.json');
    await writeFile(p, '{"sequence":1}');
    await utimes(p, 1_000, 1_000);
    await w.pollOnce();
    await writeFile(p, '{"sequence":2}');
    await utimes(p, 1_000, 1_000);
    await w.pollOnce();
    // Same ino, mtime and size: a stamp-only check could not see this.
    expect(calls).toEqual(['file b.json {"sequence":1}', 'file b.json {"sequence":2}']);
  });

  it('hands a corrupted file over as text (beatFromFile refuses it) and logs an oversized or unreadable one once', async () => {
    const { w, calls, records } = await setup();
    await writeAtomic('torn.json', '{"sequ');
    await writeAtomic('big.json', 'x'.repeat(MAX_BEAT_FILE_BYTES + 1));
    await mkdir(join(dir, 'dir.json'));
    await w.pollOnce();
    await w.pollOnce();
    expect(calls).toEqual(['file torn.json {"sequ']);
    const skipped = records.filter((r) => r.msg === 'heartbeat file skipped');
    expect(skipped.map((r) => [r.file, r.reason])).toEqual([
      ['big.json', `${MAX_BEAT_FILE_BYTES + 1} bytes, more than a beat (${MAX_BEAT_FILE_BYTES})`],
      ['dir.json', 'not a regular file'],
    ]);
  });

  it('a missing folder is logged once and counts as no files; files appear when it does', async () => {
    const folder = join(dir, 'later');
    const { w, calls, records } = await setup(folder);
    await w.pollOnce();
    await w.pollOnce();
    expect(records.filter((r) => r.msg === 'heartbeat folder does not exist (yet)')).toHaveLength(1);
    await mkdir(folder);
    await writeFile(join(folder, 'c.json'), '{}');
    await w.pollOnce();
    expect(calls).toEqual(['file c.json {}']);
    await rm(folder, { recursive: true });
    await w.pollOnce();
    expect(calls.at(-1)).toBe('removed c.json');
  });

  it('survives a throwing callback and hands the next change over', async () => {
    const time = new FakeTime();
    const { log, records } = await memoryLogger();
    const got: string[] = [];
    const w = watchLocalBeats({
      dir,
      log,
      timers: time,
      onFile: (_name, text) => {
        got.push(text);
        if (text === 'bad') throw new Error('consumer bug');
      },
      onRemoved: () => undefined,
    });
    await writeAtomic('d.json', 'bad');
    await w.pollOnce();
    await writeAtomic('d.json', 'good');
    await w.pollOnce();
    expect(got).toEqual(['bad', 'good']);
    expect(records.some((r) => r.msg === 'local beats callback threw; carrying on')).toBe(true);
  });

  it('start() scans at once and then every pollMs; stop() ends it', async () => {
    const { time, w, calls } = await setup();
    await writeAtomic('e.json', '1');
    w.start();
    await waitUntil(() => calls.length === 1);
    await writeAtomic('e.json', '2');
    // A scan is real I/O: advance the fake timer, then wait for that scan (not for time).
    await time.advance(1_000);
    await waitUntil(() => calls.length === 2);
    expect(calls.at(-1)).toBe('file e.json 2');
    await w.stop();
    expect(time.pending()).toBe(0);
    await writeAtomic('e.json', '3');
    await time.advance(5_000);
    expect(calls).toHaveLength(2);
  });
});

/** Waits for real fs I/O (not time) to finish: yields to the event loop until `cond` holds. */
async function waitUntil(cond: () => boolean) {
  const giveUpAt = Date.now() + 5_000;
  while (!cond() && Date.now() < giveUpAt) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}

describe('local beats observer with change notifications (fs.watch)', () => {
  const handedOver = async (calls: string[], what: string) => {
    const t0 = Date.now();
    while (!calls.includes(what)) {
      if (Date.now() - t0 > 5_000) throw new Error(`not handed over within 5 s without a poll: ${what}; got ${JSON.stringify(calls)}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };

  it('hands a new, changed or removed beat over at once, without waiting for the next poll', async () => {
    const { w, calls } = await setup(dir, true);
    w.start(); // the first scan; the fake timers never fire the next poll
    await w.pollOnce();
    await writeAtomic('ns_a.json', 'one');
    await handedOver(calls, 'file ns_a.json one');
    await writeAtomic('ns_a.json', 'two');
    await handedOver(calls, 'file ns_a.json two');
    await rm(join(dir, 'ns_a.json'));
    await handedOver(calls, 'removed ns_a.json');
    await w.stop();
  });

  it('with no folder to watch at start, polling alone carries on (and says so)', async () => {
    const missing = join(dir, 'later');
    const { w, calls, records } = await setup(missing, true);
    w.start();
    await w.pollOnce();
    expect(records.some((r) => r.msg === 'no change notifications for the heartbeat folder; polling only')).toBe(true);
    await mkdir(missing);
    await writeFile(join(missing, 'ns_b.json'), 'x');
    await w.pollOnce();
    expect(calls).toEqual(['file ns_b.json x']);
    await w.stop();
  });

  it('a notification naming a file reads that file only; one naming nothing reads them all', async () => {
    // With every file read on each notification, N parents beating every second cost N full scans
    // a second: the agent's CPU and its memory churn grew with the square of its parents.
    const files = new Map(Array.from({ length: 50 }, (_, i) => [`ns_p${i}.json`, Buffer.from(`beat ${i} 1`)]));
    const reads: string[] = [];
    let changed: ((name?: string) => void) | null = null;
    const folder: BeatFolder = {
      list: async () => [...files.keys()],
      read: async (name) => {
        reads.push(name);
        const b = files.get(name);
        if (!b) throw Object.assign(new Error(`${name}: gone`), { code: 'ENOENT' });
        return b;
      },
      watch: (c) => {
        changed = c;
        return { close: () => (changed = null) };
      },
    };
    const time = new FakeTime();
    const { log } = await memoryLogger();
    const calls: string[] = [];
    const w = watchLocalBeats({
      folder,
      pollMs: 1_000,
      log,
      timers: time,
      onFile: (name, text) => calls.push(`file ${name} ${text}`),
      onRemoved: (name) => calls.push(`removed ${name}`),
    });
    w.start();
    await w.pollOnce(); // after start()'s own scan: every file read (twice)
    expect(new Set(reads).size).toBe(50);
    reads.length = 0;
    calls.length = 0;
    files.set('ns_p7.json', Buffer.from('beat 7 2'));
    changed!('.ns_p7.json.tmp'); // the writer's temporary: nothing to read
    changed!('ns_p7.json');
    await new Promise((r) => setImmediate(r));
    await w.pollOnce(); // waits for the worker, then scans in full
    expect(reads.filter((n) => n === 'ns_p7.json').length).toBe(2); // the notified read, then the scan's
    expect(reads).toHaveLength(51);
    expect(calls).toEqual(['file ns_p7.json beat 7 2']);
    reads.length = 0;
    files.delete('ns_p8.json');
    changed!('ns_p8.json');
    for (let i = 0; i < 10 && !calls.includes('removed ns_p8.json'); i++) await new Promise((r) => setImmediate(r));
    expect(reads).toEqual(['ns_p8.json']);
    expect(calls).toContain('removed ns_p8.json');
    reads.length = 0;
    changed!(undefined);
    for (let i = 0; i < 50 && reads.length < 49; i++) await new Promise((r) => setImmediate(r));
    expect(reads).toHaveLength(49);
    await w.stop();
  });
});
