// The sidecar's half of a fence (src/agent/fence.ts is the agent's): when the agent asks to fence
// this pod, probe the main container once more and, only if it still gives no answer at all, kill
// the pod's own processes that hold the probed port (SIGKILL: a hung process may not act on
// SIGTERM, and a stopped one never does). The kubelet restarts the container; this sidecar, a
// separate container, beats on. Always answers, so the agent knows what happened.
//
// Over ports: the request and answer files (FenceFiles: the heartbeat folder in production, the
// node's tmpfs in the simulator), the probe, the port's holders and the process killer, so the
// simulator runs this very responder against its model pods.
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import type { ProbeResult } from './beat.js';

/** Where this pod's fence request is read and its answer written. */
export interface FenceFiles {
  /** The request file's text; null when there is none (or it cannot be read now: looked at again next time). */
  readRequest(): Promise<string | null>;
  /** Replace the answer file with `text`, atomically: the agent never reads half an answer. */
  writeAnswer(text: string): Promise<void>;
  /**
   * Call `changed` when the request file may have changed (the folder's change notification), so a
   * request is answered at once and not only at the next round; `failed` when notification stops
   * (requests are then answered at each round only).
   */
  watchRequests(changed: () => void, failed: (e: Error) => void): { close(): void };
}

/** The fence files of parent `namespace/key` in the heartbeat folder `dir` (production's FenceFiles). */
export function fsFenceFiles(dir: string, namespace: string, key: string): FenceFiles {
  const requestName = fenceRequestFile(namespace, key);
  return {
    readRequest: async () => {
      try {
        return readFileSync(join(dir, requestName), 'utf8');
      } catch {
        return null;
      }
    },
    writeAnswer: async (text) => {
      await writeFileAtomic(join(dir, fenceAnswerFile(namespace, key)), Buffer.from(text), { mode: 0o644 });
    },
    watchRequests: (changed, failed) => {
      let watcher: FSWatcher | null = null;
      try {
        watcher = watch(dir, (_event, name) => {
          if (name === requestName) changed();
        });
        watcher.on('error', failed);
      } catch (e) {
        failed(e as Error);
      }
      return { close: () => watcher?.close() };
    },
  };
}

/** What the responder needs of its pod: who it is, its probe, and its processes. */
export interface FencePorts {
  podUid: string;
  /** The main container's probe (the same one the beats use). */
  probe: () => Promise<ProbeResult>;
  /** Pids of this pod's processes that hold the probed port (null: the probe names no port, nothing can be fenced). */
  portHolders: () => number[] | null;
  kill: (pid: number, signal: NodeJS.Signals) => void;
}

/** The responder's ports: its fence files, or the heartbeat folder they are in (fsFenceFiles). */
export type FenceDeps = FencePorts & ({ files: FenceFiles } | { heartbeatDir: string; namespace: string; key: string });

export interface FenceResult {
  killed: number;
  detail: string;
  error?: string;
}

/** Requests already answered (their ids), so a request is carried out once whatever wakes us. */
const ANSWERED_MAX = 16;

export class FenceResponder {
  private answered: string[] = [];
  private busy = false;
  readonly files: FenceFiles;

  constructor(private readonly d: FenceDeps) {
    this.files = 'files' in d ? d.files : fsFenceFiles(d.heartbeatDir, d.namespace, d.key);
  }

  /** Look for a request for this pod and answer it. Returns what was done (null: no request for us). */
  async check(): Promise<FenceResult | null> {
    if (this.busy) return null;
    // Busy from the first read: a check woken meanwhile (the folder watch, a round) does nothing.
    this.busy = true;
    try {
      const req = parseRequest(await this.files.readRequest());
      if (!req || req.podUid !== this.d.podUid || this.answered.includes(req.id)) return null;
      let result: FenceResult;
      try {
        result = await this.carryOut(req.evenIfStarved);
      } catch (e) {
        result = { killed: 0, detail: 'not fenced', error: (e as Error).message };
      }
      this.answered = [...this.answered, req.id].slice(-ANSWERED_MAX);
      const answer = { id: req.id, podUid: this.d.podUid, ...result };
      await this.files.writeAnswer(`${JSON.stringify(answer)}\n`);
      return result;
    } finally {
      this.busy = false;
    }
  }

  private async carryOut(evenIfStarved: boolean): Promise<{ killed: number; detail: string }> {
    const r = await this.d.probe();
    if (r.ok) return { killed: 0, detail: 'the main container answers its probe again: not fenced' };
    if (r.unanswered !== true) return { killed: 0, detail: `the main container answers (${r.error}): not hung, not fenced` };
    // A process kept off the CPU is slow, not hung; the agent asks for it only past its bound.
    if (r.starved === true && !evenIfStarved) return { killed: 0, detail: `the main container waits for a CPU (${r.error}): not fenced` };
    const pids = this.d.portHolders();
    if (pids === null) return { killed: 0, detail: 'the probe names no port: nothing this sidecar can tell holds it' };
    if (pids.length === 0) return { killed: 0, detail: 'no process of this pod holds the probed port any more' };
    const killed: number[] = [];
    const failed: string[] = [];
    for (const pid of pids) {
      try {
        this.d.kill(pid, 'SIGKILL');
        killed.push(pid);
      } catch (e) {
        failed.push(`${pid}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
    }
    if (killed.length === 0) throw new Error(`could not kill the hung process(es) holding the port (${failed.join(', ')})`);
    return {
      killed: killed.length,
      detail: `SIGKILL of pid ${killed.join(', ')} (no answer: ${r.error})${failed.length ? `; failed: ${failed.join(', ')}` : ''}`,
    };
  }
}

/** A request's id and pod; null for none, or a torn or foreign file (looked at again next time). */
function parseRequest(text: string | null): { id: string; podUid: string; evenIfStarved: boolean } | null {
  if (text === null) return null;
  try {
    const doc = JSON.parse(text) as { id?: unknown; podUid?: unknown; evenIfStarved?: unknown };
    return typeof doc.id === 'string' && typeof doc.podUid === 'string' ? { id: doc.id, podUid: doc.podUid, evenIfStarved: doc.evenIfStarved === true } : null;
  } catch {
    return null;
  }
}
