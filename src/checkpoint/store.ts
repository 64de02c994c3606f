// Store: the checkpoints on this node's disk, under `<stateDir>/checkpoints/<ns>_<key>/`:
// `pod.json` (the sanitized manifest), `secrets/…`, `configmaps/…`, `projected/…` (the data it
// mounts) and `meta.json` (source pod, spec hash, capture times, hash of the data tree).
//
// Promises:
// - pod.json, meta.json, the checkpoint folder and the three data folders are root's, 0600 and 0700.
//   A volume's folder and the files in it get the access the capture planned (`Capture.access`,
//   recorded in meta.json: the owner, group and modes the parent's own volume gives its pod, see
//   sanitize.ts), else 0600/0700. Written that way (chown and chmod after create, so the umask
//   cannot interfere) and put back that way whenever a checkpoint is read.
// - meta.json is the commit point: a folder without a valid meta.json, or whose pod.json or data
//   do not match the hashes in it, is not a checkpoint; `load` throws and `list` reports why.
// - `save` never leaves a mix of old and new. When pod.json or data change, the whole copy is
//   staged in `.<ns>_<key>.new-<hex>` (data, pod.json, meta.json last; every file and folder
//   fsynced), the live folder is renamed aside to `.old-<hex>`, the staged one renamed in, the
//   parent folder fsynced, the old one deleted. Staging a whole folder (instead of rewriting files in
//   place in a careful order) is the only way a cert and its key change together: an in-place
//   order can protect pod.json but not a pair of data files. When only meta.json changes (a new
//   capture time for the same pod and data) it is replaced atomically in place. When nothing
//   changes nothing is written.
// - A crash can leave staging or old folders behind. `settle` (run by save, load and list; remove
//   deletes every leftover of its id) repairs them: the live folder wins; with no live folder, a complete staged copy is promoted
//   (the crash fell between the two renames), else a complete old one is put back.
//   `.del-<hex>` folders (a remove in progress) are only ever deleted.
//
// - `replaceToken` is the one write that is not a swap: a running checkpoint's containers bind-mount
//   the data folders themselves (hostPath), so a renamed-in folder is never seen by them, while a
//   file renamed over another inside the same folder is. It writes meta.json with the coming
//   `pendingDataHash`, then the token file in place (temporary file in the same folder, rename),
//   then meta.json with the new dataHash: a crash at any step leaves a tree that matches
//   `dataHash` or `pendingDataHash`, and `read` accepts either. A crash can leave a temporary file
//   in a data folder; `settle` removes those too (a Secret key named like one, `.<name>.<8 hex>.tmp`,
//   would be removed with them and the copy re-captured).
//
// Assumes: one writer (the agent's node-wide lock); a rename within one folder is atomic; the kubelet
// reads the data folders only through an active manifest's hostPath volumes. A running checkpoint
// keeps the folders it mounted: a whole-copy refresh takes effect when its containers restart; only
// `replaceToken` reaches a running one.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_CHECKPOINT_OF, LABEL_PARENT } from '../core/names.js';
import { isTempName, type WriteResult, writeFileAtomic, writeNewFile } from './atomic.js';
import type { Capture } from './capture.js';
import { StoreError } from './errors.js';
import { errnoCode, type FsPort, nodeFs, syncDir } from './fs.js';
import { checkpointFolder, parseCheckpointFolder, parseId } from './ids.js';
import { canonicalJson, hashManifest, legacyManifestHash } from './sanitize.js';
import { type TokenCopy, tokensProblem } from './tokens.js';
import { type Access, accessOf, accessProblem, DATA_FOLDERS, DIR_MODE, FILE_MODE, planTree, type Tree, treeHash, walkTree } from './tree.js';

export const DEFAULT_STATE_DIR = '/var/lib/lastseen';

