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
//
// Which of the two agents should act: the DaemonSet's pod, whenever it runs (its Ready is what a
// rollout waits for); the copy only while it does not. So a DaemonSet pod's agent standing by says
// so on a second abstract name, its *standby sign* (`StandbySign`), answering whoever connects with
// who it is; a copy reads it (`readStandbySign`) before it takes a free lock and while it holds one
// (run-lock.ts decides what to do with it). Local, like the lock: no api-server is asked, and with
// no DaemonSet pod on the node (a reboot) the read fails at once (ECONNREFUSED), costing the copy
// nothing.
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { dirname, resolve } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';

/** How often the holder re-checks that it still holds the lock (the socket and the holder file). */
export const LOCK_RENEW_MS = 2_000;
/**
 * How often a standby retries the bind: the holder's death is noticed within this, plus the time
 * to bind (microseconds). 200 ms keeps take-over well under a second at a negligible cost.
 */
export const LOCK_RETRY_MS = 200;

/** How long a copy waits for a standby sign's answer: a sign that does not answer (a frozen process) counts as none. */
export const STANDBY_READ_TIMEOUT_MS = 300;

/** Which agent this is: its DaemonSet's pod, or the static copy of it (self.ts). */
export type AgentRole = 'daemonset' | 'copy';

interface HolderFile {
  holder: string;
  /** The holder's pod and role, when it said (agents before these fields did not). */
  pod?: string;
  role?: AgentRole;
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
  /** Written into the holder file, so a successor knows who held the lock before it. */
  pod?: string;
  role?: AgentRole;
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
  /** The holder file found when this instance took the lock: its predecessor, if it did not release (it died holding it). */
  private found: HolderFile | null = null;

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
    return {
      holder: this.holder,
      ...(this.o.pod ? { pod: this.o.pod } : {}),
      ...(this.o.role ? { role: this.o.role } : {}),
      token: this.token,
      pid: process.pid,
      since: new Date().toISOString(),
    };
  }

  /**
   * Who held the lock before this instance took it and did not give it up (a holder that releases
   * blanks the holder file): a process that died holding it, or the last holder before a reboot.
   * Null when the lock was released, or is not held.
   */
  predecessor(): HolderFile | null {
    return this.server ? this.found : null;
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
    this.found = before && before.token !== this.token ? before : null;
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

/** What a DaemonSet pod's agent standing by answers on its standby sign. */
export interface StandbyInfo {
  /** Its pod's name. */
  pod: string;
  /** Its lock holder name (the holder file's `holder` once it holds the lock). */
  holder: string;
  /** What it runs (`agentSpec` in run-lock.ts): a copy hands the lock only to an agent that runs what it runs. */
  spec: string;
}

/** The abstract socket name of the standby sign for a state folder (one per folder, as the lock). */
export function standbySocketName(stateDir: string): string {
  return `${lockSocketName(stateDir)}-standby`;
}

/**
 * A DaemonSet pod's agent says it stands by for the node lock: while raised, whoever connects to
 * the sign's name reads `info` (one JSON line). The kernel takes the name down when the process
 * dies, as the lock's. One sign per name: a second DaemonSet pod standing by (a surge rollout)
 * finds it raised (`raise` returns false) and needs none, one is enough to tell the copy.
 */
export class StandbySign {
  private server: Server | null = null;

  constructor(
    private readonly stateDir: string,
    private readonly info: StandbyInfo,
  ) {}

  raise(): Promise<boolean> {
    if (this.server) return Promise.resolve(true);
    return new Promise((done, fail) => {
      const server = createServer((conn) => {
        conn.on('error', () => {});
        conn.end(`${JSON.stringify(this.info)}\n`);
      });
      const onError = (e: NodeJS.ErrnoException) => {
        server.close();
        if (e.code === 'EADDRINUSE') done(false);
        else fail(e);
      };
      server.once('error', onError);
      server.listen({ path: standbySocketName(this.stateDir) }, () => {
        server.off('error', onError);
        server.on('error', () => {});
        server.unref();
        this.server = server;
        done(true);
      });
    });
  }

  lower(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return Promise.resolve();
    return new Promise((r) => s.close(() => r()));
  }
}

/**
 * Who stands by on the sign of `stateDir`, or null: none raised (ECONNREFUSED, at once), no answer
 * within `timeoutMs`, or an answer that is not a sign's. Never throws.
 */
export function readStandbySign(stateDir: string, timeoutMs = STANDBY_READ_TIMEOUT_MS): Promise<StandbyInfo | null> {
  return new Promise((done) => {
    let body = '';
    let settled = false;
    const finish = (v: StandbyInfo | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      conn.destroy();
      done(v);
    };
    const conn = connect({ path: standbySocketName(stateDir) });
    const timer = setTimeout(() => finish(null), timeoutMs);
    conn.setEncoding('utf8');
    conn.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > 4096) finish(null);
    });
    conn.on('error', () => finish(null));
    conn.on('end', () => {
      try {
        const j = JSON.parse(body) as Partial<StandbyInfo>;
        finish(typeof j.pod === 'string' && typeof j.holder === 'string' && typeof j.spec === 'string' ? { pod: j.pod, holder: j.holder, spec: j.spec } : null);
      } catch {
        finish(null);
      }
    });
  });
}
