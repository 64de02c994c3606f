// Observer of the local heartbeat folder (/run/lastseen/heartbeats by default).
//
// Promises: every `pollMs` the folder is scanned; `onFile(name, text)` is called for a `*.json`
// file whose bytes differ from what was last handed over for that name (first sight included),
// and `onRemoved(name)` once for a name that was handed over and is gone. Dot files (the writers'
// temporaries) and anything not ending in `.json` are ignored. A file that cannot be read, or is
// larger than a beat can be, is logged with its reason (once per distinct problem) and skipped;
// nothing here throws into the agent. Parsing is not done here: `beatFromFile`
// (src/channels/local.ts) turns the text into a beat.
//
// Notice and poll: a change in the folder (fs.watch, inotify on Linux) reads the file it names at
// once (the whole folder when it names none), so a Ready beat is seen in milliseconds, not on the
// next scan. But the folder is a hostPath shared
// with other pods, and inotify on some mounts (overlay, some CSI and network filesystems) misses
// events or reports none; a missed event must never read as a silent parent. So the scan every
// `pollMs` stays as the safety net that is always right, and an fs.watch that cannot start or
// fails leaves polling alone in charge (logged once).
//
// Assumes: writers replace files atomically (dot-prefixed temporary, rename), as the local channel
// does, so a read sees a whole file; a torn or hand-edited file is still handed over as text and
// refused later by beatFromFile with a reason.
import { close, constants as fsConstants, fstat, open, read, watch } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { DEFAULT_HEARTBEAT_DIR, MAX_BEAT_FILE_BYTES } from '../../channels/local.js';
import { every, type Periodic, type Timers } from '../../core/time.js';

export { DEFAULT_HEARTBEAT_DIR };

/**
 * Default scan period. Beats change every interval (5 s by default, never below the policy's
 * minimum); one second of detection delay is small against a 20 s window and costs one readdir
 * and a stat per parent.
 */
export const LOCAL_POLL_MS = 1_000;

/**
 * The folder as the observer reads it: the node's directory (`fsBeatFolder`), or the simulator's
 * tmpfs. Errors carry an errno `code` where there is one (ENOENT: gone).
 */
export interface BeatFolder {
  /** Names of the entries in the folder. */
  list(): Promise<string[]>;
  /** A file's bytes; rejects for anything that is not a regular file of at most MAX_BEAT_FILE_BYTES, saying why. */
  read(name: string): Promise<Buffer>;
  /**
   * Call `changed` on every change in the folder (inotify), with the name of the entry that changed
   * where the platform gives it (undefined: something changed, read them all); throws when
   * notifications cannot start.
   */
  watch(changed: (name?: string) => void, failed: (e: Error) => void): { close(): void };
}

/** open, fstat, read and close with callbacks: fs/promises' readFile makes a FileHandle (tracked for finalization) per read. */
const fsOpen = promisify(open);
const fsFstat = promisify(fstat);
const fsRead = promisify(read);
const fsClose = promisify(close);