export interface Meta {
  sourcePodUid: string;
  sourcePodName: string;
  specHash: string;
  capturedAt: string;
  lastReadyAt: string | null;
  /** treeHash of the data folders, so a torn or tampered copy is recognised. */
  dataHash: string;
  /** The tree hash a `replaceToken` in progress leads to; either hash is a valid tree. */
  pendingDataHash?: string;
  tokens?: TokenCopy[];
  /** Planned access of data entries that are not 0600/0700 root (see tree.ts). */
  access?: Record<string, Access>;
}

export interface StoreOptions {
  /** --state-dir; default /var/lib/lastseen. */
  stateDir?: string;
  fs?: FsPort;
}

export interface ListResult {
  checkpoints: Array<{ id: string; capture: Capture }>;
  /** Folders that are not a usable checkpoint, with the reason (nothing is thrown). */
  problems: Array<{ id: string; reason: string }>;
}

type Read = { ok: true; capture: Capture; podBytes: Buffer; metaBytes: Buffer; dataHash: string; tree: Tree } | { ok: false; reason: string };

const LEFTOVER = /^\.(.+)\.(new|old|del)-[0-9a-f]{8}$/;

function encode(value: unknown): Buffer {
  return Buffer.from(`${canonicalJson(value)}\n`);
}

function isIso(value: unknown): value is string {
  return typeof value === 'string' && !Number.isNaN(Date.parse(value));
}

/** Why this meta.json content is not valid, or null. */
function metaProblem(meta: unknown): string | null {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return 'meta.json is not an object';
  const m = meta as Record<string, unknown>;
  for (const field of ['sourcePodUid', 'sourcePodName'] as const) {
    if (typeof m[field] !== 'string') return `meta.json: ${field} must be a string`;
  }
  for (const field of ['specHash', 'dataHash'] as const) {
    if (typeof m[field] !== 'string' || !/^[0-9a-f]{64}$/.test(m[field])) return `meta.json: ${field} must be a sha256 hex digest`;
  }
  if (!isIso(m.capturedAt)) return 'meta.json: capturedAt must be an ISO 8601 time';
  if (m.lastReadyAt !== null && !isIso(m.lastReadyAt)) return 'meta.json: lastReadyAt must be an ISO 8601 time or null';
  if (m.pendingDataHash !== undefined && (typeof m.pendingDataHash !== 'string' || !/^[0-9a-f]{64}$/.test(m.pendingDataHash))) {
    return 'meta.json: pendingDataHash must be a sha256 hex digest';
  }
  if (m.access !== undefined) {
    const bad = accessProblem(m.access);
    if (bad) return `meta.json: ${bad}`;
  }
  if (m.tokens !== undefined) return tokensProblem(m.tokens);
  return null;
}

function metaOf(capture: Capture, dataHash: string): Meta {
  return {
    sourcePodUid: capture.sourcePodUid,
    sourcePodName: capture.sourcePodName,
    specHash: capture.specHash,
    capturedAt: capture.capturedAt,
    lastReadyAt: capture.lastReadyAt,
    dataHash,
    ...(capture.tokens ? { tokens: capture.tokens } : {}),
    ...(capture.access && Object.keys(capture.access).length > 0 ? { access: capture.access } : {}),
  };
}

/** Why this manifest cannot be the checkpoint of `id`, or null. */
export function manifestProblem(pod: unknown, namespace: string, key: string): string | null {
  if (typeof pod !== 'object' || pod === null || Array.isArray(pod)) return 'not an object';
  const p = pod as V1Pod;
  if (p.kind !== 'Pod') return 'kind must be Pod';
  if (typeof p.metadata?.name !== 'string') return 'metadata.name must be a string';
  if (p.metadata.namespace !== namespace) return `metadata.namespace must be ${namespace}`;
  if (p.metadata.labels?.[LABEL_PARENT] !== key) return `label ${LABEL_PARENT} must be ${key}`;
  if (typeof p.metadata.annotations?.[ANNOTATION_CHECKPOINT_OF] !== 'string') return `annotation ${ANNOTATION_CHECKPOINT_OF} is missing`;
  if (!Array.isArray(p.spec?.containers)) return 'spec.containers must be a list';
  return null;
}

