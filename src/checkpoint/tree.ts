// The data tree of one checkpoint (`secrets/`, `configmaps/`, `projected/`): validating the relative
// paths a capture asks for, describing a tree as a sorted list of entries, and hashing it so that
// meta.json can vouch for exactly the files that were written with it.
//
// Promises: `planTree` refuses any path that is absolute, climbs out (`..`), is empty, or does not
// start with one of the three data folders (so data can never overwrite pod.json or meta.json);
// `walkTree` reads a tree from disk, puts wrong modes back to 0600/0700, and describes it the same
// way, so equal trees give equal `treeHash`es.
import { createHash } from 'node:crypto';
import { join, posix } from 'node:path';
import { StoreError } from './errors.js';
import { errnoCode, type FsPort } from './fs.js';

export const DATA_FOLDERS = ['secrets', 'configmaps', 'projected'] as const;
export const FILE_MODE = 0o600;
export const DIR_MODE = 0o700;

export interface Tree {
  /** Folders, relative, without trailing slash, parents before children. */
  dirs: string[];
  /** Files, relative, sorted, with their bytes. */
  files: Array<[string, Buffer]>;
}

function invalid(relPath: string, why: string): StoreError {
  return new StoreError('save', relPath, 'EINVAL', `data path ${why}`);
}

/** The tree a data map describes (a relPath ending in '/' is a folder to create). */
export function planTree(data: Map<string, Buffer>): Tree {
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
  return {
    dirs: [...dirs].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b)),
    files: [...files.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  };
}

/** sha256 over the sorted folder names and (name, sha256 of bytes) of every file. */
export function treeHash(tree: Tree): string {
  const h = createHash('sha256');
  for (const dir of [...tree.dirs].sort()) h.update(`D ${dir}\n`);
  for (const [path, bytes] of tree.files) h.update(`F ${path} ${createHash('sha256').update(bytes).digest('hex')}\n`);
  return h.digest('hex');
}

async function fixMode(fs: FsPort, path: string, want: number): Promise<void> {
  const { mode } = await fs.stat(path);
  if ((mode & 0o7777) !== want) await fs.chmod(path, want);
}

/** Read the data tree under `root` (a checkpoint folder), restoring modes on the way. */
export async function walkTree(fs: FsPort, root: string): Promise<Tree> {
  const tree: Tree = { dirs: [], files: [] };
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
      await fixMode(fs, abs, DIR_MODE);
    } catch (err) {
      throw StoreError.from(err, 'chmod', abs);
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const childRel = `${rel}/${entry.name}`;
      if (entry.isDirectory()) await visit(childRel);
      else if (entry.isFile()) {
        const childAbs = join(root, childRel);
        try {
          await fixMode(fs, childAbs, FILE_MODE);
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
