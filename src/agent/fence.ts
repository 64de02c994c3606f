// The fence of a hung parent, as the agent carries it out (src/core/fence.ts says when).
//
// The agent does not kill anything itself. It writes a fence request beside the parent's local
// beat (the heartbeat folder both mount), naming the hung pod's uid; the parent's own sidecar,
// which sees exactly its pod's processes (shareProcessNamespace) and already proves which of them
// holds the port, probes once more and kills its main process only if it still does not answer
// (src/heartbeat/fence.ts). Its answer comes back as a file; the agent waits for it.
//
// Why this way (docs/decisions/0005-fencing.md): no new privilege for the agent (no host PID
// namespace, no container runtime socket), no api-server needed (a hung api-server is the case),
// and two independent checks: the agent never asks while the parent is fresh, the sidecar never
// acts while its process answers.
import { randomUUID } from 'node:crypto';
import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import type { Reason } from '../core/types.js';

/** How long the sidecar may take to answer: it notices the request at once (fs.watch) or at its next round. */
export const FENCE_ANSWER_TIMEOUT_MS = 20_000;
/** How often the agent looks for the answer meanwhile. */
export const FENCE_ANSWER_POLL_MS = 200;

export interface FenceRequest {
  id: string;
  podUid: string;
  reason: string;
  requestedAt: string;
}

export interface FenceAnswer {
  id: string;
  podUid: string;
  killed: number;
  detail: string;
  /** The sidecar tried and failed (EPERM, …): the fence failed, and is asked again later. */
  error?: string;
}

export interface FenceOptions {
  heartbeatDir: string;
  timeoutMs?: number;
  pollMs?: number;
  now?: () => Date;
}

/** Ask the sidecar of pod `podUid` to fence its main process; resolves with its answer. */
export async function fenceThroughSidecar(
  o: FenceOptions,
  p: { namespace: string; key: string },
  podUid: string,
  reason: Reason,
): Promise<{ killed: number; detail: string }> {
  const reqPath = join(o.heartbeatDir, fenceRequestFile(p.namespace, p.key));
  const ansPath = join(o.heartbeatDir, fenceAnswerFile(p.namespace, p.key));
  const req: FenceRequest = { id: randomUUID(), podUid, reason: `${reason.code}: ${reason.message}`, requestedAt: (o.now?.() ?? new Date()).toISOString() };
  await writeFileAtomic(reqPath, Buffer.from(`${JSON.stringify(req)}\n`), { mode: 0o644 });
  const timeoutMs = o.timeoutMs ?? FENCE_ANSWER_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const ans = await readAnswer(ansPath);
      if (ans && ans.id === req.id) {
        if (ans.error !== undefined) throw new Error(`pod ${podUid}'s sidecar could not fence it: ${ans.error}`);
        return { killed: ans.killed, detail: ans.detail };
      }
      if (Date.now() >= deadline)
        throw new Error(
          `pod ${podUid}'s sidecar did not answer the fence request ${reqPath} within ${Math.round(timeoutMs / 1000)}s (it needs lastseen heartbeat with the heartbeat folder mounted and shareProcessNamespace)`,
        );
      await sleep(o.pollMs ?? FENCE_ANSWER_POLL_MS);
    }
  } finally {
    await unlink(reqPath).catch(() => undefined);
  }
}

async function readAnswer(path: string): Promise<FenceAnswer | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return null;
  }
  try {
    const a = JSON.parse(text) as Partial<FenceAnswer>;
    if (typeof a.id !== 'string' || typeof a.killed !== 'number' || typeof a.detail !== 'string' || typeof a.podUid !== 'string') return null;
    return { id: a.id, podUid: a.podUid, killed: a.killed, detail: a.detail, ...(typeof a.error === 'string' ? { error: a.error } : {}) };
  } catch {
    return null; // a torn or foreign file: not an answer
  }
}