export class Store {
  readonly stateDir: string;
  private readonly fs: FsPort;
  private readonly root: string;
  private readonly queues = new Map<string, Promise<void>>();

  constructor(options: StoreOptions = {}) {
    this.stateDir = options.stateDir ?? DEFAULT_STATE_DIR;
    this.fs = options.fs ?? nodeFs;
    this.root = join(this.stateDir, 'checkpoints');
  }

  /** Host path of a checkpoint's folder: what sanitize needs as `checkpointDir`. */
  checkpointDir(id: string): string {
    return join(this.root, checkpointFolder(id));
  }

  /**
   * Run `f` after every earlier call for `id` has finished. One process writes, but not from one
   * place: the agent's actions and the token refresher's timer both reach the same checkpoint, and
   * a token written into a folder that a save swapped meanwhile would not match its meta.json.
   */
  private exclusive<T>(id: string, f: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(id) ?? Promise.resolve();
    const next = previous.then(f, f);
    const tail = next.then(
      () => {},
      () => {},
    );
    this.queues.set(id, tail);
    void tail.then(() => {
      if (this.queues.get(id) === tail) this.queues.delete(id);
    });
    return next;
  }

  save(id: string, capture: Capture, data: Map<string, Buffer>): Promise<WriteResult> {
    return this.exclusive(id, () => this.saveNow(id, capture, data));
  }

  private async saveNow(id: string, capture: Capture, data: Map<string, Buffer>): Promise<WriteResult> {
    const { namespace, key } = parseId(id);
    const problem = manifestProblem(capture.manifest, namespace, key);
    if (problem) throw new StoreError('save', this.checkpointDir(id), 'EINVAL', `the manifest is not a checkpoint of ${id}: ${problem}`);
    if (hashManifest(capture.manifest) !== capture.specHash) {
      throw new StoreError('save', this.checkpointDir(id), 'EINVAL', 'specHash does not match the manifest: capture with sanitize()');
    }
    const tree = planTree(data, capture.access);
    const meta = metaOf(capture, treeHash(tree));
    const metaProblemText = metaProblem(meta);
    if (metaProblemText) throw new StoreError('save', this.checkpointDir(id), 'EINVAL', metaProblemText);
    const podBytes = encode(capture.manifest);
    const metaBytes = encode(meta);

    await this.ensureRoot();
    const live = await this.settle(id);
    if (live === this.checkpointDir(id)) {
      const current = await this.read(live, namespace, key).catch(() => null);
      if (current?.ok && current.podBytes.equals(podBytes) && current.dataHash === meta.dataHash) {
        if (current.metaBytes.equals(metaBytes)) return 'unchanged';
        return writeFileAtomic(join(live, 'meta.json'), metaBytes, { mode: FILE_MODE, fs: this.fs });
      }
    }
    const staging = join(this.root, `.${checkpointFolder(id)}.new-${randomBytes(4).toString('hex')}`);
    try {
      await this.stage(staging, tree, podBytes, metaBytes);
    } catch (err) {
      await this.fs.rm(staging, { recursive: true, force: true }).catch(() => {});
      throw err;
    }
    await this.swapIn(id, staging);
    return 'written';
  }

  /**
   * Write a newly minted token over the copy of `token.relPath` in the live folder, in place, and
   * record `token` (its new lifetime) in meta.json. See the header for the order of writes.
   */
  replaceToken(id: string, token: TokenCopy, bytes: Buffer): Promise<WriteResult> {
    return this.exclusive(id, () => this.replaceTokenNow(id, token, bytes));
  }

