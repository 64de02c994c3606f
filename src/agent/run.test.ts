// runAgent's startup is cancellable: an agent standing by for the node lock ends at once, with the
// signal's reason, when its AbortSignal aborts (a SIGTERM to a standby used to kill it by default).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { realTimers } from '../core/time.js';
import { runAgent } from './run.js';
import { holdNodeLock } from './run-lock.js';

let dir: string;
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('runAgent startup', () => {
  it('a standby aborted while waiting for the node lock rejects with the reason, and the holder keeps the lock', async () => {
    dir = await mkdtemp(join(tmpdir(), 'lastseen-run-'));
    const log = pino({ level: 'silent' });
    const holder = await holdNodeLock({ stateDir: dir, holder: 'first', timers: realTimers, log });
    const ac = new AbortController();
    const started = runAgent({
      node: 'n1',
      podName: 'second',
      namespace: 'lastseen-system',
      stateDir: dir,
      manifestDir: join(dir, 'manifests'),
      heartbeatDir: join(dir, 'beats'),
      healthPort: 0,
      healthHost: '127.0.0.1',
      logger: log,
      signal: ac.signal,
    });
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    ac.abort(new Error('stopped by SIGTERM'));
    await expect(started).rejects.toThrow('stopped by SIGTERM');
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(holder.isHeld()).toBe(true);
    await holder.release();
  });
});
