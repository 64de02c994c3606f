// FaultFs: a test double of the FsPort over the real file system that counts every call (handle
// calls included) and can make one of them fail. Two ways to fail:
// - `crashAt: n`: the n-th call throws and so does every call after it, as if the process died
//   there (no cleanup runs); what is on disk is exactly what the first n-1 calls did.
// - `fail(op, path)`: return an errno code to make matching calls throw it (ENOSPC, EROFS), while the
//   rest keep working, so the code's own cleanup can be observed.
// Used by the crash-consistency and disk-full tests; not used in production.
import * as fsp from 'node:fs/promises';
import type { DirEntry, FileHandlePort, FsPort, StatResult } from './fs.js';

export type Op = 'open' | 'create' | 'write' | 'chmod' | 'chown' | 'sync' | 'close' | 'readFile' | 'rename' | 'unlink' | 'mkdir' | 'readdir' | 'rm' | 'stat';

export interface FaultOptions {
  crashAt?: number;
  fail?: (op: Op, path: string) => string | null;
}

function errnoError(code: string, op: Op, path: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${code}: injected failure, ${op} '${path}'`);
  err.code = code;
  err.path = path;
  return err;
}

export class FaultFs implements FsPort {
  calls = 0;
  crashed = false;
  readonly log: string[] = [];

  constructor(private readonly options: FaultOptions = {}) {}

  private hit(op: Op, path: string): void {
    this.calls++;
    this.log.push(`${op} ${path}`);
    if (this.crashed) throw errnoError('ECRASHED', op, path);
    if (this.options.crashAt === this.calls) {
      this.crashed = true;
      throw errnoError('ECRASHED', op, path);
    }
    const code = this.options.fail?.(op, path);
    if (code) throw errnoError(code, op, path);
  }

  async open(path: string, flags: string, mode?: number): Promise<FileHandlePort> {
    this.hit(flags.includes('w') ? 'create' : 'open', path);
    const handle = await fsp.open(path, flags, mode);
    return {
      writeFile: async (data) => {
        this.hit('write', path);
        await handle.writeFile(data);
      },
      chmod: async (m) => {
        this.hit('chmod', path);
        await handle.chmod(m);
      },
      chown: async (uid, gid) => {
        this.hit('chown', path);
        await handle.chown(uid, gid);
      },
      sync: async () => {
        // Counted, not performed: a simulated crash loses no page cache, and real fsyncs would make
        // the every-step crash tests slow for nothing.
        this.hit('sync', path);
      },
      close: async () => {
        // A crashed process's descriptors are closed by the kernel: close the real one regardless.
        try {
          this.hit('close', path);
        } finally {
          await handle.close();
        }
      },
    };
  }

  async readFile(path: string): Promise<Buffer> {
    this.hit('readFile', path);
    return fsp.readFile(path);
  }

  async rename(from: string, to: string): Promise<void> {
    this.hit('rename', `${from} -> ${to}`);
    await fsp.rename(from, to);
  }

  async unlink(path: string): Promise<void> {
    this.hit('unlink', path);
    await fsp.unlink(path);
  }

  async mkdir(path: string, options: { recursive: true; mode: number }): Promise<string | undefined> {
    this.hit('mkdir', path);
    return fsp.mkdir(path, options);
  }

  async chmod(path: string, mode: number): Promise<void> {
    this.hit('chmod', path);
    await fsp.chmod(path, mode);
  }

  async chown(path: string, uid: number, gid: number): Promise<void> {
    this.hit('chown', path);
    await fsp.chown(path, uid, gid);
  }

  async readdir(path: string, options: { withFileTypes: true }): Promise<DirEntry[]> {
    this.hit('readdir', path);
    return fsp.readdir(path, options);
  }

  async rm(path: string, options: { recursive: true; force: true }): Promise<void> {
    this.hit('rm', path);
    await fsp.rm(path, options);
  }

  async stat(path: string): Promise<StatResult> {
    this.hit('stat', path);
    return fsp.stat(path);
  }
}