  private async replaceTokenNow(id: string, token: TokenCopy, bytes: Buffer): Promise<WriteResult> {
    const { namespace, key } = parseId(id);
    const live = this.checkpointDir(id);
    if ((await this.settle(id)) !== live) throw new StoreError('refresh a token in', live, 'ENOENT', 'there is no live checkpoint folder');
    const read = await this.read(live, namespace, key);
    if (!read.ok) throw new StoreError('refresh a token in', live, 'ECORRUPT', `${read.reason}; the next capture replaces it`);
    const tokens = read.capture.tokens ?? [];
    const file = join(live, token.relPath);
    if (!tokens.some((t) => t.relPath === token.relPath) || !read.tree.files.some(([path]) => path === token.relPath)) {
      throw new StoreError('refresh a token in', file, 'EINVAL', 'not a token this checkpoint copied');
    }
    const next: Tree = { ...read.tree, files: read.tree.files.map(([path, b]) => [path, path === token.relPath ? bytes : b]) };
    const nextHash = treeHash(next);
    const metaFile = join(live, 'meta.json');
    const current = metaOf(read.capture, read.dataHash);
    await writeFileAtomic(metaFile, encode({ ...current, pendingDataHash: nextHash }), { mode: FILE_MODE, fs: this.fs });
    const access = accessOf(read.tree, token.relPath, false);
    const written = await writeFileAtomic(file, bytes, { mode: access.mode, owner: access, fs: this.fs });
    const capture: Capture = { ...read.capture, tokens: tokens.map((t) => (t.relPath === token.relPath ? token : t)) };
    await writeFileAtomic(metaFile, encode(metaOf(capture, nextHash)), { mode: FILE_MODE, fs: this.fs });
    return written;
  }

  /** The checkpoint, or null when there is none. Throws StoreError (code ECORRUPT) for a broken one. */
  load(id: string): Promise<Capture | null> {
    return this.exclusive(id, () => this.loadNow(id));
  }

  private async loadNow(id: string): Promise<Capture | null> {
    const { namespace, key } = parseId(id);
    const dir = await this.settle(id);
    if (!dir) return null;
    const read = await this.read(dir, namespace, key);
    if (!read.ok) throw new StoreError('load', dir, 'ECORRUPT', `${read.reason}; the next capture replaces it`);
    return read.capture;
  }

