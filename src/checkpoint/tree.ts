// The data tree of one checkpoint (`secrets/`, `configmaps/`, `projected/`): validating the relative
// paths a capture asks for, describing a tree as a sorted list of entries, and hashing it so that
// meta.json can vouch for exactly the files that were written with it.
//
// Promises: `planTree` refuses any path that is absolute, climbs out (`..`), is empty, or does not
// start with one of the three data folders (so data can never overwrite pod.json or meta.json);
// `walkTree` reads a tree from disk, puts wrong modes and owners back (each entry's `Access`, else
// 0600/0700 and the writer's own ids), and describes it the same way, so equal trees give equal
// `treeHash`es. The access of every entry is part of the hash: a copy whose modes or owners were
// planned differently is a different copy.
//
// Access: the copies get the owner, group and modes the parent's own volumes give its pod (see
// `volumeAccess` in sanitize.ts), which may be readable by others *inside the pod*. The host never
// sees them: the checkpoint folder and the three data folders stay root's, 0700, and the kubelet
// bind-mounts a volume's folder as root, so no path above a volume's folder needs to be traversable
// by anyone else.
import { createHash } from 'node:crypto';
import { join, posix } from 'node:path';
import { StoreError } from './errors.js';
import { errnoCode, type FsPort } from './fs.js';

export const DATA_FOLDERS = ['secrets', 'configmaps', 'projected'] as const;
export const FILE_MODE = 0o600;
export const DIR_MODE = 0o700;

/** Mode and owner of one entry; an id left out is the writer's own (root, for the agent). */
export interface Access {
  mode: number;
  uid?: number;
  gid?: number;
}

export interface Tree {
  /** Folders, relative, without trailing slash, parents before children. */
  dirs: string[];
  /** Files, relative, sorted, with their bytes. */
  files: Array<[string, Buffer]>;
  /** Entries (files or folders, relative, no trailing slash) whose access is not the default. */
  access: Record<string, Access>;
}

/** The access an entry of `tree` gets. */
export function accessOf(tree: Pick<Tree, 'access'>, relPath: string, isDir: boolean): Access {
  return tree.access[relPath] ?? { mode: isDir ? DIR_MODE : FILE_MODE };
}

/** Why this `access` record is not valid, or null. */
export function accessProblem(access: unknown): string | null {
  if (typeof access !== 'object' || access === null || Array.isArray(access)) return 'access must be an object';
  for (const [path, a] of Object.entries(access)) {
    if (typeof a !== 'object' || a === null) return `access of ${path} must be an object`;
    const { mode, uid, gid } = a as Record<string, unknown>;
    if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o7777) return `access of ${path}: mode must be permission bits`;
    for (const [field, id] of [['uid', uid] as const, ['gid', gid] as const]) {
      if (id !== undefined && (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 0xffffffff))
        return `access of ${path}: ${field} must be a user or group id`;
    }
  }
  return null;
}

function invalid(relPath: string, why: string): StoreError {
  return new StoreError('save', relPath, 'EINVAL', `data path ${why}`);
}

/**
 * The tree a data map describes (a relPath ending in '/' is a folder to create), with the access
 * planned for its entries (keys without a trailing slash; every key must name an entry).
 */
export function planTree(data: Map<string, Buffer>, access: Record<string, Access> = {}): Tree {
  const dirs = new Set<string>();
  const files = new Map<string, Buffer>();
  for (const [relPath, bytes] of data) {
    const isDir = relPath.endsWith('/');
    const path = isDir ? relPath.slice(0, -1) : relPath;
    const segments = path.split('/');
    if (posix.isAbsolute(relPath) || segments.some((s) => s === '' || s === '.' || s === '..')) {
      throw invalid(relPath, 'must be relative, without empty, "." or ".." segments');
    }
    if (!(DATA_FOLDERS as readonly string[]).includes(segments[0]!)) throw invalid(relPath, `must start with ${DATA_FOLDERS.join('/, ')}/`);
    if (!isDir && segments.length < 2) throw invalid(relPath, 'names a data folder, not a file in it');
    for (let i = 1; i < segments.length; i++) dirs.add(segments.slice(0, i).join('/'));
    if (isDir) dirs.add(path);
    else files.set(path, bytes);
  }
  for (const path of files.keys()) {
    if (dirs.has(path)) throw invalid(path, 'is both a file and a folder');
  }
  const problem = accessProblem(access);
  if (problem) throw invalid('access', problem);
  for (const path of Object.keys(access)) {
    if (!files.has(path) && !dirs.has(path)) throw invalid(path, 'has an access but is neither a file nor a folder of the copy');
    if ((DATA_FOLDERS as readonly string[]).includes(path)) throw invalid(path, 'is a data folder, which stays 0700');
  }
  return {
    dirs: [...dirs].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b)),
    files: [...files.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    access: Object.fromEntries(Object.entries(access).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
  };
}

/**
 * sha256 over the sorted folder names, (name, sha256 of bytes) of every file, and the planned
 * access of every entry that has one (none: the same hash as before accesses existed).
 */
export function treeHash(tree: Tree): string {
  const h = createHash('sha256');
  for (const dir of [...tree.dirs].sort()) h.update(`D ${dir}\n`);
  for (const [path, bytes] of tree.files) h.update(`F ${path} ${createHash('sha256').update(bytes).digest('hex')}\n`);
  for (const path of Object.keys(tree.access).sort()) {
    const a = tree.access[path]!;
    h.update(`A ${path} ${a.mode.toString(8)} ${a.uid ?? '-'} ${a.gid ?? '-'}\n`);
  }
  return h.digest('hex');
}

/** Put `path`'s mode and owner back to `want` (chown first: it clears set-id bits). */
export async function fixAccess(fs: FsPort, path: string, want: Access): Promise<void> {
  const { mode, uid, gid } = await fs.stat(path);
  const wrongOwner = (want.uid !== undefined && want.uid !== uid) || (want.gid !== undefined && want.gid !== gid);
  if (wrongOwner) await fs.chown(path, want.uid ?? -1, want.gid ?? -1);
  if (wrongOwner || (mode & 0o7777) !== want.mode) await fs.chmod(path, want.mode);
}

/** Read the data tree under `root` (a checkpoint folder), restoring the planned `access` on the way. */
export async function walkTree(fs: FsPort, root: string, access: Record<string, Access> = {}): Promise<Tree> {
  const tree: Tree = { dirs: [], files: [], access };
  const visit = async (rel: string): Promise<void> => {
    const abs = join(root, rel);
    let entries: Awaited<ReturnType<FsPort['readdir']>>;
    try {
      entries = await fs.readdir(abs, { withFileTypes: true });
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' && !rel.includes('/')) return;
      throw StoreError.from(err, 'read', abs);
    }
    tree.dirs.push(rel);
    try {
      await fixAccess(fs, abs, accessOf(tree, rel, true));
    } catch (err) {
      throw StoreError.from(err, 'chmod', abs);
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const childRel = `${rel}/${entry.name}`;
      if (entry.isDirectory()) await visit(childRel);
      else if (entry.isFile()) {
        const childAbs = join(root, childRel);
        try {
          await fixAccess(fs, childAbs, accessOf(tree, childRel, false));
          tree.files.push([childRel, await fs.readFile(childAbs)]);
        } catch (err) {
          throw StoreError.from(err, 'read', childAbs);
        }
      } else {
        throw new StoreError('read', join(root, childRel), 'ECORRUPT', 'not a regular file or folder; remove it');
      }
    }
  };
  for (const folder of DATA_FOLDERS) await visit(folder);
  tree.files.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return tree;
}