export function fsBeatFolder(dir: string): BeatFolder {
  return {
    list: () => readdir(dir),
    // Every parent's file is read every poll (and on each of its changes): four syscalls and one
    // small buffer, nothing else kept.
    async read(name) {
      const fd = await fsOpen(join(dir, name), fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
      try {
        const st = await fsFstat(fd);
        if (!st.isFile()) throw new Error('not a regular file');
        if (st.size > MAX_BEAT_FILE_BYTES) throw new Error(`${st.size} bytes, more than a beat (${MAX_BEAT_FILE_BYTES})`);
        // Sized by fstat (a small buffer comes from Node's pool), one byte more to see the end; a
        // file that grew since is read on, up to one byte past the limit (then it is too big).
        let buf = Buffer.allocUnsafe(st.size + 1);
        let n = 0;
        for (;;) {
          const { bytesRead } = await fsRead(fd, buf, n, buf.length - n, null);
          n += bytesRead;
          if (bytesRead === 0) return buf.subarray(0, n);
          if (n > MAX_BEAT_FILE_BYTES) throw new Error(`more than a beat (${MAX_BEAT_FILE_BYTES} bytes)`);
          if (n === buf.length) {
            const bigger = Buffer.allocUnsafe(MAX_BEAT_FILE_BYTES + 1);
            buf.copy(bigger, 0, 0, n);
            buf = bigger;
          }
        }
      } finally {
        await fsClose(fd);
      }
    },
    watch(changed, failed) {
      const w = watch(dir, { persistent: false }, (_event, name) => changed(name ?? undefined));
      w.on('error', (e) => {
        w.close();
        failed(e);
      });
      return w;
    },
  };
}

export interface LocalBeatsOptions {
  /** Default DEFAULT_HEARTBEAT_DIR. */
  dir?: string;
  /** Default LOCAL_POLL_MS. */
  pollMs?: number;
  /** Scan at once when the folder reports a change (fs.watch); default true. Polling runs either way. */
  notify?: boolean;
  /** Default: the directory `dir` on this machine. */
  folder?: BeatFolder;
  log: Logger;
  timers: Timers;
  onFile(name: string, text: string): void;
  onRemoved(name: string): void;
}

export interface LocalBeats {
  /** Scan at once, then every pollMs. Idempotent. */
  start(): void;
  /** Stop polling; waits for a scan in progress. No callback runs after this resolves. */
  stop(): Promise<void>;
  /** One scan now (the timer's scans and this one never overlap). */
  pollOnce(): Promise<void>;
}

interface Seen {
  /** The bytes last handed over (a beat is a few hundred bytes: kept and compared, not hashed). */
  bytes: Buffer | null;
  /** The last problem logged for this name, so a bad file is logged once, not every second. */
  problem: string | null;
}

export function isBeatFileName(name: string): boolean {
  return !name.startsWith('.') && name.endsWith('.json') && !name.endsWith('.tmp');
}

export function watchLocalBeats(opts: LocalBeatsOptions): LocalBeats {
  const dir = opts.dir ?? DEFAULT_HEARTBEAT_DIR;
  const pollMs = opts.pollMs ?? LOCAL_POLL_MS;
  if (!(pollMs > 0)) throw new Error(`local beats: pollMs must be positive, got ${pollMs}`);
  const log = opts.log.child({ observer: 'local-beats', dir });
  const seen = new Map<string, Seen>();
  let dirProblem: string | null = null;
  let stopped = false;
  let started = false;
  let poll: Periodic | null = null;
  const folder = opts.folder ?? fsBeatFolder(dir);
  let running: Promise<void> | null = null;

  const call = (what: string, fn: () => void) => {
    if (stopped) return;
    try {
      fn();
    } catch (e) {
      log.error({ callback: what, error: (e as Error)?.message ?? String(e) }, 'local beats callback threw; carrying on');
    }
  };

  const problem = (name: string, s: Seen, reason: string, code?: string) => {
    if (s.problem === reason) return;
    s.problem = reason;
    log.warn({ file: name, reason, code }, 'heartbeat file skipped');
  };

  const remove = (name: string) => {
    const s = seen.get(name);
    seen.delete(name);
    if (s?.bytes) call('onRemoved', () => opts.onRemoved(name));
  };

  /** `notified`: read because the folder named it; gone, it is removed (a full scan finds removals by listing). */
  async function scanFile(name: string, notified = false): Promise<void> {
    const s: Seen = seen.get(name) ?? { bytes: null, problem: null };
    seen.set(name, s);
    try {
      // Always read (a beat is a few hundred bytes) and compare bytes: an mtime+size shortcut misses
      // an in-place rewrite within the filesystem's timestamp granularity.
      const bytes = await folder.read(name);
      if (bytes.length > MAX_BEAT_FILE_BYTES) return problem(name, s, `${bytes.length} bytes, more than a beat (${MAX_BEAT_FILE_BYTES})`);
      s.problem = null;
      if (s.bytes?.equals(bytes)) return;
      s.bytes = Buffer.from(bytes);
      const text = bytes.toString('utf8');
      call('onFile', () => opts.onFile(name, text));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // Renamed away between readdir and read: the next scan sees what replaced it, or its absence.
      // Named by a notification and gone: removed (writers replace by rename, so a beat file that is
      // being rewritten is never absent).
      if (code === 'ENOENT') {
        if (notified) remove(name);
        return;
      }
      problem(name, s, (e as Error).message, code);
    }
  }

  async function scan(): Promise<void> {
    let names: string[];
    try {
      names = (await folder.list()).filter(isBeatFileName);
      if (dirProblem) log.info({}, 'heartbeat folder readable again');
      dirProblem = null;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const reason = (e as Error).message;
      if (dirProblem !== reason) log.warn({ code, reason }, code === 'ENOENT' ? 'heartbeat folder does not exist (yet)' : 'heartbeat folder unreadable');
      dirProblem = reason;
      // A folder that is gone holds no beats; one we may not read tells us nothing, so keep what we know.
      if (code === 'ENOENT') for (const name of [...seen.keys()]) remove(name);
      return;
    }
    const present = new Set(names);
    for (const name of [...seen.keys()]) if (!present.has(name)) remove(name);
    for (const name of names.sort()) {
      if (stopped) return;
      await scanFile(name);
    }
  }

  // One worker reads the folder, so reads never overlap: a full scan when the poll asks for one
  // (or a notification names nothing), else only the files notifications named. Reading just the
  // named file keeps a change O(1): with every file read on each notification, N parents beating
  // every second cost N full scans (N^2 reads, and their buffers) a second.
  let fullWanted = false;
  let fullAsked = 0;
  let fullDone = 0;
  const named = new Set<string>();
  const waiting: Array<{ ticket: number; resolve: () => void }> = [];
  const release = () => {
    for (let i = waiting.length - 1; i >= 0; i--) {
      if (stopped || waiting[i]!.ticket <= fullDone) waiting.splice(i, 1)[0]!.resolve();
    }
  };

  async function work(): Promise<void> {
    while (!stopped && (fullWanted || named.size > 0)) {
      if (fullWanted) {
        const ticket = fullAsked;
        fullWanted = false;
        named.clear(); // the scan reads every file; names notified from now on are read after it
        await scan();
        fullDone = ticket;
        release();
        continue;
      }
      const names = [...named].sort();
      named.clear();
      for (const name of names) {
        if (stopped) return;
        await scanFile(name, true);
      }
    }
  }

  const drain = (): Promise<void> => {
    running ??= work()
      .catch((e) => log.error({ error: (e as Error).message }, 'heartbeat folder scan failed unexpectedly'))
      .finally(() => {
        running = null;
        release();
        if (!stopped && (fullWanted || named.size > 0)) void drain();
      });
    return running;
  };

  /** Resolves once a full scan that started after this call has ended (or the observer stopped). */
  const pollOnce = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    const ticket = ++fullAsked;
    fullWanted = true;
    const done = new Promise<void>((resolve) => waiting.push({ ticket, resolve }));
    void drain();
    return done;
  };

  let watcher: { close(): void } | null = null;
  const noticed = (name?: string) => {
    if (stopped) return;
    if (name === undefined) {
      void pollOnce();
      return;
    }
    // A writer's temporary: its rename names the beat file too.
    if (!isBeatFileName(name)) return;
    named.add(name);
    void drain();
  };
  const startWatching = () => {
    try {
      watcher = folder.watch(noticed, (e) => {
        log.warn({ error: e.message }, 'heartbeat folder notifications failed; polling alone from now on');
        watcher = null;
      });
    } catch (e) {
      // Typically the folder does not exist yet: polling reports that, and finds it when it does.
      log.info({ error: (e as Error).message, pollMs }, 'no change notifications for the heartbeat folder; polling only');
    }
  };

  return {
    start() {
      if (stopped || started) return;
      started = true;
      if (opts.notify ?? true) startWatching();
      void pollOnce();
      poll = every(opts.timers, pollMs, pollOnce);
    },
    async stop() {
      stopped = true;
      watcher?.close();
      watcher = null;
      await poll?.stop();
      await running;
      release();
    },
    pollOnce,
  };
}