  /** Every complete checkpoint, and every folder that is not one with the reason. */
  async list(): Promise<ListResult> {
    const result: ListResult = { checkpoints: [], problems: [] };
    let names: string[];
    try {
      names = (await this.fs.readdir(this.root, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return result;
      throw StoreError.from(err, 'read', this.root);
    }
    const ids = new Set<string>();
    for (const name of names) {
      const folder = LEFTOVER.exec(name)?.[1] ?? name;
      const id = parseCheckpointFolder(folder);
      if (id) ids.add(id);
    }
    for (const id of [...ids].sort()) {
      try {
        const capture = await this.load(id);
        if (capture) result.checkpoints.push({ id, capture });
      } catch (err) {
        result.problems.push({ id, reason: err instanceof Error ? err.message : String(err) });
      }
    }
    return result;
  }

  remove(id: string): Promise<void> {
    return this.exclusive(id, () => this.removeNow(id));
  }

  private async removeNow(id: string): Promise<void> {
    const live = this.checkpointDir(id);
    const doomed = join(this.root, `.${checkpointFolder(id)}.del-${randomBytes(4).toString('hex')}`);
    try {
      await this.fs.rename(live, doomed);
      await syncDir(this.fs, this.root);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw StoreError.from(err, 'remove', live);
    }
    for (const name of await this.leftovers(id)) {
      const path = join(this.root, name);
      await this.fs.rm(path, { recursive: true, force: true }).catch((err) => {
        throw StoreError.from(err, 'remove', path);
      });
    }
  }

  private async ensureRoot(): Promise<void> {
    for (const dir of [this.stateDir, this.root]) {
      try {
        await this.fs.mkdir(dir, { recursive: true, mode: DIR_MODE });
        const { mode } = await this.fs.stat(dir);
        if ((mode & 0o7777) !== DIR_MODE) await this.fs.chmod(dir, DIR_MODE);
      } catch (err) {
        throw StoreError.from(err, 'mkdir', dir);
      }
    }
  }

  private async mkdirExact(path: string, access: Access = { mode: DIR_MODE }): Promise<void> {
    try {
      await this.fs.mkdir(path, { recursive: true, mode: DIR_MODE });
      if (access.uid !== undefined || access.gid !== undefined) await this.fs.chown(path, access.uid ?? -1, access.gid ?? -1);
      await this.fs.chmod(path, access.mode);
    } catch (err) {
      throw StoreError.from(err, 'mkdir', path);
    }
  }

  /** Write a complete copy into `staging`: data, pod.json, then meta.json; fsync all of it. */
  private async stage(staging: string, tree: Tree, podBytes: Buffer, metaBytes: Buffer): Promise<void> {
    await this.mkdirExact(staging);
    for (const dir of tree.dirs) await this.mkdirExact(join(staging, dir), accessOf(tree, dir, true));
    for (const [relPath, bytes] of tree.files) {
      const access = accessOf(tree, relPath, false);
      await writeNewFile(this.fs, join(staging, relPath), bytes, access.mode, access);
    }
    await writeNewFile(this.fs, join(staging, 'pod.json'), podBytes, FILE_MODE);
    await writeNewFile(this.fs, join(staging, 'meta.json'), metaBytes, FILE_MODE);
    for (const dir of [...tree.dirs].reverse()) await this.sync(join(staging, dir));
    await this.sync(staging);
  }

  private async sync(dir: string): Promise<void> {
    try {
      await syncDir(this.fs, dir);
    } catch (err) {
      throw StoreError.from(err, 'fsync', dir);
    }
  }

  /** Replace the live folder with the complete staged one. */
  private async swapIn(id: string, staging: string): Promise<void> {
    const live = this.checkpointDir(id);
    const old = join(this.root, `.${checkpointFolder(id)}.old-${randomBytes(4).toString('hex')}`);
    let moved = false;
    try {
      await this.fs.rename(live, old);
      moved = true;
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') {
        await this.fs.rm(staging, { recursive: true, force: true }).catch(() => {});
        throw StoreError.from(err, 'rename', `${live} -> ${old}`);
      }
    }
    try {
      await this.fs.rename(staging, live);
    } catch (err) {
      if (moved) await this.fs.rename(old, live).catch(() => {});
      throw StoreError.from(err, 'rename', `${staging} -> ${live}`);
    }
    await this.sync(this.root);
    // The new copy is committed; the old one is garbage, and settle removes it if this fails.
    if (moved) await this.fs.rm(old, { recursive: true, force: true }).catch(() => {});
  }

  private async leftovers(id: string): Promise<string[]> {
    const folder = checkpointFolder(id);
    try {
      const entries = await this.fs.readdir(this.root, { withFileTypes: true });
      return entries.map((e) => e.name).filter((name) => LEFTOVER.exec(name)?.[1] === folder);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw StoreError.from(err, 'read', this.root);
    }
  }

  /**
   * Finish or undo whatever a crash interrupted for `id`, and return the folder holding its
   * committed copy (null: none). Repairs are best effort: on a read-only disk the folder that
   * should have been promoted is returned where it lies.
   */
  private async settle(id: string): Promise<string | null> {
    const { namespace, key } = parseId(id);
    const live = this.checkpointDir(id);
    const leftovers = (await this.leftovers(id)).sort();
    let liveExists = true;
    try {
      await this.fs.stat(live);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw StoreError.from(err, 'read', live);
      liveExists = false;
    }
    let committed: string | null = liveExists ? live : null;
    if (!liveExists) {
      for (const kind of ['new', 'old'] as const) {
        for (const name of leftovers.filter((n) => LEFTOVER.exec(n)?.[2] === kind)) {
          const candidate = join(this.root, name);
          const read = await this.read(candidate, namespace, key).catch(() => null);
          if (!read?.ok) continue;
          try {
            await this.fs.rename(candidate, live);
            await syncDir(this.fs, this.root);
            committed = live;
          } catch {
            committed = candidate;
          }
          break;
        }
        if (committed) break;
      }
    }
    for (const name of leftovers) {
      const path = join(this.root, name);
      if (path !== committed) await this.fs.rm(path, { recursive: true, force: true }).catch(() => {});
    }
    if (committed === live) await this.removeTemps(live);
    return committed;
  }

  /** Temporary files of an interrupted in-place update of meta.json or of a token. */
  private async removeTemps(dir: string, depth = 0): Promise<void> {
    try {
      for (const entry of await this.fs.readdir(dir, { withFileTypes: true })) {
        if (entry.isFile() && isTempName(entry.name)) await this.fs.unlink(join(dir, entry.name));
        else if (entry.isDirectory() && (depth > 0 || (DATA_FOLDERS as readonly string[]).includes(entry.name)))
          await this.removeTemps(join(dir, entry.name), depth + 1);
      }
    } catch {
      // Best effort: a stray temp file left in a data folder makes the copy fail its dataHash check
      // and be re-captured; in the top folder it is harmless.
    }
  }

  private async readJson(path: string): Promise<{ bytes: Buffer; value: unknown } | { reason: string }> {
    let bytes: Buffer;
    try {
      bytes = await this.fs.readFile(path);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return { reason: `incomplete: ${path} is missing` };
      throw StoreError.from(err, 'read', path);
    }
    try {
      return { bytes, value: JSON.parse(bytes.toString('utf8')) };
    } catch (err) {
      return { reason: `${path} is not valid JSON (${err instanceof Error ? err.message : String(err)})` };
    }
  }

  /** Read and check one checkpoint folder against its meta.json. */
  private async read(dir: string, namespace: string, key: string): Promise<Read> {
    const meta = await this.readJson(join(dir, 'meta.json'));
    if ('reason' in meta) return { ok: false, reason: meta.reason };
    const badMeta = metaProblem(meta.value);
    if (badMeta) return { ok: false, reason: badMeta };
    const m = meta.value as Meta;
    const pod = await this.readJson(join(dir, 'pod.json'));
    if ('reason' in pod) return { ok: false, reason: pod.reason };
    const badPod = manifestProblem(pod.value, namespace, key);
    if (badPod) return { ok: false, reason: `pod.json: ${badPod}` };
    if (hashManifest(pod.value as V1Pod) !== m.specHash && legacyManifestHash(pod.value as V1Pod) !== m.specHash)
      return { ok: false, reason: 'pod.json does not match the specHash in meta.json' };
    let tree: Tree;
    try {
      tree = await walkTree(this.fs, dir, m.access);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'ECORRUPT') return { ok: false, reason: err.message };
      throw err;
    }
    const dataHash = treeHash(tree);
    if (dataHash !== m.dataHash && dataHash !== m.pendingDataHash) return { ok: false, reason: 'the data files do not match the dataHash in meta.json' };
    try {
      for (const name of ['meta.json', 'pod.json']) {
        const { mode } = await this.fs.stat(join(dir, name));
        if ((mode & 0o7777) !== FILE_MODE) await this.fs.chmod(join(dir, name), FILE_MODE);
      }
      const { mode } = await this.fs.stat(dir);
      if ((mode & 0o7777) !== DIR_MODE) await this.fs.chmod(dir, DIR_MODE);
    } catch (err) {
      throw StoreError.from(err, 'chmod', dir);
    }
    const capture: Capture = {
      manifest: pod.value as V1Pod,
      specHash: m.specHash,
      sourcePodUid: m.sourcePodUid,
      sourcePodName: m.sourcePodName,
      capturedAt: m.capturedAt,
      lastReadyAt: m.lastReadyAt,
      ...(m.tokens ? { tokens: m.tokens } : {}),
      ...(m.access ? { access: m.access } : {}),
    };
    return { ok: true, capture, podBytes: pod.bytes, metaBytes: meta.bytes, dataHash, tree };
  }
}
