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
//
// Over ports (the folder's fence files, FenceFolderFiles; the clocks and timers, Time), so the
// simulator runs this very function over its model heartbeat folder and virtual time
// (src/sim/fence-folder.ts).
import { randomUUID } from 'node:crypto';
import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import { sleep, systemTime, type Time } from '../core/time.js';
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
  /** Fence even a process seen waiting for a CPU (the core judged it past HANG_STARVED_MS). Absent: do not. */
  evenIfStarved?: boolean;
}

export interface FenceAnswer {
  id: string;
  podUid: string;
  killed: number;
  detail: string;
  /** The sidecar tried and failed (EPERM, …): the fence failed, and is asked again later. */
  error?: string;
}

/**
 * The heartbeat folder's fence files as the agent uses them, by name: the node's folder
 * (`fsFenceFolder`), or the simulator's model of it, so the simulator runs this very function.
 */
export interface FenceFolderFiles {
  /** The file's path, for error messages. */
  path(name: string): string;
  /** Replace file `name` with `text` atomically (mode 0644, for the sidecar): it never reads half a request. */
  write(name: string, text: string): Promise<void>;
  /** The file's text; null when there is none or it cannot be read now (looked at again at the next poll). */
  read(name: string): Promise<string | null>;
  /** Remove file `name`; may reject (the caller ignores that: an absent request is the aim). */
  remove(name: string): Promise<void>;
}

/** The heartbeat folder `dir` on this node. */
export function fsFenceFolder(dir: string): FenceFolderFiles {
  return {
    path: (name) => join(dir, name),
    write: async (name, text) => {
      await writeFileAtomic(join(dir, name), Buffer.from(text), { mode: 0o644 });
    },
    read: async (name) => {
      try {
        return await readFile(join(dir, name), 'utf8');
      } catch {
        return null;
      }
    },
    remove: (name) => unlink(join(dir, name)),
  };
}

/** The fence's ports: its folder (or the node's heartbeat folder, `fsFenceFolder`), its time, its ids. */
export type FenceOptions = ({ folder: FenceFolderFiles } | { heartbeatDir: string }) & {
  timeoutMs?: number;
  pollMs?: number;
  /** The deadline on its monotonic clock, requestedAt from its wall clock, the polls on its timers (default: systemTime). */
  time?: Time;
  /** The request's id, unique among the requests the folder sees (default: a random UUID). */
  newId?: () => string;
};

/** Ask the sidecar of pod `podUid` to fence its main process; resolves with its answer. */
export async function fenceThroughSidecar(
  o: FenceOptions,
  p: { namespace: string; key: string },
  podUid: string,
  reason: Reason,
  evenIfStarved = false,
): Promise<{ killed: number; detail: string }> {
  const folder = 'folder' in o ? o.folder : fsFenceFolder(o.heartbeatDir);
  const time = o.time ?? systemTime;
  const reqName = fenceRequestFile(p.namespace, p.key);
  const ansName = fenceAnswerFile(p.namespace, p.key);
  const req: FenceRequest = {
    id: (o.newId ?? randomUUID)(),
    podUid,
    reason: `${reason.code}: ${reason.message}`,
    requestedAt: new Date(time.wallNow()).toISOString(),
    ...(evenIfStarved ? { evenIfStarved: true } : {}),
  };
  await folder.write(reqName, `${JSON.stringify(req)}\n`);
  const timeoutMs = o.timeoutMs ?? FENCE_ANSWER_TIMEOUT_MS;
  const deadline = time.now() + timeoutMs;
  try {
    for (;;) {
      const ans = parseAnswer(await folder.read(ansName));
      if (ans && ans.id === req.id) {
        if (ans.error !== undefined) throw new Error(`pod ${podUid}'s sidecar could not fence it: ${ans.error}`);
        return { killed: ans.killed, detail: ans.detail };
      }
      if (time.now() >= deadline)
        throw new Error(
          `pod ${podUid}'s sidecar did not answer the fence request ${folder.path(reqName)} within ${Math.round(timeoutMs / 1000)}s (it needs lastseen heartbeat with the heartbeat folder mounted and shareProcessNamespace)`,
        );
      await sleep(time, o.pollMs ?? FENCE_ANSWER_POLL_MS);
    }
  } finally {
    await folder.remove(reqName).catch(() => undefined);
  }
}

function parseAnswer(text: string | null): FenceAnswer | null {
  if (text === null) return null;
  try {
    const a = JSON.parse(text) as Partial<FenceAnswer>;
    if (typeof a.id !== 'string' || typeof a.killed !== 'number' || typeof a.detail !== 'string' || typeof a.podUid !== 'string') return null;
    return { id: a.id, podUid: a.podUid, killed: a.killed, detail: a.detail, ...(typeof a.error === 'string' ? { error: a.error } : {}) };
  } catch {
    return null; // a torn or foreign file: not an answer
  }
}
