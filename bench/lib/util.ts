// Small helpers of the benchmark: statistics, tables, waiting, machine load.
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

export interface Summary {
  n: number;
  min: number | null;
  p50: number | null;
  p90: number | null;
  p99: number | null;
  max: number | null;
  mean: number | null;
}

/** Percentile by linear interpolation between closest ranks (p in [0, 100]). With n < 100, p99 is close to the max. */
export function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return s[lo]! + (s[hi]! - s[lo]!) * (rank - lo);
}

export function summarize(values: number[]): Summary {
  const n = values.length;
  return {
    n,
    min: n ? Math.min(...values) : null,
    p50: percentile(values, 50),
    p90: percentile(values, 90),
    p99: percentile(values, 99),
    max: n ? Math.max(...values) : null,
    mean: n ? values.reduce((a, b) => a + b, 0) / n : null,
  };
}

export function median(values: number[]): number | null {
  return percentile(values, 50);
}

/** A number for a table: fixed decimals, or '-' for null/NaN. */
export function fmt(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '-';
  return v.toFixed(digits);
}

/** A ratio a/b for a table ("1.00x"), '-' when undefined. */
export function ratio(a: number | null | undefined, b: number | null | undefined, digits = 2): string {
  if (a === null || a === undefined || b === null || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return '-';
  return `${(a / b).toFixed(digits)}x`;
}

/** A plain-text table: header row, a rule, rows; columns right-aligned except the first. */
export function table(title: string, header: string[], rows: Array<Array<string | number>>, notes: string[] = []): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const out = [`\n== ${title}`, line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)];
  for (const n of notes) if (n) out.push(`   ${n}`);
  return out.join('\n');
}

export function load(): [number, number, number] {
  const [a, b, c] = loadavg();
  return [Number(a!.toFixed(2)), Number(b!.toFixed(2)), Number(c!.toFixed(2))];
}

/** Polls `fn` until it returns something other than undefined/false; errors count as "not yet". */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  what: string,
  timeoutMs = 30_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await sleep(intervalMs);
  }
}

/** Logs progress to stderr (tables go to stdout). */
export function progress(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}
