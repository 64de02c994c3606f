// The checkpoint module's public surface: capture and sanitize a parent pod, keep it on disk
// (Store), and put it in or take it out of the kubelet's static-pod directory (ManifestDir).
export { isTempName, type WriteOptions, type WriteResult, writeFileAtomic } from './atomic.js';
export { type Capture, CaptureError, type CaptureOptions, type CaptureResult, capture, type DataResolver } from './capture.js';
export { StoreError } from './errors.js';
export type { FileHandlePort, FsPort } from './fs.js';
export { checkpointFolder, parseId } from './ids.js';
export { DEFAULT_MANIFEST_DIR, ManifestDir, type ManifestDirOptions, type Scan } from './manifests.js';
export {
  canonicalJson,
  type DataFile,
  type DataSource,
  hashManifest,
  type Sanitized,
  SanitizeError,
  type SanitizeOptions,
  sanitize,
} from './sanitize.js';
export { DEFAULT_STATE_DIR, type ListResult, type Meta, Store, type StoreOptions } from './store.js';
