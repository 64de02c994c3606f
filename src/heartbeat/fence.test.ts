// The sidecar's fence responder over its FenceFiles port (the request/answer round trip through
// a real folder is in src/agent/fence.test.ts).
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import type { ProbeResult } from './beat.js';
import { type FenceFiles, FenceResponder, fsFenceFiles } from './fence.js';
import { startHeartbeat } from './heartbeat.js';

const HUNG: ProbeResult = { ok: false, error: 'GET https://127.0.0.1:6443/readyz: no answer within 2000ms', unanswered: true };

interface MemoryFiles {
  request: string | null;
  answers: Array<Record<string, unknown>>;
  reads: number;
  gate: Promise<void> | null;
  files: FenceFiles;
}

/** Fence files in memory; `reads` counts the request reads, `gate` holds each read until released. */
function memoryFiles(): MemoryFiles {
  const f: MemoryFiles = {
    request: null,
    answers: [],
    reads: 0,
    gate: null,
    files: {
      readRequest: async () => {
        f.reads++;
        if (f.gate) await f.gate;
        return f.request;
      },
      writeAnswer: async (text: string) => void f.answers.push(JSON.parse(text)),
      watchRequests: () => ({ close: () => undefined }),
    },
  };
  return f;
}

function responder(files: FenceFiles, probe: ProbeResult = HUNG, holders: number[] | null = [4242]) {
  const killed: number[] = [];
  const r = new FenceResponder({ files, podUid: 'uid-1', probe: async () => probe, portHolders: () => holders, kill: (pid) => void killed.push(pid) });
  return { r, killed };
}

const request = (id: string, podUid = 'uid-1') => JSON.stringify({ id, podUid, reason: 'ParentHung: no answer', requestedAt: '2026-12-02T10:00:00.000Z' });

describe('FenceResponder over its FenceFiles port', () => {
  it('carries a request out once, whatever wakes it, and answers it through the port', async () => {
    const f = memoryFiles();
    const { r, killed } = responder(f.files);
    expect(await r.check()).toBeNull(); // no request
    f.request = request('a');
    expect(await r.check()).toMatchObject({ killed: 1, detail: expect.stringMatching(/^SIGKILL of pid 4242/) });
    expect(await r.check()).toBeNull(); // the same request again: already answered
    expect(killed).toEqual([4242]);
    expect(f.answers).toEqual([{ id: 'a', podUid: 'uid-1', killed: 1, detail: expect.stringMatching(/no answer within 2000ms/) }]);
  });

  it('a check woken while another reads the request does nothing (one kill per request)', async () => {
    const f = memoryFiles();
    const { r, killed } = responder(f.files);
    f.request = request('b');
    let release!: () => void;
    f.gate = new Promise<void>((ok) => {
      release = ok;
    });
    const first = r.check();
    const second = await r.check();
    expect(second).toBeNull();
    expect(f.reads).toBe(1);
    release();
    expect(await first).toMatchObject({ killed: 1 });
    expect(killed).toEqual([4242]);
  });

  it('another pod’s request, a torn one and a process that answers again are not fenced', async () => {
    const f = memoryFiles();
    const { r, killed } = responder(f.files, { ok: false, error: 'HTTP 500' });
    f.request = request('c', 'uid-2');
    expect(await r.check()).toBeNull();
    f.request = request('d').slice(0, 20);
    expect(await r.check()).toBeNull();
    expect(f.answers).toEqual([]);
    f.request = request('d');
    expect(await r.check()).toMatchObject({ killed: 0, detail: expect.stringMatching(/answers \(HTTP 500\): not hung/) });
    expect(killed).toEqual([]);
    expect(f.answers.map((a) => a.id)).toEqual(['d']);
  });

  it('a process waiting for a CPU is not fenced unless the agent asks for it past its bound (evenIfStarved)', async () => {
    const f = memoryFiles();
    const starved: ProbeResult = {
      ...HUNG,
      error: `${HUNG.ok ? '' : HUNG.error}; its process waited 1900ms of 2000ms for a CPU: starved, not hung`,
      starved: true,
    };
    const { r, killed } = responder(f.files, starved);
    f.request = request('s1');
    expect(await r.check()).toMatchObject({ killed: 0, detail: expect.stringMatching(/waits for a CPU .*: not fenced/) });
    expect(killed).toEqual([]);
    f.request = JSON.stringify({ ...JSON.parse(request('s2')), evenIfStarved: true });
    expect(await r.check()).toMatchObject({ killed: 1 });
    expect(killed).toEqual([4242]);
    // evenIfStarved must be the boolean true: anything else is no permission.
    f.request = JSON.stringify({ ...JSON.parse(request('s3')), evenIfStarved: 'yes' });
    expect(await r.check()).toMatchObject({ killed: 0 });
  });

  it('fsFenceFiles: the heartbeat folder’s request and answer files, and its change notification for the request only', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-fence-files-'));
    const files = fsFenceFiles(dir, 'kube-system', 'kube-apiserver');
    expect(await files.readRequest()).toBeNull();
    const changed: string[] = [];
    const w = files.watchRequests(
      () => changed.push('request'),
      (e) => changed.push(`failed: ${e.message}`),
    );
    await writeFile(join(dir, 'unrelated.json'), '{}');
    await writeFile(join(dir, fenceRequestFile('kube-system', 'kube-apiserver')), request('e'));
    await expect.poll(() => changed).toContain('request');
    w.close();
    expect(changed.every((c) => c === 'request')).toBe(true);
    expect(await files.readRequest()).toBe(request('e'));
    await files.writeAnswer('{"id":"e"}\n');
    expect(await readFile(join(dir, fenceAnswerFile('kube-system', 'kube-apiserver')), 'utf8')).toBe('{"id":"e"}\n');
  });
});

describe('startHeartbeat wires the responder to the heartbeat folder', () => {
  it('a parent’s sidecar answers a request written into its folder at once (its watch), not at its next round', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-fence-wired-'));
    const hb = startHeartbeat({
      identity: { namespace: 'kube-system', podName: 'api-1', podUid: 'uid-1', key: 'kube-apiserver', node: 'n1', role: 'parent' },
      intervalMs: 60_000,
      channels: ['local'],
      heartbeatDir: dir,
      writers: [{ channel: 'local', write: async () => undefined }],
      probe: async () => HUNG,
      logger: pino({ level: 'silent' }),
    });
    try {
      await writeFile(join(dir, fenceRequestFile('kube-system', 'kube-apiserver')), request('w1'));
      const answer = join(dir, fenceAnswerFile('kube-system', 'kube-apiserver'));
      await expect.poll(() => readFile(answer, 'utf8').catch(() => null), { timeout: 5000 }).not.toBeNull();
      // A probe given as a function names no port: nothing this sidecar can tell holds it.
      expect(JSON.parse(await readFile(answer, 'utf8'))).toMatchObject({
        id: 'w1',
        podUid: 'uid-1',
        killed: 0,
        detail: expect.stringMatching(/names no port/),
      });
    } finally {
      await hb.stop();
    }
  });
});
