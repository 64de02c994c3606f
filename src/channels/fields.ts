// Reading a heartbeat's fields back from the outside world (Lease annotations, pod annotations, a
// JSON file), shared by every channel's `beatFrom...`. Whatever is on the other side may be
// truncated, hand-edited, written by an older version or by another node: each check returns a
// reason instead of throwing, and a beat is accepted only when every field makes sense.
//
// What is *not* checked: whether a renew time is recent. The agent measures freshness on its own
// clock and compares renew times for equality only (DESIGN: clocks across nodes disagree, and a
// node rebooted without a real-time clock may write 1970 until NTP answers, while its parent is
// very much alive). Only values that cannot be a clock reading at all are refused.
import {
  ANNOTATION_AFTER_READY,
  ANNOTATION_HOLDER_UID,
  ANNOTATION_INTERVAL_MS,
  ANNOTATION_PHASE,
  ANNOTATION_ROLE,
  ANNOTATION_SEQUENCE,
  ANNOTATION_STARVED,
  ANNOTATION_UNANSWERED,
  ANNOTATION_UNPROBED,
} from '../core/names.js';
import { type Beat, beatFlags, type Phase, type Role } from '../core/types.js';
import { MAX_DURATION_MS, MIN_INTERVAL_MS } from '../policy/schema.js';

export type BeatResult = { ok: true; beat: Beat } | { ok: false; reason: string };

/**
 * Largest sequence accepted. At the minimum interval (100ms) a writer needs ~3,500 years of
 * uninterrupted beats to get here, so anything larger is a corrupted value; it also keeps every
 * sequence far inside exact double arithmetic (2^53).
 */
export const MAX_SEQUENCE = 2 ** 40;

/** Kubernetes object names (DNS subdomains) are at most 253 characters. */
const MAX_HOLDER = 253;
/** Pod uids are 36-character UUIDs; leave room for other writers' identities, refuse novels. */
const MAX_UID = 128;

const PHASES: readonly Phase[] = ['Starting', 'Ready', 'Stopping'];
const ROLES: readonly Role[] = ['parent', 'checkpoint'];
/** RFC 3339 in UTC with exactly six fractional digits: what microTime writes and the api-server returns. */
const MICROTIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export type Field<T> = { ok: true; value: T } | { ok: false; reason: string };

const bad = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

/** The beat a channel read, from its checked fields (an undeclared interval stays absent). */
export function beatOf(channel: Beat['channel'], f: Omit<Beat, 'channel' | 'intervalMs'> & { intervalMs: number | undefined }): BeatResult {
  const { intervalMs, unprobed, unanswered, afterReady, starved, ...rest } = f;
  return {
    ok: true,
    beat: { channel, ...rest, ...(intervalMs !== undefined ? { intervalMs } : {}), ...beatFlags(f.phase, unprobed, unanswered, afterReady, starved) },
  };
}

export function show(v: unknown): string {
  if (v === undefined) return 'missing';
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'object') return Array.isArray(v) ? 'an array' : 'an object';
  return `${typeof v} ${String(v)}`;
}

export function parsePhase(v: unknown, what = 'phase'): Field<Phase> {
  return PHASES.includes(v as Phase) ? { ok: true, value: v as Phase } : bad(`${what} is ${show(v)}, not one of ${PHASES.join(', ')}`);
}

export function parseRole(v: unknown, what = 'role'): Field<Role> {
  return ROLES.includes(v as Role) ? { ok: true, value: v as Role } : bad(`${what} is ${show(v)}, not one of ${ROLES.join(', ')}`);
}

/** A sequence as a number (files) or a decimal string (annotations): an integer in 1..MAX_SEQUENCE. */
export function parseSequence(v: unknown, what = 'sequence'): Field<number> {
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'string' && /^[0-9]{1,16}$/.test(v)) n = Number(v);
  else return bad(`${what} is ${show(v)}, not a positive integer`);
  if (!Number.isInteger(n) || n < 1) return bad(`${what} is ${show(v)}, not a positive integer`);
  if (n > MAX_SEQUENCE) return bad(`${what} ${n} is impossibly large (over ${MAX_SEQUENCE})`);
  return { ok: true, value: n };
}

/**
 * A renew time: the MicroTime string exactly as written (it is compared for equality, so it is
 * kept verbatim). A Date (what a typed client may hand over) is turned back into that form.
 */
export function parseRenewTime(v: unknown, what = 'renewTime'): Field<string> {
  let s: string;
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) return bad(`${what} is an invalid date`);
    s = `${v.toISOString().slice(0, 23)}000Z`;
  } else if (typeof v === 'string') s = v;
  else return bad(`${what} is ${show(v)}, not a time`);
  const m = MICROTIME.exec(s);
  if (!m) return bad(`${what} is ${show(v)}, not an RFC 3339 UTC time with six fractional digits`);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (year < 1970) return bad(`${what} ${s} is before the Unix epoch: not a clock reading (an unset time?)`);
  const d = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  // Date.UTC rolls over (Feb 30 -> Mar 2); a real instant round-trips.
  if (d.getUTCFullYear() !== year || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) {
    return bad(`${what} ${s} is not a real instant`);
  }
  return { ok: true, value: s };
}

