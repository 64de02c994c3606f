// Hand-overs in progress, kept on disk so an agent restart keeps their deadlines (otherwise a
// parent left Starting after a retire would wait out startTimeout instead of handoverTimeout).
// One small JSON document, rewritten whole on every change; deadlines are on the wall clock (the
// monotonic clock does not survive a restart); the core caps what it reads.
//
// The record's logic (what is kept, the wall-clock conversion, unchanged records costing nothing,
// writes in order) lives in `HandoverRecords`, over a `HandoverStore` that only reads and writes
// the document's text: `fileHandoverStore` on the node (an atomic file write), the simulator's
// node disk in src/sim/lastseen.ts.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import type { RecoveredHandover } from '../core/decide.js';

/** Where the record's text is kept. */
export interface HandoverStore {
  /** A name for logs and errors (the file's path). */
  readonly where: string;
  /** The document's text; null when there is none (never written, or removed). */
  read(): Promise<string | null>;
  /** Replace the document, durably (resolves once it would survive a crash); rejects when it could not. */
  write(text: string): Promise<void>;
}

/** The state folder's `handovers.json`, written atomically. */
export function fileHandoverStore(stateDir: string): HandoverStore {
  const path = join(stateDir, 'handovers.json');
  return {
    where: path,
    async read() {
      try {
        return await readFile(path, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw e;
      }
    },
    async write(text) {
      await writeFileAtomic(path, Buffer.from(text), { mode: 0o600 });
    },
  };
}

interface Entry {
  deadlineWall: number;
  attempts: number;
  nextBackoffMs: number;
  /** false: no hand-over in progress, the entry keeps only the known-bad verdict (absent: true). */
  inProgress?: boolean;
  /** The spec that failed a hand-over (or exited beside an overlap checkpoint): not handed over to again. */
  knownBad?: { specHash: string; podUid: string; strikes?: number; untilWall?: number };
}

/** A verdict's probation end on the wall clock, to the second: a record that only keeps it is not rewritten on every transition. */
const VERDICT_WALL_RESOLUTION_MS = 1000;

export class HandoverRecords {
  private entries = new Map<string, Entry>();
  private writing: Promise<void> = Promise.resolve();
  /** The last write failed: the next set() writes even an unchanged record. */
  private unwritten = false;

  constructor(
    readonly store: HandoverStore,
    private readonly wallNow: () => number = Date.now,
  ) {}

  /** Read the document; a missing or unreadable one means no hand-over in progress (returns why). */
  async load(): Promise<string | null> {
    let text: string | null;
    try {
      text = await this.store.read();
    } catch (e) {
      return `${this.store.where} could not be read (${(e as Error).message}); hand-overs in progress are forgotten`;
    }
    if (text === null) return null;
    try {
      const doc = JSON.parse(text) as Record<string, Entry>;
      for (const [id, e] of Object.entries(doc)) {
        if (typeof e?.deadlineWall !== 'number' || typeof e.attempts !== 'number' || typeof e.nextBackoffMs !== 'number') continue;
        const kb = e.knownBad;
        const knownBad =
          kb && typeof kb.specHash === 'string' && typeof kb.podUid === 'string'
            ? {
                knownBad: {
                  specHash: kb.specHash,
                  podUid: kb.podUid,
                  ...(typeof kb.strikes === 'number' ? { strikes: kb.strikes } : {}),
                  ...(typeof kb.untilWall === 'number' ? { untilWall: kb.untilWall } : {}),
                },
              }
            : {};
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
      return `${this.store.where} is not valid JSON (${(e as Error).message}); hand-overs in progress are forgotten`;
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
      ...(e.knownBad ? { knownBad: verdictOut(e.knownBad, this.wallNow()) } : {}),
    };
  }

  /**
   * Record (or clear, with null) the hand-over of one parent; resolves when stored (with every
   * change recorded before it), rejects when that write failed. The agent calls it on every
   * transition and waits for it before a retire (src/agent/agent.ts); an unchanged record writes
   * nothing, unless the last write failed.
   */
  set(id: string, h: RecoveredHandover | null): Promise<void> {
    const before = JSON.stringify(this.entries.get(id) ?? null);
    if (h) {
      this.entries.set(id, {
        // A record that only keeps a verdict has no deadline: a fixed value, so it is not rewritten on every transition.
        deadlineWall: h.inProgress === false ? 0 : this.wallNow() + h.remainingMs,
        attempts: h.attempts,
        nextBackoffMs: h.nextBackoffMs,
        ...(h.inProgress === false ? { inProgress: false } : {}),
        ...(h.knownBad ? { knownBad: verdictIn(h.knownBad, this.wallNow()) } : {}),
      });
    } else this.entries.delete(id);
    if (!this.unwritten && JSON.stringify(this.entries.get(id) ?? null) === before) return this.writing;
    const text = `${JSON.stringify(Object.fromEntries(this.entries))}\n`;
    // In order, each after the one before it, whatever that one's outcome.
    const write = this.writing
      .catch(() => undefined)
      .then(() => this.store.write(text))
      .then(
        () => {
          if (this.writing === write) this.unwritten = false;
        },
        (e: unknown) => {
          if (this.writing === write) this.unwritten = true;
          throw new Error(`hand-over record ${this.store.where} not written: ${(e as Error)?.message ?? String(e)}`);
        },
      );
    this.writing = write;
    // Nobody may be waiting for this write (no retire follows): its failure is reported through `unwritten`.
    write.catch(() => undefined);
    return write;
  }
}

/** The hand-over record of a node's state folder. */
export class HandoverFile extends HandoverRecords {
  readonly path: string;

  constructor(stateDir: string, wallNow: () => number = Date.now) {
    const store = fileHandoverStore(stateDir);
    super(store, wallNow);
    this.path = store.where;
  }
}

type VerdictRecord = NonNullable<RecoveredHandover['knownBad']>;

function verdictIn(v: VerdictRecord, wallNow: number): NonNullable<Entry['knownBad']> {
  const untilWall = v.remainingMs === undefined ? undefined : Math.ceil((wallNow + v.remainingMs) / VERDICT_WALL_RESOLUTION_MS) * VERDICT_WALL_RESOLUTION_MS;
  return {
    specHash: v.specHash,
    podUid: v.podUid,
    ...(v.strikes !== undefined ? { strikes: v.strikes } : {}),
    ...(untilWall !== undefined ? { untilWall } : {}),
  };
}

function verdictOut(e: NonNullable<Entry['knownBad']>, wallNow: number): VerdictRecord {
  return {
    specHash: e.specHash,
    podUid: e.podUid,
    ...(e.strikes !== undefined ? { strikes: e.strikes } : {}),
    ...(e.untilWall !== undefined ? { remainingMs: e.untilWall - wallNow } : {}),
  };
}
