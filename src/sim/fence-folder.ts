// The node's heartbeat folder's fence files (tmpfs, beside the beats; a new boot starts empty) and
// the agent's half of a fence over them. Production: the agent writes a request and waits for the
// answer (src/agent/fence.ts), the parent's own sidecar reads the request and writes the answer
// (src/heartbeat/fence.ts, which the simulator runs: sidecar.ts gives it `filesOf` as its
// FenceFiles). The agent's half here is an adapter for the agent's `fence` actuator
// (lastseen.ts): it writes the request as production's does and resolves with the sidecar's
// answer the moment it is written (production looks every 200 ms), or fails when none comes
// within production's timeout.
import { FENCE_ANSWER_TIMEOUT_MS } from '../agent/fence.js';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import type { Reason } from '../core/types.js';
import type { FenceFiles } from '../heartbeat/fence.js';
import { type SimNode, T } from './model.js';
import type { World } from './world.js';

const WRITTEN = Promise.resolve();
/** No request: what every round of every parent's sidecar reads. */
const NONE = Promise.resolve(null);

type Notice = (fn: () => void) => void;

/** The fence files of one node's heartbeat folder in one boot, by name, and their change notification. */
export class FenceFolder {
  private readonly files = new Map<string, string>();
  /** Requests written so far (their ids). */
  requests = 0;
  /** Who hears a change of each file, each through its process: the sidecars' folder watches a moment later, the agent at once. */
  private readonly watchers = new Map<string, Set<{ changed: () => void; enter: Notice; delayMs: number }>>();

  constructor(
    private readonly world: World,
    readonly bootId: number,
  ) {}

  read(name: string): string | null {
    return this.files.get(name) ?? null;
  }

  /** Write a file, and tell its watchers. */
  write(name: string, text: string): void {
    this.files.set(name, text);
    for (const w of this.watchers.get(name) ?? []) {
      if (w.delayMs === 0) w.enter(w.changed);
      else this.world.q.after(w.delayMs, () => w.enter(w.changed));
    }
  }

  private listen(name: string, w: { changed: () => void; enter: Notice; delayMs: number }): () => void {
    const set = this.watchers.get(name) ?? new Set();
    this.watchers.set(name, set);
    set.add(w);
    return () => set.delete(w);
  }

  remove(name: string): void {
    this.files.delete(name);
  }

  /** A parent's sidecar's FenceFiles; `enter` runs its notifications in its process. */
  filesOf(namespace: string, key: string, enter: Notice): FenceFiles {
    const request = fenceRequestFile(namespace, key);
    const answer = fenceAnswerFile(namespace, key);
    return {
      readRequest: () => {
        const text = this.read(request);
        return text === null ? NONE : Promise.resolve(text);
      },
      writeAnswer: (text) => {
        this.write(answer, text);
        return WRITTEN;
      },
      // The folder's change notification (fs.watch, inotify), as quick as the agent's.
      watchRequests: (changed) => ({ close: this.listen(request, { changed, enter, delayMs: T.agentFileNoticeMs }) }),
    };
  }

  /**
   * Hear of every change of file `name` at once (the agent waiting for a fence answer: production
   * looks every 200 ms; the model, as it always has, hears the answer the moment it is written).
   * Returns the unsubscribe.
   */
  watch(name: string, changed: () => void): () => void {
    return this.listen(name, { changed, enter: (fn) => fn(), delayMs: 0 });
  }
}

const folders = new WeakMap<SimNode, FenceFolder>();

/** The node's heartbeat folder's fence files in its current boot. */
export function fenceFolder(world: World, node: SimNode): FenceFolder {
  let f = folders.get(node);
  if (!f || f.bootId !== node.bootId) {
    f = new FenceFolder(world, node.bootId);
    folders.set(node, f);
  }
  return f;
}

/**
 * The agent asks the sidecar of pod `podUid` to fence its main process (the request file, as
 * production's fenceThroughSidecar writes it); resolves with the sidecar's answer. A process that
 * died meanwhile (`alive`) hears nothing more.
 */
export function askSidecarToFence(
  world: World,
  node: SimNode,
  p: { namespace: string; key: string },
  podUid: string,
  reason: Reason,
  alive: () => boolean,
): Promise<{ killed: number; detail: string }> {
  const folder = fenceFolder(world, node);
  const requestName = fenceRequestFile(p.namespace, p.key);
  const answerName = fenceAnswerFile(p.namespace, p.key);
  const id = `fence-${++folder.requests}`;
  const requestedAt = new Date(node.clock.wall(world.q.now)).toISOString();
  folder.write(requestName, `${JSON.stringify({ id, podUid, reason: `${reason.code}: ${reason.message}`, requestedAt })}\n`);
  return new Promise((resolve, reject) => {
    const done = (settle: () => void) => {
      unwatch();
      timeout.cancel();
      folder.remove(requestName);
      world.promised();
      settle();
    };
    const unwatch = folder.watch(answerName, () => {
      const a = parseAnswer(folder.read(answerName));
      if (a?.id !== id) return;
      if (a.error !== undefined) done(() => reject(new Error(`pod ${podUid}'s sidecar could not fence it: ${a.error}`)));
      else done(() => resolve({ killed: a.killed, detail: a.detail }));
    });
    const timeout = world.q.after(FENCE_ANSWER_TIMEOUT_MS, () => {
      if (!alive()) return;
      done(() => reject(new Error(`pod ${podUid}'s sidecar did not answer the fence request within ${Math.round(FENCE_ANSWER_TIMEOUT_MS / 1000)}s`)));
    });
  });
}

function parseAnswer(text: string | null): { id: string; killed: number; detail: string; error?: string } | null {
  if (text === null) return null;
  try {
    const a = JSON.parse(text) as { id?: unknown; killed?: unknown; detail?: unknown; error?: unknown };
    if (typeof a.id !== 'string' || typeof a.killed !== 'number' || typeof a.detail !== 'string') return null;
    return { id: a.id, killed: a.killed, detail: a.detail, ...(typeof a.error === 'string' ? { error: a.error } : {}) };
  } catch {
    return null;
  }
}
