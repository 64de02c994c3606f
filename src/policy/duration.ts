// Durations at the edge: "15s", "1m30s", "500ms", "2h" or ISO 8601 ("PT15S"), parsed with luxon
// for the ISO form, held as integer milliseconds everywhere inside.
import { Duration } from 'luxon';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
// Go-style compound durations as users write them in Kubernetes manifests: 1h2m3s500ms.
const GO_STYLE = /^(?:(\d+(?:\.\d+)?)(ms|h|m|s))+$/;
const GO_PART = /(\d+(?:\.\d+)?)(ms|h|m|s)/g;

export type DurationResult = { ok: true; ms: number } | { ok: false; error: string };

export function parseDuration(text: string): DurationResult {
  const s = text.trim();
  if (s === '') return { ok: false, error: 'empty duration' };
  if (/^P/i.test(s)) {
    if (!/\d/.test(s)) return { ok: false, error: `"${text}" is an ISO 8601 duration with no amount` };
    const d = Duration.fromISO(s.toUpperCase());
    if (!d.isValid) return { ok: false, error: `"${text}" is not an ISO 8601 duration (${d.invalidExplanation ?? d.invalidReason})` };
    const ms = d.as('milliseconds');
    if (!Number.isFinite(ms)) return { ok: false, error: `"${text}" is out of range` };
    // luxon accepts signed components (PT-5S); a policy duration is a length of time, never negative.
    if (ms < 0) return { ok: false, error: `"${text}" is negative: a duration is a length of time` };
    return { ok: true, ms: Math.round(ms) };
  }
  if (!GO_STYLE.test(s)) {
    return { ok: false, error: `"${text}" is not a duration: use forms like 500ms, 15s, 1m30s or PT15S` };
  }
  let ms = 0;
  for (const m of s.matchAll(GO_PART)) ms += Number(m[1]) * UNIT_MS[m[2]!]!;
  if (!Number.isFinite(ms) || ms > Number.MAX_SAFE_INTEGER) return { ok: false, error: `"${text}" is out of range` };
  return { ok: true, ms: Math.round(ms) };
}

/** Shortest readable form of a millisecond count: 90000 -> "1m30s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  if (rest > 0) parts.push(`${rest}ms`);
  return parts.join('');
}
