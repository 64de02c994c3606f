import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fenceRequestFile } from '../core/names.js';
import type { ProbeResult } from '../heartbeat/beat.js';
import { FenceResponder } from '../heartbeat/fence.js';
import { fenceThroughSidecar } from './fence.js';
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
    const asked = fenceThroughSidecar({ heartbeatDir: dir, pollMs: 5, timeoutMs: 5000 }, P, 'uid-1', WHY);
    await new Promise((r) => setTimeout(r, 30));
    await sidecar.check();
    await expect(asked).rejects.toThrow(/could not fence it: .*EPERM/);
  });

  it('the request file is no beat file to the agent’s folder scan', () => {
    expect(fenceRequestFile(P.namespace, P.key).startsWith('.')).toBe(true);
    expect(localFileParent(fenceRequestFile(P.namespace, P.key))).toBeNull();
  });
});
