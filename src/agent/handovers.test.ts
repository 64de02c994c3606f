import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HandoverFile } from './handovers.js';

describe('HandoverFile', () => {
  it('keeps a deadline across instances on the wall clock, and forgets cleared ones', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-ho-'));
    let wall = 1_000_000;
    const a = new HandoverFile(dir, () => wall);
    await a.set('ns/k', { remainingMs: 60_000, attempts: 2, nextBackoffMs: 30_000 });
    await a.set('ns/other', { remainingMs: 1000, attempts: 1, nextBackoffMs: 5000 });
    await a.set('ns/other', null);
    wall += 20_000;
    const b = new HandoverFile(dir, () => wall);
    expect(await b.load()).toBeNull();
    expect(b.recovered('ns/k')).toEqual({ remainingMs: 40_000, attempts: 2, nextBackoffMs: 30_000 });
    expect(b.recovered('ns/other')).toBeUndefined();
  });

  it('keeps a known-bad verdict across instances, with or without a hand-over in progress', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-ho-'));
    let wall = 1_000_000;
    const a = new HandoverFile(dir, () => wall);
    await a.set('ns/verdict', { remainingMs: 0, attempts: 1, nextBackoffMs: 60_000, inProgress: false, knownBad: { specHash: 'h-bad', podUid: 'u2' } });
    await a.set('ns/both', { remainingMs: 30_000, attempts: 2, nextBackoffMs: 60_000, knownBad: { specHash: 'h-x', podUid: 'u9' } });
    wall += 10_000;
    const b = new HandoverFile(dir, () => wall);
    expect(await b.load()).toBeNull();
    expect(b.recovered('ns/verdict')).toMatchObject({ inProgress: false, knownBad: { specHash: 'h-bad', podUid: 'u2' } });
    expect(b.recovered('ns/both')).toEqual({ remainingMs: 20_000, attempts: 2, nextBackoffMs: 60_000, knownBad: { specHash: 'h-x', podUid: 'u9' } });
    // A verdict-only record is written once: the same record again changes nothing on disk.
    const before = await readFile(join(dir, 'handovers.json'), 'utf8');
    wall += 5_000;
    await b.set('ns/verdict', { remainingMs: 0, attempts: 1, nextBackoffMs: 60_000, inProgress: false, knownBad: { specHash: 'h-bad', podUid: 'u2' } });
    expect(await readFile(join(dir, 'handovers.json'), 'utf8')).toBe(before);
  });

  it('a corrupted file is reported and means no hand-over in progress', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-ho-'));
    await writeFile(join(dir, 'handovers.json'), '{"ns/k": {"deadlineW');
    const f = new HandoverFile(dir);
    expect(await f.load()).toMatch(/not valid JSON/);
    expect(f.recovered('ns/k')).toBeUndefined();
  });
});
