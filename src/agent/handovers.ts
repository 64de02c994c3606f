// Hand-overs in progress, kept on disk so an agent restart keeps their deadlines (otherwise a
// parent left Starting after a retire would wait out startTimeout instead of handoverTimeout).
// One small JSON file in the state folder, written atomically on every change; deadlines are on
// the wall clock (the monotonic clock does not survive a restart); the core caps what it reads.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import type { RecoveredHandover } from '../core/decide.js';

interface Entry {
  deadlineWall: number;
  attempts: number;
  nextBackoffMs: number;
  /** false: no hand-over in progress, the entry keeps only the known-bad verdict (absent: true). */
  inProgress?: boolean;
  /** The spec that failed a hand-over (or exited beside an overlap checkpoint): not handed over to again. */
  knownBad?: { specHash: string; podUid: string };
}

export class HandoverFile {
  private entries = new Map<string, Entry>();
  private writing: Promise<unknown> = Promise.resolve();
  readonly path: string;

  constructor(
    stateDir: string,
    private readonly wallNow: () => number = Date.now,
  ) {
    this.path = join(stateDir, 'handovers.json');
  }

  /** Read the file; a missing or unreadable one means no hand-over in progress (returns why). */
  async load(): Promise<string | null> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch {
      return null;
    }
    try {
      const doc = JSON.parse(text) as Record<string, Entry>;
      for (const [id, e] of Object.entries(doc)) {
        if (typeof e?.deadlineWall !== 'number' || typeof e.attempts !== 'number' || typeof e.nextBackoffMs !== 'number') continue;
        const kb = e.knownBad;
        const knownBad =
          kb && typeof kb.specHash === 'string' && typeof kb.podUid === 'string' ? { knownBad: { specHash: kb.specHash, podUid: kb.podUid } } : {};
        this.entries.set(id, {
          deadlineWall: e.deadlineWall,
          attempts: e.attempts,
          nextBackoffMs: e.nextBackoffMs,
          ...(e.inProgress === false ? { inProgress: false } : {}),
          ...knownBad,
        });
      }
      return null;
    } catch (e) {
      return `${this.path} is not valid JSON (${(e as Error).message}); hand-overs in progress are forgotten`;
    }
  }

  recovered(id: string): RecoveredHandover | undefined {
    const e = this.entries.get(id);
    if (!e) return undefined;
    return {
      remainingMs: e.deadlineWall - this.wallNow(),
      attempts: e.attempts,
      nextBackoffMs: e.nextBackoffMs,
      ...(e.inProgress === false ? { inProgress: false } : {}),
      ...(e.knownBad ? { knownBad: { ...e.knownBad } } : {}),
    };
  }

  /**
   * Record (or clear, with null) the hand-over of one parent; resolves when on disk (with every
   * change recorded before it). The agent calls it on every transition and waits for it before a
   * retire (src/agent/agent.ts); an unchanged record writes nothing.
   */
  set(id: string, h: RecoveredHandover | null): Promise<unknown> {
    const before = JSON.stringify(this.entries.get(id) ?? null);
    if (h) {
      this.entries.set(id, {
        // A record that only keeps a verdict has no deadline: a fixed value, so it is not rewritten on every transition.
        deadlineWall: h.inProgress === false ? 0 : this.wallNow() + h.remainingMs,
        attempts: h.attempts,
        nextBackoffMs: h.nextBackoffMs,
        ...(h.inProgress === false ? { inProgress: false } : {}),
        ...(h.knownBad ? { knownBad: { ...h.knownBad } } : {}),
      });
    } else this.entries.delete(id);
    if (JSON.stringify(this.entries.get(id) ?? null) === before) return this.writing;
    const body = Buffer.from(`${JSON.stringify(Object.fromEntries(this.entries))}\n`);
    this.writing = this.writing.then(() => writeFileAtomic(this.path, body, { mode: 0o600 })).catch(() => undefined);
    return this.writing;
  }
}
