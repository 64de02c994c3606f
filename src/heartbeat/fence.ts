// The sidecar's half of a fence (src/agent/fence.ts is the agent's): when the agent asks to fence
// this pod, probe the main container once more and, only if it still gives no answer at all, kill
// the pod's own processes that hold the probed port (SIGKILL: a hung process may not act on
// SIGTERM, and a stopped one never does). The kubelet restarts the container; this sidecar, a
// separate container, beats on. Always answers, so the agent knows what happened.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import { fenceAnswerFile, fenceRequestFile } from '../core/names.js';
import type { ProbeResult } from './beat.js';

export interface FenceDeps {
  heartbeatDir: string;
  namespace: string;
  key: string;
  podUid: string;
  /** The main container's probe (the same one the beats use). */
  probe: () => Promise<ProbeResult>;
  /** Pids of this pod's processes that hold the probed port (null: the probe names no port, nothing can be fenced). */
  portHolders: () => number[] | null;
  kill: (pid: number, signal: NodeJS.Signals) => void;
}

/** Requests already answered (their ids), so a request is carried out once whatever wakes us. */
const ANSWERED_MAX = 16;

export class FenceResponder {
  private answered: string[] = [];
  private busy = false;

  constructor(private readonly d: FenceDeps) {}

  /** Look for a request for this pod and answer it. Returns what was done (null: no request for us). */
  async check(): Promise<{ killed: number; detail: string; error?: string } | null> {
    if (this.busy) return null;
    const req = this.readRequest();
    if (!req || req.podUid !== this.d.podUid || this.answered.includes(req.id)) return null;
    this.busy = true;
    try {
      let result: { killed: number; detail: string; error?: string };
      try {
        result = await this.carryOut();
      } catch (e) {
        result = { killed: 0, detail: 'not fenced', error: (e as Error).message };
      }
      this.answered = [...this.answered, req.id].slice(-ANSWERED_MAX);
      const answer = { id: req.id, podUid: this.d.podUid, ...result };
      await writeFileAtomic(join(this.d.heartbeatDir, fenceAnswerFile(this.d.namespace, this.d.key)), Buffer.from(`${JSON.stringify(answer)}\n`), {
        mode: 0o644,
      });
      return result;
    } finally {
      this.busy = false;
    }
  }

  private async carryOut(): Promise<{ killed: number; detail: string }> {
    const r = await this.d.probe();
    if (r.ok) return { killed: 0, detail: 'the main container answers its probe again: not fenced' };
    if (r.unanswered !== true) return { killed: 0, detail: `the main container answers (${r.error}): not hung, not fenced` };
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

  private readRequest(): { id: string; podUid: string } | null {
    try {
      const doc = JSON.parse(readFileSync(join(this.d.heartbeatDir, fenceRequestFile(this.d.namespace, this.d.key)), 'utf8')) as {
        id?: unknown;
        podUid?: unknown;
      };
      return typeof doc.id === 'string' && typeof doc.podUid === 'string' ? { id: doc.id, podUid: doc.podUid } : null;
    } catch {
      return null; // none, or torn: looked at again next time
    }
  }
}