/**
 * A declared interval in milliseconds, as a number (files) or a decimal string (annotations):
 * absent is allowed (a writer that does not declare one), anything else must be an integer within
 * the policy's limits for an interval. Kept within them so a writer cannot ask to be judged by a
 * window of years.
 */
export function parseIntervalMs(v: unknown, what = 'intervalMs'): Field<number | undefined> {
  if (v === undefined) return { ok: true, value: undefined };
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'string' && /^[0-9]{1,12}$/.test(v)) n = Number(v);
  else return bad(`${what} is ${show(v)}, not a whole number of milliseconds`);
  if (!Number.isInteger(n) || n < MIN_INTERVAL_MS || n > MAX_DURATION_MS) return bad(`${what} ${show(v)} is outside ${MIN_INTERVAL_MS}..${MAX_DURATION_MS} ms`);
  return { ok: true, value: n };
}

export function parseHolder(v: unknown, what = 'holder'): Field<string> {
  if (typeof v !== 'string' || v === '') return bad(`${what} is ${show(v)}, not a pod name`);
  if (v.length > MAX_HOLDER || !DNS_SUBDOMAIN.test(v)) return bad(`${what} ${show(v)} is not a valid pod name`);
  return { ok: true, value: v };
}

/** Holder uid: '' (unknown) is allowed. */
export function parseUid(v: unknown, what = 'holder uid'): Field<string> {
  if (v === undefined || v === '') return { ok: true, value: '' };
  if (typeof v !== 'string' || v.length > MAX_UID || !/^[A-Za-z0-9-]+$/.test(v)) return bad(`${what} is ${show(v)}, not a uid`);
  return { ok: true, value: v };
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A string-to-string map (labels, annotations); anything else is treated as absent. */
export function stringMap(v: unknown): Record<string, string> {
  if (!isRecord(v)) return {};
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
}

/** A beat's fields as the annotations the Lease and the pod annotation channels both carry. */
export function beatAnnotations(beat: Beat): Record<string, string> {
  return {
    [ANNOTATION_PHASE]: beat.phase,
    [ANNOTATION_SEQUENCE]: String(beat.sequence),
    [ANNOTATION_ROLE]: beat.role,
    [ANNOTATION_HOLDER_UID]: beat.holderUid,
    ...(beat.intervalMs !== undefined ? { [ANNOTATION_INTERVAL_MS]: String(beat.intervalMs) } : {}),
    [ANNOTATION_UNPROBED]: String(beat.unprobed === true),
    // Always written, as unprobed is: a merge patch (annotation channel) or an update from the
    // cached Lease would otherwise keep a stale "true" after the process answers again.
    [ANNOTATION_UNANSWERED]: String(beat.unanswered === true),
    // Written on every beat for the same reason; it only means something beside unanswered.
    [ANNOTATION_AFTER_READY]: String(beat.afterReady === true),
    [ANNOTATION_STARVED]: String(beat.starved === true),
  };
}

/** What `beatAnnotations` wrote, read back: each field checked, the first bad one named. */
export interface BeatAnnotationFields {
  role: Role;
  phase: Phase;
  sequence: number;
  holderUid: string;
  intervalMs: number | undefined;
  unprobed: boolean;
  unanswered: boolean;
  afterReady: boolean | undefined;
  starved: boolean;
}

export function parseBeatAnnotations(ann: Record<string, string>): Field<BeatAnnotationFields> {
  const a = (name: string) => `annotation ${name}`;
  const role = parseRole(ann[ANNOTATION_ROLE], a(ANNOTATION_ROLE));
  if (!role.ok) return role;
  const phase = parsePhase(ann[ANNOTATION_PHASE], a(ANNOTATION_PHASE));
  if (!phase.ok) return phase;
  const sequence = parseSequence(ann[ANNOTATION_SEQUENCE], a(ANNOTATION_SEQUENCE));
  if (!sequence.ok) return sequence;
  const uid = parseUid(ann[ANNOTATION_HOLDER_UID], a(ANNOTATION_HOLDER_UID));
  if (!uid.ok) return uid;
  const interval = parseIntervalMs(ann[ANNOTATION_INTERVAL_MS], a(ANNOTATION_INTERVAL_MS));
  if (!interval.ok) return interval;
  return {
    ok: true,
    value: {
      role: role.value,
      phase: phase.value,
      sequence: sequence.value,
      holderUid: uid.value,
      intervalMs: interval.value,
      unprobed: ann[ANNOTATION_UNPROBED] === 'true',
      unanswered: ann[ANNOTATION_UNANSWERED] === 'true',
      afterReady: ann[ANNOTATION_AFTER_READY] === undefined ? undefined : ann[ANNOTATION_AFTER_READY] === 'true',
      starved: ann[ANNOTATION_STARVED] === 'true',
    },
  };
}
