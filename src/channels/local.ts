// The local channel: a small JSON file per writer under a hostPath folder
// (/run/lastseen/heartbeats/<ns>_<key>.json, or <ns>_<key>.checkpoint.json for a checkpoint copy).
// It is the channel that still works when no api-server answers, which is exactly when a
// control-plane checkpoint matters.
//
// Writes are atomic (writeFileAtomic, the same as the checkpoint store: a dot-prefixed temporary,
// fsync, rename, folder fsync). A reader sees
// the old beat or the new one, never half of one; `beatFromFile` still refuses truncated or
// hand-edited files with a reason, because the folder is shared with every pod on the node.
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../checkpoint/atomic.js';
import { localBeatFile } from '../core/names.js';
import type { Beat, Role } from '../core/types.js';
import type { BeatWriter } from './channel.js';
import {
  type BeatResult,
  beatOf,
  isRecord,
  parseHolder,
  parseIntervalMs,
  parsePhase,
  parseRenewTime,
  parseRole,
  parseSequence,
  parseUid,
  show,
} from './fields.js';

export const DEFAULT_HEARTBEAT_DIR = '/run/lastseen/heartbeats';
/** Format version written into every file; a reader refuses versions it does not know. */
export const LOCAL_BEAT_VERSION = 1;
/** A beat file is a few hundred bytes; anything much larger is not ours. */
export const MAX_BEAT_FILE_BYTES = 4096;

export interface LocalTarget {
  node: string;
  namespace: string;
  key: string;
  role: Role;
}

/** The file's content for a beat (one line of JSON). */
export function localBeatText(t: LocalTarget, beat: Beat): string {
  return `${JSON.stringify({
    version: LOCAL_BEAT_VERSION,
    node: t.node,
    namespace: t.namespace,
    key: t.key,
    holder: beat.holder,
    holderUid: beat.holderUid,
    role: beat.role,
    phase: beat.phase,
    sequence: beat.sequence,
    renewTime: beat.renewTime,
    ...(beat.intervalMs !== undefined ? { intervalMs: beat.intervalMs } : {}),
    ...(beat.unprobed ? { unprobed: true } : {}),
    ...(beat.unanswered ? { unanswered: true } : {}),
    ...(beat.unanswered && beat.afterReady !== undefined ? { afterReady: beat.afterReady } : {}),
    ...(beat.unanswered && beat.starved ? { starved: true } : {}),
  })}\n`;
}

export interface ExpectedLocal {
  node: string;
  namespace: string;
  key: string;
  /** When given, the file's role must be this one. */
  role?: Role;
}

/** Read a beat from a local heartbeat file's text. Refuses, with a reason, anything that is not a whole, sane beat for `expected`. Never throws. */
export function beatFromFile(text: string, expected: ExpectedLocal): BeatResult {
  if (text.length > MAX_BEAT_FILE_BYTES) return { ok: false, reason: `file is ${text.length} bytes, more than a beat (${MAX_BEAT_FILE_BYTES})` };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return { ok: false, reason: `not JSON (truncated or corrupt): ${(e as Error).message}` };
  }
  if (!isRecord(doc)) return { ok: false, reason: `not a JSON object but ${show(doc)}` };
  if (doc.version !== LOCAL_BEAT_VERSION) return { ok: false, reason: `version is ${show(doc.version)}, not ${LOCAL_BEAT_VERSION}` };
  if (doc.node !== expected.node) return { ok: false, reason: `node is ${show(doc.node)}, not this node ${JSON.stringify(expected.node)}` };
  if (doc.namespace !== expected.namespace || doc.key !== expected.key) {
    return { ok: false, reason: `names parent ${show(doc.namespace)}/${show(doc.key)}, not ${expected.namespace}/${expected.key}` };
  }
  const role = parseRole(doc.role);
  if (!role.ok) return role;
  if (expected.role && role.value !== expected.role) return { ok: false, reason: `role is ${role.value}, expected ${expected.role}` };
  const holder = parseHolder(doc.holder);
  if (!holder.ok) return holder;
  if (typeof doc.holderUid !== 'string') return { ok: false, reason: `holderUid is ${show(doc.holderUid)}, not a string` };
  const uid = parseUid(doc.holderUid, 'holderUid');
  if (!uid.ok) return uid;
  const phase = parsePhase(doc.phase);
  if (!phase.ok) return phase;
  if (typeof doc.sequence !== 'number') return { ok: false, reason: `sequence is ${show(doc.sequence)}, not a number` };
  const sequence = parseSequence(doc.sequence);
  if (!sequence.ok) return sequence;
  const renew = parseRenewTime(doc.renewTime);
  if (!renew.ok) return renew;
  if (doc.intervalMs !== undefined && typeof doc.intervalMs !== 'number') return { ok: false, reason: `intervalMs is ${show(doc.intervalMs)}, not a number` };
  const interval = parseIntervalMs(doc.intervalMs);
  if (!interval.ok) return interval;
  return beatOf('local', {
    holder: holder.value,
    holderUid: uid.value,
    role: role.value,
    phase: phase.value,
    sequence: sequence.value,
    renewTime: renew.value,
    intervalMs: interval.value,
    unprobed: doc.unprobed === true,
    unanswered: doc.unanswered === true,
    afterReady: typeof doc.afterReady === 'boolean' ? doc.afterReady : undefined,
    starved: doc.starved === true,
  });
}

export class LocalChannel implements BeatWriter {
  readonly channel = 'local' as const;
  readonly path: string;
  private readonly name: string;
  private dirReady = false;

  constructor(
    private readonly dir: string,
    private readonly target: LocalTarget,
  ) {
    this.name = localBeatFile(target.namespace, target.key, target.role);
    this.path = join(dir, this.name);
  }

  /**
   * A checkpoint's last beat (Stopping: its sidecar got SIGTERM because the copy is being retired or
   * collected) removes its file instead of writing it. The agent removes the file when it retires
   * the copy, but the kubelet stops the copy's containers only afterwards; written then, the file
   * would outlive the copy and be the first thing a later activation of the same parent reads.
   * A parent's Stopping beat is written: it tells the agent of a deliberate stop.
   */
  async write(beat: Beat): Promise<void> {
    if (this.target.role === 'checkpoint' && beat.phase === 'Stopping') {
      try {
        await rm(this.path, { force: true });
      } catch (e) {
        throw new Error(`heartbeat file ${this.path}: ${(e as Error).message}`);
      }
      return;
    }
    try {
      if (!this.dirReady) {
        await mkdir(this.dir, { recursive: true, mode: 0o755 });
        this.dirReady = true;
      }
      await writeFileAtomic(this.path, Buffer.from(localBeatText(this.target, beat), 'utf8'), { mode: 0o644 });
    } catch (e) {
      this.dirReady = false;
      const err = e as NodeJS.ErrnoException;
      throw new Error(`heartbeat file ${this.path}: ${err.code ?? ''} ${err.message} (is the heartbeat folder mounted and writable?)`.replace(/ {2}/, ' '));
    }
  }
}
