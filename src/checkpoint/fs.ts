// The file-system port of src/checkpoint: the few fs/promises calls the store and the manifest
// directory make, as a narrow interface owned here. Production passes `node:fs/promises` itself
// (it satisfies the interface structurally); tests wrap it to fail any single call, which is how
// crash consistency and ENOSPC/EROFS are exercised without root or a full disk.
import * as fsp from 'node:fs/promises';

/** The parts of a FileHandle we use: write, make durable, fix the mode and owner, close. */
export interface FileHandlePort {
  writeFile(data: Uint8Array): Promise<void>;
  chmod(mode: number): Promise<void>;
  chown(uid: number, gid: number): Promise<void>;
  sync(): Promise<void>;
  close(): Promise<void>;
}

export interface DirEntry {
  name: string;
  isDirectory(): boolean;
  isFile(): boolean;
}

export interface StatResult {
  mode: number;
  uid: number;
  gid: number;
  mtimeMs: number;
  isDirectory(): boolean;
  isFile(): boolean;
}

export interface FsPort {
  open(path: string, flags: string, mode?: number): Promise<FileHandlePort>;
  readFile(path: string): Promise<Buffer>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  mkdir(path: string, options: { recursive: true; mode: number }): Promise<string | undefined>;
  chmod(path: string, mode: number): Promise<void>;
  chown(path: string, uid: number, gid: number): Promise<void>;
  readdir(path: string, options: { withFileTypes: true }): Promise<DirEntry[]>;
  rm(path: string, options: { recursive: true; force: true }): Promise<void>;
  stat(path: string): Promise<StatResult>;
}

export const nodeFs: FsPort = fsp;

/** The errno code of a thrown fs error, or undefined. */
export function errnoCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') return err.code;
  return undefined;
}

/** fsync a folder so a rename or unlink inside it survives power loss. */
export async function syncDir(fs: FsPort, dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
