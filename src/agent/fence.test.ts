import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FakeTime } from '../core/fake-time.test-helpers.js';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import type { ProbeResult } from '../heartbeat/beat.js';
import { FenceResponder } from '../heartbeat/fence.js';
import { FENCE_ANSWER_POLL_MS, FENCE_ANSWER_TIMEOUT_MS, type FenceFolderFiles, fenceThroughSidecar } from './fence.js';
import { localFileParent } from './parents.js';

const P = { namespace: 'kube-system', key: 'kube-apiserver' };
const WHY = { code: 'ParentHung', message: 'no answer for 2 rounds' };

async function setup(probe: ProbeResult, holders: number[] | null = [4242], podUid = 'uid-1') {
  const dir = await mkdtemp(join(tmpdir(), 'lastseen-fence-'));
  const killed: Array<[number, string]> = [];
  const sidecar = new FenceResponder({
    heartbeatDir: dir,
    ...P,
    podUid,
    probe: async () => probe,
    portHolders: () => holders,
    kill: (pid, signal) => void killed.push([pid, signal]),
  });
  // The sidecar looks for requests while the agent waits (as its rounds and its folder watch do).
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      await sidecar.check();
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  const done = async () => {
    stop = true;
    await loop;
  };
  return { dir, killed, done };
}

describe('the fence: the agent asks, the parent’s own sidecar acts (docs/decisions/0005-fencing.md)', () => {
  it('a process that still gives no answer is killed (SIGKILL of the pod’s port holders), and the agent hears it', async () => {
    const s = await setup({ ok: false, error: 'GET https://127.0.0.1:6443/readyz: no answer within 2000ms', unanswered: true });
    const r = await fenceThroughSidecar({ heartbeatDir: s.dir, pollMs: 5, timeoutMs: 5000 }, P, 'uid-1', WHY);
    await s.done();
    expect(r.killed).toBe(1);
    expect(r.detail).toMatch(/SIGKILL of pid 4242/);
    expect(s.killed).toEqual([[4242, 'SIGKILL']]);
  });

  it('never a process that answers, even with an error status, and never for another pod', async () => {
    const answered = await setup({ ok: false, error: 'GET https://127.0.0.1:6443/readyz: HTTP 500' });
    const r = await fenceThroughSidecar({ heartbeatDir: answered.dir, pollMs: 5, timeoutMs: 5000 }, P, 'uid-1', WHY);
    await answered.done();
    expect(r.killed).toBe(0);
    expect(answered.killed).toEqual([]);
    // A request naming another pod is not this sidecar's: no answer, the agent gives up.
    const other = await setup({ ok: false, error: 'timeout', unanswered: true }, [1], 'uid-2');
    await expect(fenceThroughSidecar({ heartbeatDir: other.dir, pollMs: 5, timeoutMs: 200 }, P, 'uid-1', WHY)).rejects.toThrow(
      /did not answer the fence request/,
    );
    await other.done();
    expect(other.killed).toEqual([]);
  });

  it('a kill that fails is a failed fence (asked again later), not a fence done', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-fence-'));
    const sidecar = new FenceResponder({
      heartbeatDir: dir,
      ...P,
      podUid: 'uid-1',
      probe: async () => ({ ok: false, error: 'timeout', unanswered: true }),
      portHolders: () => [7],
      kill: () => {
        throw Object.assign(new Error('operation not permitted'), { code: 'EPERM' });
      },
    });
    // The outcome is taken at once: the answer may arrive while the sidecar's check is awaited,
    // and a rejection nobody holds yet is an unhandled one.
    const asked = fenceThroughSidecar({ heartbeatDir: dir, pollMs: 5, timeoutMs: 5000 }, P, 'uid-1', WHY).then(
      () => null,
      (e: Error) => e,
    );
    await new Promise((r) => setTimeout(r, 30));
    await sidecar.check();
    expect((await asked)?.message).toMatch(/could not fence it: .*EPERM/);
  });

  it('over its ports (the simulator’s way in): looks every poll interval on its timers, gives up on its clock, removes its request', async () => {
    const time = new FakeTime();
    const files = new Map<string, string>();
    const reads: number[] = [];
    const folder: FenceFolderFiles = {
      path: (name) => `memory:${name}`,
      write: async (name, text) => void files.set(name, text),
      read: async (name) => {
        reads.push(time.now());
        return files.get(name) ?? null;
      },
      remove: async (name) => void files.delete(name),
    };
    const request = fenceRequestFile(P.namespace, P.key);
    // A stale answer to an earlier request is no answer to this one.
    files.set(fenceAnswerFile(P.namespace, P.key), `${JSON.stringify({ id: 'r0', podUid: 'uid-1', killed: 1, detail: 'old' })}\n`);
    const outcome = fenceThroughSidecar({ folder, time, newId: () => 'r1' }, P, 'uid-1', WHY).then(
      (r) => r,
      (e: Error) => e.message,
    );
    await time.advance(FENCE_ANSWER_TIMEOUT_MS - 1);
    expect(JSON.parse(files.get(request)!)).toEqual({
      id: 'r1',
      podUid: 'uid-1',
      reason: 'ParentHung: no answer for 2 rounds',
      requestedAt: new Date(time.wallNow() - (FENCE_ANSWER_TIMEOUT_MS - 1)).toISOString(),
    });
    expect(reads).toEqual(Array.from({ length: FENCE_ANSWER_TIMEOUT_MS / FENCE_ANSWER_POLL_MS }, (_, i) => i * FENCE_ANSWER_POLL_MS));
    await time.advance(1);
    expect(await outcome).toBe(
      `pod uid-1's sidecar did not answer the fence request memory:${request} within 20s (it needs lastseen heartbeat with the heartbeat folder mounted and shareProcessNamespace)`,
    );
    expect(files.has(request)).toBe(false);
  });

  it('the request file is no beat file to the agent’s folder scan', () => {
    expect(fenceRequestFile(P.namespace, P.key).startsWith('.')).toBe(true);
    expect(localFileParent(fenceRequestFile(P.namespace, P.key))).toBeNull();
  });
});
