// Observer of the kubelet's static-pod folder (--manifest-dir): what it holds for each parent with
// a stored copy is fed to the loop, which hands it to the core (src/core/manifest.ts). A manifest
// removed or changed from outside under an Active parent is written again; a folder removed is
// re-created by that write (the activate actuator creates it).
//
// Promises: every `pollMs`, and at once when the folder reports a change (fs.watch), the parents
// the loop names (`ManifestSubject.manifestChecks`) are read through the disk port and each
// reading is handed back with the ticket it was asked with; the loop drops a reading taken while
// one of its own writes or removals of that manifest started or ended (its report settles it).
// Scans never overlap; a change noticed during one scans again after it. A folder that cannot be
// read is logged once per distinct problem and read again on the next period; nothing throws into
// the loop.
//
// Notice and poll, as for the heartbeat folder (local-beats.ts): inotify is the fast path, the
// period the safety net. Removing the folder ends its inotify watch (the kernel drops it with the
// inode), so a watch that saw its folder go is closed and started again by the first scan that
// finds the folder back.
//
// Written once for both worlds: production's port reads the node's folder (`nodeCheckpointDisk`,
// fs.watch); the simulator's reads its node disk (src/sim/lastseen.ts).
import { watch } from 'node:fs';
import { basename } from 'node:path';
import type { Logger } from 'pino';
import type { ManifestFile } from '../../core/manifest.js';
import { every, type Periodic, type Timers } from '../../core/time.js';

/** Default period: a manifest lost without a notice (inotify missed, folder re-created) is back within about this plus one write. */
export const MANIFEST_POLL_MS = 2_000;

/** One parent whose manifest the loop wants read; `ticket` is handed back with the reading. */
export interface ManifestCheck {
  id: string;
  /** The stored copy's spec hash: what the manifest is compared with. */
  specHash: string;
  ticket: number;
}

/** The loop's side (`Agent`). */
export interface ManifestSubject {
  manifestChecks(): ManifestCheck[];
  manifestSeen(check: ManifestCheck, file: ManifestFile): void;
}

/** The folder's side: the node's manifest folder, or the simulator's node disk. */
export interface ManifestReader {
  /**
   * What the folder holds for each check, by id: `absent` (no file, or no folder), `changed` (a file
   * that is not the stored copy as the agent writes it), `ours` / `oursExclusive`. Rejects when the
   * folder cannot be read (the reading is then skipped, not taken for absent).
   */
  manifests(checks: ReadonlyArray<ManifestCheck>): Promise<Map<string, ManifestFile>>;
  /**
   * Call `changed` on every change in the folder and `gone` once when the folder itself is removed
   * or renamed (the watch ends with it). Throws when notifications cannot start (no folder).
   */
  watch?(changed: () => void, gone: () => void): { close(): void };
}

/** fs.watch on the folder `dir`. */
export function watchManifestFolder(dir: string): NonNullable<ManifestReader['watch']> {
  const name = basename(dir);
  return (changed, gone) => {
    const w = watch(dir, { persistent: false }, (_event, file) => {
      if (file === name || file === null) gone();
      else changed();
    });
    w.on('error', () => gone());
    return w;
  };
}

export interface ManifestWatchOptions {
  subject: ManifestSubject;
  reader: ManifestReader;
  /** Default MANIFEST_POLL_MS. */
  pollMs?: number;
  log: Logger;
  timers: Timers;
}

export interface ManifestWatch {
  /** Scan at once, then every pollMs. Idempotent. */
  start(): void;
  /** No scan starts after this; waits for one in progress. */
  stop(): Promise<void>;
  /** One scan now (never overlapping another). */
  scanOnce(): Promise<void>;
}

export function watchManifests(o: ManifestWatchOptions): ManifestWatch {
  const pollMs = o.pollMs ?? MANIFEST_POLL_MS;
  if (!(pollMs > 0)) throw new Error(`manifest folder: pollMs must be positive, got ${pollMs}`);
  const log = o.log.child({ observer: 'manifests' });
  let stopped = false;
  let started = false;
  let poll: Periodic | null = null;
  let running: Promise<void> | null = null;
  let rescan = false;
  let problem: string | null = null;
  let watcher: { close(): void } | null = null;
  let watchProblem: string | null = null;

  const closeWatch = () => {
    watcher?.close();
    watcher = null;
  };
  const startWatch = () => {
    if (watcher || stopped || !o.reader.watch) return;
    try {
      watcher = o.reader.watch(noticed, () => {
        // The folder went (or the watch failed): scan now, and watch again once it is back.
        closeWatch();
        noticed();
      });
      if (watchProblem) log.info({}, 'manifest folder notifications running again');
      watchProblem = null;
    } catch (e) {
      const reason = (e as Error).message;
      if (watchProblem !== reason) log.info({ reason, pollMs }, 'no change notifications for the manifest folder; polling until it can be watched');
      watchProblem = reason;
    }
  };

  async function scan(): Promise<void> {
    const checks = o.subject.manifestChecks();
    let seen: Map<string, ManifestFile>;
    try {
      seen = await o.reader.manifests(checks);
      if (problem) log.info({}, 'manifest folder readable again');
      problem = null;
    } catch (e) {
      const reason = (e as Error).message;
      if (problem !== reason) log.warn({ reason, code: (e as NodeJS.ErrnoException).code }, 'manifest folder unreadable; its manifests are not checked');
      problem = reason;
      return;
    }
    startWatch();
    for (const c of checks) {
      const file = seen.get(c.id);
      if (file === undefined || stopped) continue;
      try {
        o.subject.manifestSeen(c, file);
      } catch (e) {
        log.error({ parent: c.id, error: (e as Error)?.message ?? String(e) }, 'manifest callback threw; carrying on');
      }
    }
  }

  const scanOnce = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    running ??= scan()
      .catch((e) => log.error({ error: (e as Error).message }, 'manifest folder scan failed unexpectedly'))
      .finally(() => {
        running = null;
        if (rescan && !stopped) {
          rescan = false;
          void scanOnce();
        }
      });
    return running;
  };
  function noticed(): void {
    if (stopped) return;
    if (running) rescan = true;
    else void scanOnce();
  }

  return {
    start() {
      if (stopped || started) return;
      started = true;
      startWatch();
      void scanOnce();
      poll = every(o.timers, pollMs, scanOnce);
    },
    async stop() {
      stopped = true;
      closeWatch();
      await poll?.stop();
      await running;
    },
    scanOnce,
  };
}
