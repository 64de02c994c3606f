// One acting agent per node. After a reboot the agent's own static-pod checkpoint and, once an
// api-server exists, its DaemonSet pod can both run on a node; they live in different PID
// namespaces, so the lock is a lease kept in a file on the shared state folder: the holder
// rewrites it every `renewMs`; another instance takes it over only when it has not been renewed for
// `staleMs` (on the node's wall clock, which both processes share). Writes are atomic (temp +
// rename), and a holder that finds someone else's name in the file steps down.
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** How often the holder renews: well under `LOCK_STALE_MS` so one slow write never loses the lock. */
export const LOCK_RENEW_MS = 2_000;
/** How long an unrenewed lock stays taken: five renewals, so a paused holder is not overrun at once. */
export const LOCK_STALE_MS = 10_000;

interface LockFile {
  holder: string;
  pid: number;
  renewedAt: number;
}

export interface NodeLockOptions {
  path: string;
  /** Identity of this instance (pod name + a random suffix by default). */
  holder?: string;
  wallNow?: () => number;
  renewMs?: number;
  staleMs?: number;
}

export class NodeLock {
  readonly holder: string;
  private readonly wallNow: () => number;
  private readonly staleMs: number;

  constructor(private readonly o: NodeLockOptions) {
    this.holder = o.holder ?? `pid${process.pid}-${randomUUID().slice(0, 8)}`;
    this.wallNow = o.wallNow ?? Date.now;
    this.staleMs = o.staleMs ?? LOCK_STALE_MS;
  }

  private async read(): Promise<LockFile | null> {
    try {
      const j = JSON.parse(await readFile(this.o.path, 'utf8')) as Partial<LockFile>;
      if (typeof j.holder !== 'string' || typeof j.renewedAt !== 'number') return null;
      return j as LockFile;
    } catch {
      return null; // missing or torn: nobody holds it
    }
  }

  private async write(): Promise<void> {
    await mkdir(dirname(this.o.path), { recursive: true, mode: 0o700 });
    const tmp = join(dirname(this.o.path), `.${this.holder}.lock.tmp`);
    const body: LockFile = { holder: this.holder, pid: process.pid, renewedAt: this.wallNow() };
    await writeFile(tmp, JSON.stringify(body), { mode: 0o600 });
    await rename(tmp, this.o.path);
  }

  /** Take the lock if free or stale, or renew it if ours. Returns whether we hold it now. */
  async tryAcquire(): Promise<boolean> {
    const cur = await this.read();
    const now = this.wallNow();
    if (cur && cur.holder !== this.holder && now - cur.renewedAt < this.staleMs) return false;
    await this.write();
    // Two takers racing on a stale lock: the last rename wins; read back to know who.
    const after = await this.read();
    return after?.holder === this.holder;
  }

  async holds(): Promise<boolean> {
    return (await this.read())?.holder === this.holder;
  }

  /** Give the lock up at shutdown so a successor need not wait out `staleMs`. */
  async release(): Promise<void> {
    const cur = await this.read();
    if (cur?.holder !== this.holder) return;
    await this.writeReleased();
  }

  private async writeReleased(): Promise<void> {
    const tmp = join(dirname(this.o.path), `.${this.holder}.lock.tmp`);
    await writeFile(tmp, JSON.stringify({ holder: '', pid: 0, renewedAt: 0 }), { mode: 0o600 });
    await rename(tmp, this.o.path);
  }
}
