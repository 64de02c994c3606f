// The last good policy, kept in the state folder so that it survives an agent restart.
//
// A policy ConfigMap or file that disappears must not hand the node to the built-in defaults
// (a deleted ConfigMap would otherwise change every parent's rules at once): the agent keeps the last good policy in memory (observe/policy-source.ts) and here,
// so a restart while the policy is missing, or while no api-server answers the ConfigMap watch,
// starts from it instead of the defaults. The file holds the policy document's text exactly as it
// was validated; it is validated again when read, so a file from another version, hand-edited or
// damaged is refused (with a reason) rather than trusted.
//
// Writes are atomic (checkpoint/atomic.ts: temporary file, fsync, rename, folder fsync) and skipped
// when the bytes are unchanged; they are serialized, and the last one asked for wins.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import { type Policy, parsePolicyText } from '../policy/policy.js';
import { MAX_POLICY_BYTES } from './observe/policy-source.js';

export const LAST_GOOD_POLICY_FILE = 'last-good-policy.yaml';
/** Not secret (the ConfigMap is readable by the agent's namespace), but only the agent writes it. */
const FILE_MODE = 0o644;

export type LoadedPolicy = { ok: true; policy: Policy; text: string } | { ok: false; reason: string } | null;

export class LastGoodPolicyFile {
  readonly path: string;
  private writing: Promise<unknown> = Promise.resolve();

  constructor(stateDir: string) {
    this.path = join(stateDir, LAST_GOOD_POLICY_FILE);
  }

  /** The persisted policy; null when there is none; a reason when it cannot be used. Never throws. */
  async load(): Promise<LoadedPolicy> {
    let bytes: Buffer;
    try {
      bytes = await readFile(this.path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      return { ok: false, reason: `cannot read ${this.path}: ${(e as Error).message}` };
    }
    if (bytes.length > MAX_POLICY_BYTES) return { ok: false, reason: `${this.path} is ${bytes.length} bytes, more than a policy can be` };
    const text = bytes.toString('utf8');
    const r = parsePolicyText(text);
    if (!r.ok) return { ok: false, reason: `${this.path} is not a valid policy: ${r.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}` };
    return { ok: true, policy: r.policy, text };
  }

  /** Persist `text` (a policy document already validated). Resolves once it is durable; rejects on failure. */
  save(text: string): Promise<void> {
    const next = this.writing.catch(() => undefined).then(() => writeFileAtomic(this.path, Buffer.from(text, 'utf8'), { mode: FILE_MODE }));
    this.writing = next;
    return next.then(() => undefined);
  }

  /** Resolves once every save asked for so far has ended (written or failed). Never rejects. */
  async settled(): Promise<void> {
    await this.writing.catch(() => undefined);
  }
}
