import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Beat } from '../core/types.js';
import { beatFromFile, LocalChannel, type LocalTarget, localBeatText } from './local.js';

// biome-ignore lint/suspicious/noExplicitAny: the tables below break arbitrary fields of a JSON document on purpose
type Loose = Record<string, any>;

const target: LocalTarget = { node: 'n1', namespace: 'kube-system', key: 'kube-apiserver', role: 'parent' };
const beat: Beat = { channel: 'local', holder: 'api-1', holderUid: '', role: 'parent', phase: 'Ready', sequence: 12, renewTime: '2026-12-02T10:00:01.000000Z' };
const expected = { node: 'n1', namespace: 'kube-system', key: 'kube-apiserver' };
const good = localBeatText(target, beat);
const edit = (f: (o: Loose) => void) => {
  const o = JSON.parse(good);
  f(o);
  return JSON.stringify(o);
};

describe('beatFromFile', () => {
  it('reads what the channel writes', () => {
    expect(beatFromFile(good, expected)).toEqual({ ok: true, beat });
    expect(beatFromFile(good, { ...expected, role: 'parent' }).ok).toBe(true);
  });

  it('carries the unprobed marker of a Ready beat', () => {
    const unprobed = { ...beat, phase: 'Ready' as const, unprobed: true };
    const text = localBeatText(target, unprobed);
    expect(JSON.parse(text).unprobed).toBe(true);
    expect(beatFromFile(text, expected)).toEqual({ ok: true, beat: unprobed });
  });

  it('carries an unanswered beat and whether its process was Ready before; a file without that (an older writer) reads as not saying', () => {
    for (const afterReady of [true, false]) {
      const hung = { ...beat, phase: 'Starting' as const, unanswered: true, afterReady };
      const text = localBeatText(target, hung);
      expect(JSON.parse(text)).toMatchObject({ unanswered: true, afterReady });
      expect(beatFromFile(text, expected)).toEqual({ ok: true, beat: hung });
    }
    const older = localBeatText(target, { ...beat, phase: 'Starting', unanswered: true });
    expect(JSON.parse(older).afterReady).toBeUndefined();
    expect(beatFromFile(older, expected)).toEqual({ ok: true, beat: { ...beat, phase: 'Starting', unanswered: true } });
    // Beside an answered beat it means nothing and is not kept.
    expect(beatFromFile(localBeatText(target, { ...beat, afterReady: true }), expected)).toEqual({ ok: true, beat });
  });

  it('carries whether an unanswered beat’s process waited for a CPU; absent, or beside an answered beat, reads as not starved', () => {
    const starved = { ...beat, phase: 'Starting' as const, unanswered: true, afterReady: true, starved: true };
    const text = localBeatText(target, starved);
    expect(JSON.parse(text)).toMatchObject({ unanswered: true, starved: true });
    expect(beatFromFile(text, expected)).toEqual({ ok: true, beat: starved });
    const older = localBeatText(target, { ...starved, starved: undefined });
    expect(JSON.parse(older).starved).toBeUndefined();
    expect(beatFromFile(older, expected)).toEqual({ ok: true, beat: { ...beat, phase: 'Starting', unanswered: true, afterReady: true } });
    expect(beatFromFile(localBeatText(target, { ...beat, starved: true }), expected)).toEqual({ ok: true, beat });
  });

  it('carries the declared interval, and reads a file without one (an older writer) as undeclared', () => {
    const declared = { ...beat, intervalMs: 5000 };
    const text = localBeatText(target, declared);
    expect(JSON.parse(text).intervalMs).toBe(5000);
    expect(beatFromFile(text, expected)).toEqual({ ok: true, beat: declared });
    expect(beatFromFile(good, expected)).toEqual({ ok: true, beat });
  });

  it.each<[string, string, RegExp]>([
    ['interval as string', edit((o) => (o.intervalMs = '5000')), /intervalMs is "5000", not a number/],
    ['interval below the minimum', edit((o) => (o.intervalMs = 5)), /intervalMs number 5 is outside/],
    ['interval of years', edit((o) => (o.intervalMs = 1e12)), /is outside/],
    ['interval fractional', edit((o) => (o.intervalMs = 1000.5)), /is outside/],
    ['empty', '', /not JSON/],
    ['truncated', good.slice(0, good.length / 2), /not JSON \(truncated/],
    ['null', 'null', /not a JSON object/],
    ['an array', '[1]', /not a JSON object/],
    ['huge', ' '.repeat(5000), /more than a beat/],
    ['unknown version', edit((o) => (o.version = 2)), /version is number 2/],
    ['another node', edit((o) => (o.node = 'n2')), /node is "n2", not this node/],
    ['another parent', edit((o) => (o.key = 'etcd')), /names parent "kube-system"\/"etcd"/],
    ['sequence as string', edit((o) => (o.sequence = '12')), /sequence is "12", not a number/],
    ['sequence negative', edit((o) => (o.sequence = -3)), /not a positive integer/],
    ['sequence huge', edit((o) => (o.sequence = 1e300)), /impossibly large/],
    ['sequence NaN-ish', edit((o) => (o.sequence = null)), /sequence is null/],
    ['phase wrong type', edit((o) => (o.phase = true)), /phase is boolean true/],
    ['holder missing', edit((o) => delete o.holder), /holder is missing/],
    ['holderUid number', edit((o) => (o.holderUid = 5)), /holderUid is number 5/],
    ['role other than expected', edit((o) => (o.role = 'checkpoint')), /role is checkpoint, expected parent/],
    ['renewTime past (epoch - 1s)', edit((o) => (o.renewTime = '1969-12-31T23:59:59.000000Z')), /before the Unix epoch/],
    ['renewTime future year 10000', edit((o) => (o.renewTime = '+010000-01-01T00:00:00.000000Z')), /six fractional digits/],
    ['renewTime garbage', edit((o) => (o.renewTime = 'yesterday')), /not an RFC 3339/],
  ])('refuses %s', (_n, text, reason) => {
    const r = beatFromFile(text, { ...expected, role: 'parent' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });
});

describe('LocalChannel', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('writes the file atomically under its name, creating the folder, leaving no temporaries', async () => {
    dir = await mkdtemp(join(tmpdir(), 'lastseen-local-'));
    const hbDir = join(dir, 'run', 'heartbeats');
    const ch = new LocalChannel(hbDir, target);
    const cp = new LocalChannel(hbDir, { ...target, role: 'checkpoint' });
    await ch.write(beat);
    await cp.write({ ...beat, role: 'checkpoint', sequence: 1 });
    expect((await readdir(hbDir)).sort()).toEqual(['kube-system_kube-apiserver.checkpoint.json', 'kube-system_kube-apiserver.json']);
    expect(beatFromFile(await readFile(ch.path, 'utf8'), expected)).toEqual({ ok: true, beat });

    // A reader racing many writes only ever sees whole beats.
    const reads: boolean[] = [];
    let writing = true;
    const reader = (async () => {
      while (writing) {
        reads.push(beatFromFile(await readFile(ch.path, 'utf8'), expected).ok);
        await new Promise((r) => setImmediate(r));
      }
    })();
    for (let i = 13; i < 200; i++) await ch.write({ ...beat, sequence: i });
    writing = false;
    await reader;
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every(Boolean)).toBe(true);
    expect(beatFromFile(await readFile(ch.path, 'utf8'), expected)).toMatchObject({ ok: true, beat: { sequence: 199 } });
    expect((await readdir(hbDir)).filter((f) => f.startsWith('.'))).toEqual([]);
  });

  it('a checkpoint’s last beat (Stopping) removes its file instead of writing it, even after the agent removed it on retire', async () => {
    dir = await mkdtemp(join(tmpdir(), 'lastseen-local-'));
    const cp = new LocalChannel(dir, { ...target, role: 'checkpoint' });
    const parent = new LocalChannel(dir, target);
    await cp.write({ ...beat, role: 'checkpoint', sequence: 1 });
    await parent.write(beat);
    expect(await readdir(dir)).toContain('kube-system_kube-apiserver.checkpoint.json');
    // The agent retires: it removes the manifest and the file; the kubelet then stops the copy,
    // whose sidecar writes its Stopping beat afterwards.
    await rm(cp.path);
    await cp.write({ ...beat, role: 'checkpoint', phase: 'Stopping', sequence: 2 });
    expect(await readdir(dir)).toEqual(['kube-system_kube-apiserver.json']);
    // A parent's Stopping beat is news for the agent (a deliberate stop): it is written.
    await parent.write({ ...beat, phase: 'Stopping', sequence: 13 });
    expect(beatFromFile(await readFile(parent.path, 'utf8'), expected)).toMatchObject({ ok: true, beat: { phase: 'Stopping' } });
  });

  it('fails with the path named when the folder cannot be written, and recovers', async () => {
    dir = await mkdtemp(join(tmpdir(), 'lastseen-local-'));
    const blocker = join(dir, 'heartbeats');
    await writeFile(blocker, 'a file where the folder should be');
    const ch = new LocalChannel(blocker, target);
    await expect(ch.write(beat)).rejects.toThrow(new RegExp(`heartbeat file ${blocker}/kube-system_kube-apiserver.json: E`));
    await rm(blocker);
    await ch.write(beat);
    expect(beatFromFile(await readFile(ch.path, 'utf8'), expected).ok).toBe(true);
  });
});
