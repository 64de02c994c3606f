// writeFileAtomic: replace a file so that every reader, and the disk after a power cut, sees either
// the old bytes or the new bytes, never a mix.
//
// Promises: the new bytes go to a dot-prefixed temporary file in the same folder (the kubelet
// ignores dot files, and a rename within one folder is atomic), which is written, chmod-ed (the
// umask must not widen or narrow the mode), fsynced and closed before it is renamed over the
// target; then the folder is fsynced so the rename itself is durable. When the target already holds
// the same bytes nothing is written ('unchanged'), though a wrong mode is corrected. On failure the
// temporary file is removed (best effort) and a StoreError naming the path is thrown.
//
// Assumes: one writer per target at a time (the agent holds a node-wide lock). A crash can leave a
// temporary file behind; `isTempName` recognises them for cleanup on startup.
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { StoreError } from './errors.js';
import { errnoCode, type FsPort, nodeFs, syncDir } from './fs.js';

export type WriteResult = 'written' | 'unchanged';

/** A file's owner and group; an id left out stays the writer's own. */
export interface Owner {
  uid?: number;
  gid?: number;
}

export interface WriteOptions {
  /** Permission bits of the file, e.g. 0o600. */
  mode: number;
  /** Owner to give the file (each id only when set; default: the writer's own). */
  owner?: Owner;
  fs?: FsPort;
}

const TEMP_PATTERN = /^\..+\.[0-9a-f]{8}\.tmp$/;

/** Name of a temporary file for `name`: `.<name>.<8 hex>.tmp`. */
export function tempName(name: string): string {
  return `.${name}.${randomBytes(4).toString('hex')}.tmp`;
}

/** Whether a folder entry is one of our temporary files (left behind by a crash). */
export function isTempName(name: string): boolean {
  return TEMP_PATTERN.test(name);
}

/** Current bytes and mode of `path`, or null when it does not exist. */
async function readExisting(fs: FsPort, path: string): Promise<{ bytes: Buffer; mode: number; uid: number; gid: number } | null> {
  try {
    const bytes = await fs.readFile(path);
    const { mode, uid, gid } = await fs.stat(path);
    return { bytes, mode: mode & 0o7777, uid, gid };
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw StoreError.from(err, 'read', path);
  }
}

/** Create `path` (which must not exist) with exactly these bytes and mode, durably. */
export async function writeNewFile(fs: FsPort, path: string, bytes: Uint8Array, mode: number, owner: Owner = {}): Promise<void> {
  let handle: Awaited<ReturnType<FsPort['open']>>;
  try {
    handle = await fs.open(path, 'wx', mode);
  } catch (err) {
    throw StoreError.from(err, 'create', path);
  }
  try {
    await handle.writeFile(bytes);
    // chmod while the file is still the writer's own (no CAP_FOWNER needed), then give it away.
    // Copies' modes hold no set-id bits, which a chown of a file would clear.
    await handle.chmod(mode);
    if (owner.uid !== undefined || owner.gid !== undefined) await handle.chown(owner.uid ?? -1, owner.gid ?? -1);
    await handle.sync();
  } catch (err) {
    await handle.close().catch(() => {});
    throw StoreError.from(err, 'write', path);
  }
  try {
    await handle.close();
  } catch (err) {
    throw StoreError.from(err, 'close', path);
  }
}

export async function writeFileAtomic(path: string, bytes: Uint8Array, options: WriteOptions): Promise<WriteResult> {
  const fs = options.fs ?? nodeFs;
  const existing = await readExisting(fs, path);
  if (existing && Buffer.from(bytes).equals(existing.bytes)) {
    const owner = options.owner ?? {};
    const wrongOwner = (owner.uid !== undefined && owner.uid !== existing.uid) || (owner.gid !== undefined && owner.gid !== existing.gid);
    if (existing.mode !== options.mode || wrongOwner) {
      try {
        if (wrongOwner) await fs.chown(path, owner.uid ?? -1, owner.gid ?? -1);
        await fs.chmod(path, options.mode);
      } catch (err) {
        throw StoreError.from(err, 'chmod', path);
      }
    }
    return 'unchanged';
  }
  const dir = dirname(path);
  const temp = join(dir, tempName(basename(path)));
  try {
    try {
      await writeNewFile(fs, temp, bytes, options.mode, options.owner);
    } catch (err) {
      // Name the file the caller asked for; the temporary name means nothing to a person.
      const e = StoreError.from(err, 'write', temp);
      throw new StoreError(`${e.op} the temporary file of`, path, e.code, e.hint, { cause: err });
    }
    try {
      await fs.rename(temp, path);
    } catch (err) {
      throw StoreError.from(err, 'rename', `${temp} -> ${path}`);
    }
  } catch (err) {
    await fs.unlink(temp).catch(() => {});
    throw err;
  }
  try {
    await syncDir(fs, dir);
  } catch (err) {
    // The new file is in place but the rename may not survive a power cut; a retry finds the same
    // bytes and returns 'unchanged', so the caller should treat this like any failed write.
    throw StoreError.from(err, 'fsync', dir);
  }
  return 'written';
}
