import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NodeLock } from './lock.js';

async function dir() {
  return mkdtemp(join(tmpdir(), 'lastseen-lock-'));
}

describe('NodeLock', () => {
  it('one holder at a time; a stale lock is taken over; release frees it at once', async () => {
    const path = join(await dir(), 'agent.lock');
    let wall = 1_000_000;
    const a = new NodeLock({ path, holder: 'a', wallNow: () => wall, staleMs: 10_000 });
    const b = new NodeLock({ path, holder: 'b', wallNow: () => wall, staleMs: 10_000 });
    expect(await a.tryAcquire()).toBe(true);
    expect(await b.tryAcquire()).toBe(false);
    wall += 5_000;
    expect(await a.tryAcquire()).toBe(true); // renew
    wall += 9_999;
    expect(await b.tryAcquire()).toBe(false);
    wall += 2;
    expect(await b.tryAcquire()).toBe(true); // a stopped renewing
    expect(await a.holds()).toBe(false);
    expect(await a.tryAcquire()).toBe(false);
    await b.release();
    expect(await a.tryAcquire()).toBe(true);
  });

  it('a torn lock file counts as free', async () => {
    const d = await dir();
    const path = join(d, 'agent.lock');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path, '{"holder": "x", "renew');
    expect(await new NodeLock({ path, holder: 'a' }).tryAcquire()).toBe(true);
  });
});
