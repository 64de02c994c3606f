// ManifestDir: the kubelet's static-pod directory (--manifest-dir, default /etc/kubernetes/manifests).
// A checkpoint is *active* while `lastseen-<ns>-<key>.json` sits there.
//
// Promises: `activate` writes the manifest atomically (writeFileAtomic: the kubelet, which ignores
// dot files, sees the old file or the new one, never a torn one) and only when the bytes change;
// `retire` removes it and fsyncs the folder, so a retire survives a power cut (a retire that
// came back would restart the port fight); `active` reports ids from the files' *content*
// (namespace and `lastseen.dev/parent` label), checked against the file name, because a name like
// `lastseen-kube-system-apiserver.json` cannot be split into namespace and key on its own;
// `removeStrays` deletes our temporary files left by a crash, and nothing else.
//
// Assumes: other files in the folder (kubeadm's manifests) are not ours and are never touched;
// only files named by manifestFile() and our dot-temp files are.
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_CHECKPOINT_OF, LABEL_PARENT, manifestFile, parentId } from '../core/names.js';
import { isTempName, type WriteResult, writeFileAtomic } from './atomic.js';
import { StoreError } from './errors.js';
import { errnoCode, type FsPort, nodeFs, syncDir } from './fs.js';
import { parseId } from './ids.js';
import { canonicalJson } from './sanitize.js';
import { manifestProblem } from './store.js';

export const DEFAULT_MANIFEST_DIR = '/etc/kubernetes/manifests';
/** The kubelet runs as root and the manifest lists where the copied secrets are: owner-only. */
export const MANIFEST_MODE = 0o600;

const OURS = /^lastseen-.+\.json$/;

export interface ManifestDirOptions {
  /** --manifest-dir; default /etc/kubernetes/manifests. */
  dir?: string;
  fs?: FsPort;
}

export interface Scan {
  /** Ids of checkpoints whose manifest is present and valid. */
  active: string[];
  /** Files named like ours that are not a valid checkpoint manifest, with the reason. */
  problems: Array<{ file: string; reason: string }>;
  /** The content of each active manifest, by id (recovery tells an exclusive copy by it). */
  manifests: Map<string, V1Pod>;
}

export class ManifestDir {
  readonly dir: string;
  private readonly fs: FsPort;

  constructor(options: ManifestDirOptions = {}) {
    this.dir = options.dir ?? DEFAULT_MANIFEST_DIR;
    this.fs = options.fs ?? nodeFs;
  }

  pathOf(id: string): string {
    const { namespace, key } = parseId(id);
    return join(this.dir, manifestFile(namespace, key));
  }

  async activate(id: string, manifest: V1Pod): Promise<WriteResult> {
    const { namespace, key } = parseId(id);
    const path = this.pathOf(id);
    const problem = manifestProblem(manifest, namespace, key);
    if (problem) throw new StoreError('activate', path, 'EINVAL', `the manifest is not a checkpoint of ${id}: ${problem}`);
    return writeFileAtomic(path, Buffer.from(`${canonicalJson(manifest)}\n`), { mode: MANIFEST_MODE, fs: this.fs });
  }

  async retire(id: string): Promise<'removed' | 'absent'> {
    const path = this.pathOf(id);
    try {
      await this.fs.unlink(path);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return 'absent';
      throw StoreError.from(err, 'remove', path);
    }
    try {
      await syncDir(this.fs, this.dir);
    } catch (err) {
      throw StoreError.from(err, 'fsync', this.dir);
    }
    return 'removed';
  }

  async active(): Promise<string[]> {
    return (await this.scan()).active;
  }

  async scan(): Promise<Scan> {
    const result: Scan = { active: [], problems: [], manifests: new Map() };
    let names: string[];
    try {
      names = (await this.fs.readdir(this.dir, { withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return result;
      throw StoreError.from(err, 'read', this.dir);
    }
    for (const file of names.filter((n) => OURS.test(n)).sort()) {
      const reason = await this.check(file).catch((err) => (err instanceof Error ? err.message : String(err)));
      if (typeof reason === 'string') result.problems.push({ file, reason });
      else {
        result.active.push(reason.id);
        result.manifests.set(reason.id, reason.pod);
      }
    }
    return result;
  }

  /** Remove temporary files of ours left by a crash mid-write. Returns their names. */
  async removeStrays(): Promise<string[]> {
    let names: string[];
    try {
      names = (await this.fs.readdir(this.dir, { withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw StoreError.from(err, 'read', this.dir);
    }
    const strays = names.filter((n) => isTempName(n) && n.startsWith('.lastseen-'));
    for (const name of strays) {
      try {
        await this.fs.unlink(join(this.dir, name));
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT') throw StoreError.from(err, 'remove', join(this.dir, name));
      }
    }
    return strays;
  }

  private async check(file: string): Promise<{ id: string; pod: V1Pod } | string> {
    const path = join(this.dir, file);
    let pod: V1Pod;
    try {
      pod = JSON.parse((await this.fs.readFile(path)).toString('utf8')) as V1Pod;
    } catch (err) {
      if (err instanceof SyntaxError) return `not valid JSON (${err.message})`;
      throw StoreError.from(err, 'read', path);
    }
    const namespace = pod?.metadata?.namespace;
    const key = pod?.metadata?.labels?.[LABEL_PARENT];
    if (typeof pod?.metadata?.annotations?.[ANNOTATION_CHECKPOINT_OF] !== 'string') return `annotation ${ANNOTATION_CHECKPOINT_OF} is missing`;
    if (typeof namespace !== 'string' || typeof key !== 'string') return `metadata.namespace or label ${LABEL_PARENT} is missing`;
    const id = parentId(namespace, key);
    try {
      parseId(id);
    } catch {
      return `namespace ${namespace} or parent key ${key} is not a valid name`;
    }
    if (manifestFile(namespace, key) !== file) return `its content names ${id}, whose file would be ${manifestFile(namespace, key)}`;
    const problem = manifestProblem(pod, namespace, key);
    return problem ? problem : { id, pod };
  }
}
