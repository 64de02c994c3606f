// One acting agent per node. The agent runs twice on a node by design (its DaemonSet pod and its
// own static-pod copy, see self.ts); this lock decides which one acts.
//
// The lock is a listening Unix socket in Linux's abstract namespace, named after the state folder.
// Only one process can bind a name (the next gets EADDRINUSE), the bind is atomic, and the kernel
// frees the name the instant its holder dies, SIGKILL included: no lease, no staleness, no clock.
// A standby simply retries the bind every `LOCK_RETRY_MS`.
//
// Assumes: both copies share one network namespace (the agent runs with hostNetwork; abstract
// names are per network namespace) and see the state folder under the same path (both mount the
// hostPath at /var/lib/lastseen). If someone breaks the first assumption, both binds succeed; the
// holder file below catches it: each holder checks every `LOCK_RENEW_MS` that the file still names
// it (by a per-instance token), and one that finds another instance there steps down loudly
// rather than act beside it.
//
// Unlike the wall-clock lease this replaces, a holder that is alive but stuck keeps the lock; its
// liveness probe (served by the same event loop) is what gets such a process restarted.
//
// The holder file (`path`, e.g. /var/lib/lastseen/agent.lock) is for people and for that check:
// who holds the lock, with which pid, since when. Its time is never compared with anything.
// A state folder that is read-only or full must not keep the agent from covering what it already
// has: when the holder file cannot be written, the socket still decides, the problem is reported
// (`fileProblem()`, with its errno), and a holder file left by an earlier holder, which this one
// could not replace, is not taken for another live holder.
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { dirname, resolve } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';

/** How often the holder re-checks that it still holds the lock (the socket and the holder file). */
export const LOCK_RENEW_MS = 2_000;
/**
 * How often a standby retries the bind: the holder's death is noticed within this, plus the time
 * to bind (microseconds). 200 ms keeps take-over well under a second at a negligible cost.
 */
export const LOCK_RETRY_MS = 200;

interface HolderFile {
  holder: string;
  /** Random per instance: two copies may share a pod name and, in their own PID namespaces, a pid. */
  token: string;
  pid: number;
  /** When this holder took the lock, on its wall clock: for people only, never compared. */
  since: string;
}

export interface NodeLockOptions {
  /** The holder file; its folder (the state folder) names the lock. */
  path: string;
  /** Identity of this instance (pod name + pid by default). */
  holder?: string;
}

/** The abstract socket name for a state folder: one lock per folder, whichever path spelling. */
export function lockSocketName(stateDir: string): string {
  const digest = createHash('sha256').update(resolve(stateDir)).digest('hex').slice(0, 16);
  return `\0lastseen-agent-${digest}`;
}

export class NodeLock {
  readonly holder: string;
  readonly socketName: string;
  private readonly token = randomUUID();
  private server: Server | null = null;
  /** Set by `release()`: a lock given up at shutdown is never taken again by this instance. */
  private released = false;
  /** Why the holder file could not be written (null: it was). */
  private problem: NodeJS.ErrnoException | null = null;
  /** The token the holder file held when this holder could not replace it (a stale one). */
  private staleToken: string | null = null;

  constructor(private readonly o: NodeLockOptions) {
    this.holder = o.holder ?? `pid${process.pid}-${randomUUID().slice(0, 8)}`;
    this.socketName = lockSocketName(dirname(o.path));
  }

  /** Who the holder file names (null when missing or torn): for logs and the double-holder check. */
  async readHolder(): Promise<HolderFile | null> {
    try {
      const j = JSON.parse(await readFile(this.o.path, 'utf8')) as Partial<HolderFile>;
      return typeof j.holder === 'string' && j.holder !== '' ? (j as HolderFile) : null;
    } catch {
      return null;
    }
  }

  private async writeHolder(body: HolderFile | { holder: ''; token: ''; pid: 0; since: '' }): Promise<void> {
    await mkdir(dirname(this.o.path), { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.o.path, Buffer.from(JSON.stringify(body), 'utf8'), { mode: 0o600 });
  }

  private mine(): HolderFile {
    return { holder: this.holder, token: this.token, pid: process.pid, since: new Date().toISOString() };
  }

  /** Bind the name: true if it is ours now, false if another live process has it. */
  private bind(): Promise<boolean> {
    return new Promise((done, fail) => {
      const server = createServer((conn) => conn.destroy()); // nobody needs to talk to the lock
      const onError = (e: NodeJS.ErrnoException) => {
        server.close();
        if (e.code === 'EADDRINUSE') done(false);
        else fail(e);
      };
      server.once('error', onError);
      server.listen({ path: this.socketName }, () => {
        server.off('error', onError);
        // After the bind, an error or close we did not ask for means the lock is gone.
        server.on('error', () => {});
        server.once('close', () => {
          if (this.server === server) this.server = null;
        });
        server.unref(); // the lock alone must not keep the process alive
        this.server = server;
        done(true);
      });
    });
  }

  /**
   * Take the lock if free, or confirm it if ours. Returns whether we hold it now. A holder gets
   * false (and lets the lock go) when its socket is gone or the holder file names someone else:
   * another process believes it holds the lock too, so this one steps down.
   */
  async tryAcquire(): Promise<boolean> {
    if (this.released) return false;
    if (this.server) {
      if (await this.holds()) return true;
      await this.closeServer();
      return false;
    }
    if (!(await this.bind())) return false;
    if (this.released) {
      await this.closeServer(); // released while binding
      return false;
    }
    const before = await this.readHolder();
    await this.tryWriteHolder(before);
    return true;
  }

  /** Why the holder file cannot be written (errno code and message), null while it can. */
  fileProblem(): { code: string; message: string } | null {
    return this.problem ? { code: this.problem.code ?? 'UNKNOWN', message: this.problem.message } : null;
  }

  /** Write our holder file; a disk that refuses is recorded, not thrown (the socket is the lock). */
  private async tryWriteHolder(before: HolderFile | null): Promise<void> {
    try {
      await this.writeHolder(this.mine());
      this.problem = null;
      this.staleToken = null;
    } catch (e) {
      this.problem = e as NodeJS.ErrnoException;
      this.staleToken = before?.token ?? null;
    }
  }

  /** Whether we hold the lock: our socket is bound and the holder file does not name another. */
  async holds(): Promise<boolean> {
    if (!this.server?.listening) return false;
    const named = await this.readHolder();
    if (!this.server) return false; // released or lost meanwhile
    if (named === null || (this.problem !== null && named.token === this.staleToken)) {
      // Deleted by hand, torn, or left by an earlier holder when we could not write: put our name
      // back when the disk lets us (the socket, not the file, is the lock).
      await this.tryWriteHolder(named);
      return true;
    }
    return named.token === this.token;
  }

  /** Give the lock up at shutdown; a successor binds within one `LOCK_RETRY_MS`. */
  async release(): Promise<void> {
    this.released = true;
    if (!this.server) return;
    if ((await this.readHolder())?.token === this.token) await this.writeHolder({ holder: '', token: '', pid: 0, since: '' }).catch(() => {});
    await this.closeServer();
  }

  private closeServer(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return Promise.resolve();
    return new Promise((r) => s.close(() => r()));
  }
}
