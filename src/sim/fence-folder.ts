// The node's heartbeat folder's fence files (tmpfs, beside the beats; a new boot starts empty) and
// the ports production's two halves of a fence use over them: the parent's own sidecar reads the
// request and writes the answer (src/heartbeat/fence.ts, which the simulator runs: sidecar.ts gives
// it `filesOf` as its FenceFiles), and the agent writes the request and polls for the answer
// (production's fenceThroughSidecar, src/agent/fence.ts, which the agent's `fence` actuator in
// lastseen.ts calls with `agentFencePorts`: these files, the node's clocks, timers on the event
// queue).
import type { FenceFolderFiles, FenceOptions } from '../agent/fence.js';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import type { Time } from '../core/time.js';
import type { FenceFiles } from '../heartbeat/fence.js';
import { type SimNode, T } from './model.js';
import type { Scheduled } from './queue.js';
import type { World } from './world.js';

const WRITTEN = Promise.resolve();
/** No request: what every round of every parent's sidecar reads. */
const NONE = Promise.resolve(null);

type Notice = (fn: () => void) => void;

/** The fence files of one node's heartbeat folder in one boot, by name, and their change notification. */
export class FenceFolder {
  private readonly files = new Map<string, string>();
  /** Requests written so far (the agent's request ids). */
  requests = 0;
  /** Who hears a change of each file (the sidecars' folder watches), each through its process, a moment later. */
  private readonly watchers = new Map<string, Set<{ changed: () => void; enter: Notice }>>();

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
    for (const w of this.watchers.get(name) ?? []) this.world.q.after(T.agentFileNoticeMs, () => w.enter(w.changed));
  }

  private listen(name: string, w: { changed: () => void; enter: Notice }): () => void {
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
      watchRequests: (changed) => ({ close: this.listen(request, { changed, enter }) }),
    };
  }

  /** The agent's FenceFolderFiles (`node`: for the paths in its messages); every call settles a promise the world waits for. */
  agentFiles(node: string): FenceFolderFiles {
    return {
      path: (name) => `${node}:${name}`,
      write: (name, text) => {
        this.write(name, text);
        this.world.promised();
        return WRITTEN;
      },
      read: (name) => {
        this.world.promised();
        return Promise.resolve(this.read(name));
      },
      remove: (name) => {
        this.remove(name);
        this.world.promised();
        return WRITTEN;
      },
    };
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
 * The ports of production's fenceThroughSidecar for the agent on `node`: the fence files of the
 * node's heartbeat folder in its current boot, request ids counted per folder (deterministic runs),
 * and the node's clocks, with timers on the event queue as the agent's (lastseen.ts: at the true
 * time the monotonic delay ends, never sooner than 1 ms). `enter` runs a timer in the agent's
 * process, which drops it once the process died: a dead agent hears no answer and no timeout.
 */
export function agentFencePorts(world: World, node: SimNode, enter: Notice): FenceOptions {
  const folder = fenceFolder(world, node);
  const now = () => node.clock.mono(world.q.now);
  const time: Time = {
    now,
    wallNow: () => node.clock.wall(world.q.now),
    set: (fn, ms) =>
      world.q.at(Math.max(world.q.now + 1, Math.ceil(node.clock.trueAt(now() + ms))), () =>
        enter(() => {
          fn();
          world.promised();
        }),
      ),
    clear: (h) => (h as Scheduled).cancel(),
  };
  return { folder: folder.agentFiles(node.name), time, newId: () => `fence-${++folder.requests}` };
}
