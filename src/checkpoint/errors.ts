// Errors of the checkpoint store and the manifest directory. A StoreError names the operation, the
// path and what a person can do about it; `code` is the errno (ENOSPC, EROFS, EACCES, ...) so the
// agent can tell a full disk from a bug without parsing messages.
import { errnoCode } from './fs.js';

/** What to do, by errno. Anything else is reported with its own message. */
const HINTS: Record<string, string> = {
  ENOSPC: 'the file system is full: free space on it (or move --state-dir / --manifest-dir)',
  EDQUOT: 'the disk quota is exhausted: raise it or free space',
  EROFS: 'the file system is mounted read-only: remount it read-write or point the agent elsewhere',
  EACCES: 'permission denied: the agent must run as root (or own the folder)',
  EPERM: 'operation not permitted: the agent must run as root (or own the folder)',
  EIO: 'the disk reported an I/O error: check the node’s disk',
};

export class StoreError extends Error {
  constructor(
    /** What was being done: 'write', 'rename', 'fsync', 'mkdir', 'read', 'remove', ... */
    readonly op: string,
    readonly path: string,
    /** errno code, or 'EINVAL' for bad input, 'ECORRUPT' for unreadable content. */
    readonly code: string,
    readonly hint: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot ${op} ${path}: ${code}: ${hint}`, options);
    this.name = 'StoreError';
  }

  /** Wrap an fs error (or pass a StoreError through untouched). */
  static from(err: unknown, op: string, path: string): StoreError {
    if (err instanceof StoreError) return err;
    const code = errnoCode(err) ?? 'EUNKNOWN';
    const hint = HINTS[code] ?? (err instanceof Error ? err.message : String(err));
    return new StoreError(op, path, code, hint, { cause: err });
  }
}
