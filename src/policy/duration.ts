// Durations at the edge: "15s", "1m30s", "500ms", "2h" or ISO 8601 ("PT15S"), held as integer
// milliseconds everywhere inside.
//
// The ISO form is parsed here, as luxon's Duration.fromISO(...).as('milliseconds') did before
// (issue 14: luxon cost 250 KiB of bundle and about 2 MiB of RSS for this one parse): the same
// grammar (fractions on every designator, a comma or point before fractional seconds, which are
// cut to whole milliseconds) and luxon's "casual" lengths, a year of 365 days, a month of 30, a
// week of 7, a day of 24 hours. Unlike luxon, negative amounts are refused: no duration here can
// be negative. duration.test.ts checks the two agree on generated input.

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
// Go-style compound durations as users write them in Kubernetes manifests: 1h2m3s500ms.
const GO_STYLE = /^(?:(\d+(?:\.\d+)?)(ms|h|m|s))+$/;
const GO_PART = /(\d+(?:\.\d+)?)(ms|h|m|s)/g;

const DAY_MS = 86_400_000;
const NUM = String.raw`(\d{1,20}(?:\.\d{1,20})?)`;
const ISO = new RegExp(`^P(?:${NUM}Y)?(?:${NUM}M)?(?:${NUM}W)?(?:${NUM}D)?(?:T(?:${NUM}H)?(?:${NUM}M)?(?:(\\d{1,20})(?:[.,](\\d{1,20}))?S)?)?$`);
/** Milliseconds per designator, in the order of ISO's capture groups (seconds and their fraction apart). */
const ISO_MS = [365 * DAY_MS, 30 * DAY_MS, 7 * DAY_MS, DAY_MS, 3_600_000, 60_000];

/** Milliseconds of an ISO 8601 duration (upper case), or null when it does not match the grammar. */
function isoMs(s: string): number | null {
  const m = ISO.exec(s);
  if (!m) return null;
  let ms = 0;
  ISO_MS.forEach((unit, i) => {
    if (m[i + 1] !== undefined) ms += Number(m[i + 1]) * unit;
  });
  if (m[7] !== undefined) ms += Number(m[7]) * 1000;
  if (m[8] !== undefined) ms += Math.floor(Number(`0.${m[8]}`) * 1000);
  return ms;
}

export type DurationResult = { ok: true; ms: number } | { ok: false; error: string };

export function parseDuration(text: string): DurationResult {
  const s = text.trim();
  if (s === '') return { ok: false, error: 'empty duration' };
  if (/^P/i.test(s)) {
    if (!/\d/.test(s)) return { ok: false, error: `"${text}" is an ISO 8601 duration with no amount` };
    const ms = isoMs(s.toUpperCase());
    if (ms === null) return { ok: false, error: `"${text}" is not an ISO 8601 duration (forms like PT15S, PT1M30S, P1DT2H)` };
    if (!Number.isFinite(ms) || ms > Number.MAX_SAFE_INTEGER) return { ok: false, error: `"${text}" is out of range` };
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
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  if (rest > 0) parts.push(`${rest}ms`);
  return parts.join('');
}
