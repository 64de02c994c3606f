// Checkpoint ids and their folder names. An id is `<namespace>/<parent key>` (parentId in
// ../core/names.ts); on disk it is the folder `<namespace>_<key>`. Namespaces are DNS labels and
// never contain '_', so the first '_' splits a folder name back into its id unambiguously.
//
// Promises: every id that reaches a path has been checked here, so no id can name a folder outside
// the store or the manifest directory ('..', '/', absolute paths are all refused).
import { parentId } from '../core/names.js';
import { StoreError } from './errors.js';

/** A namespace: a DNS label. */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A parent key: a label value or a pod name (DNS subdomain); no '/', never '.' or '..' alone. */
const KEY = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$/;

export function parseId(id: string): { namespace: string; key: string } {
  const slash = id.indexOf('/');
  const namespace = id.slice(0, slash);
  const key = id.slice(slash + 1);
  if (slash < 0 || !NAMESPACE.test(namespace) || !KEY.test(key)) {
    throw new StoreError('use checkpoint id', id, 'EINVAL', 'an id is <namespace>/<parent key>, both DNS-safe names');
  }
  return { namespace, key };
}

export function checkpointFolder(id: string): string {
  const { namespace, key } = parseId(id);
  return `${namespace}_${key}`;
}

/** The id a folder name stands for, or null when it is not one of ours. */
export function parseCheckpointFolder(name: string): string | null {
  const underscore = name.indexOf('_');
  if (underscore < 0) return null;
  const namespace = name.slice(0, underscore);
  const key = name.slice(underscore + 1);
  return NAMESPACE.test(namespace) && KEY.test(key) ? parentId(namespace, key) : null;
}
