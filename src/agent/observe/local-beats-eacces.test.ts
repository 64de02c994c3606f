// A heartbeat file the agent may not read. Tests run as root here, where chmod 000 denies nothing,
// so the read itself is made to fail with EACCES for one file name.
import { mkdtemp, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { FakeTime, memoryLogger } from '../../core/fake-time.test-helpers.js';
import { watchLocalBeats } from './local-beats.js';

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return {
    ...real,
    open: ((path: string, flags: number, cb: (e: Error | null, fd?: number) => void) => {
      if (String(path).endsWith('locked.json')) {
        process.nextTick(cb, Object.assign(new Error(`EACCES: permission denied, open '${String(path)}'`), { code: 'EACCES' }));
        return;
      }
      real.open(path, flags, cb);
    }) as typeof real.open,
  };
});

describe('local beats observer', () => {
  it('logs a file it may not read, with the error code, and carries on', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-beats-'));
    for (const name of ['locked.json', 'ok.json']) {
      await writeFile(join(dir, `.${name}.tmp`), '{}');
      await rename(join(dir, `.${name}.tmp`), join(dir, name));
    }
    const { log, records } = await memoryLogger();
    const calls: string[] = [];
    const w = watchLocalBeats({ dir, pollMs: 1000, log, timers: new FakeTime(), onFile: (n, t) => calls.push(`file ${n} ${t}`), onRemoved: () => {} });
    await w.pollOnce();
    expect(calls).toEqual(['file ok.json {}']);
    expect(records.find((r) => r.file === 'locked.json')).toMatchObject({ code: 'EACCES' });
  });
});
