// The chart's time axis, broken: the stretches where something happens (a fault, a lane changing,
// a recovery figure) are drawn at one readable scale, and the quiet stretches between them shrink
// to a fixed-width break. Pure planning, no drawing (svg.ts draws).

/** A stretch of the run and where it is drawn; `quiet` stretches are drawn as a break. */
export interface Segment {
  fromMs: number;
  toMs: number;
  x0: number;
  x1: number;
  quiet: boolean;
}

export interface TimeAxis {
  segments: Segment[];
  /** Pixels per millisecond in the stretches that are not breaks. */
  scale: number;
  x(tMs: number): number;
}

/** Context drawn around each moment something happens: a little before, more after (what it causes). */
const PAD_BEFORE_MS = 10_000;
const PAD_AFTER_MS = 20_000;
/** A break's width in pixels: wide enough for its "≈" mark and a short label. */
const BREAK_PX = 34;
/** However many breaks, they take at most this share of the width (each then narrower, down to MIN_BREAK_PX). */
const MAX_BREAK_SHARE = 0.3;
const MIN_BREAK_PX = 8;
/**
 * A quiet stretch becomes a break only if it lasts this long (shorter pauses belong to the story
 * around them) and, drawn to scale, it would be this many times a break's width.
 */
const MIN_QUIET_MS = 60_000;
const BREAK_WORTH = 2;
/** The plan settles in a few passes (each drops the stretches not worth a break); a bound, not a tuning knob. */
const MAX_PASSES = 20;

/**
 * Plan the axis for a run of `endMs` drawn `widthPx` wide from `x0`, given the moments something
 * happens and stretches never to break (a fault's recovery: its proportions are the point). With
 * nothing to compress (or no moments) it is the plain linear axis.
 */
export function planAxis(
  momentsMs: readonly number[],
  endMs: number,
  x0: number,
  widthPx: number,
  keep: ReadonlyArray<readonly [number, number]> = [],
): TimeAxis {
  const end = Math.max(endMs, 1);
  const busy: Array<[number, number]> = [];
  const stretches: Array<[number, number]> = [
    ...momentsMs.filter((m) => m >= 0 && m <= end).map((t): [number, number] => [t - PAD_BEFORE_MS, t + PAD_AFTER_MS]),
    ...keep.map(([a, b]): [number, number] => [a - PAD_BEFORE_MS, b + PAD_AFTER_MS]),
  ];
  for (const [a, b] of stretches.sort((p, q) => p[0] - q[0])) {
    const from = Math.max(0, a);
    const to = Math.min(end, b);
    if (to < from) continue;
    const last = busy[busy.length - 1];
    if (last && from <= last[1]) last[1] = Math.max(last[1], to);
    else busy.push([from, to]);
  }
  const gaps: Array<[number, number]> = [];
  let at = 0;
  for (const [from, to] of busy) {
    if (from > at) gaps.push([at, from]);
    at = to;
  }
  if (busy.length > 0 && at < end) gaps.push([at, end]);

  let quiet = gaps.filter(([a, b]) => b - a >= MIN_QUIET_MS);
  let breakPx = BREAK_PX;
  let scale = widthPx / end;
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    breakPx = quiet.length === 0 ? BREAK_PX : Math.max(MIN_BREAK_PX, Math.min(BREAK_PX, (MAX_BREAK_SHARE * widthPx) / quiet.length));
    const quietMs = quiet.reduce((s, [a, b]) => s + (b - a), 0);
    scale = (widthPx - quiet.length * breakPx) / (end - quietMs);
    const worth = quiet.filter(([a, b]) => (b - a) * scale > BREAK_WORTH * breakPx);
    if (worth.length === quiet.length) break;
    quiet = worth;
  }
  if (quiet.length === 0) scale = widthPx / end;

  const segments: Segment[] = [];
  let x = x0;
  let t = 0;
  const push = (toMs: number, isQuiet: boolean) => {
    if (toMs <= t) return;
    const w = isQuiet ? breakPx : (toMs - t) * scale;
    segments.push({ fromMs: t, toMs, x0: x, x1: x + w, quiet: isQuiet });
    x += w;
    t = toMs;
  };
  for (const [a, b] of quiet) {
    push(a, false);
    push(b, true);
  }
  push(end, false);
  // Rounding: the last segment ends exactly at the right edge.
  segments[segments.length - 1]!.x1 = x0 + widthPx;

  return {
    segments,
    scale,
    x(tMs: number): number {
      const s = segments.find((g) => tMs <= g.toMs) ?? segments[segments.length - 1]!;
      const f = Math.min(1, Math.max(0, (tMs - s.fromMs) / (s.toMs - s.fromMs)));
      return s.x0 + f * (s.x1 - s.x0);
    },
  };
}

/** Tick steps, the smallest at least MIN_TICK_PX apart at the axis' scale is used. */
const TICK_STEPS_MS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600].map((s) => s * 1000);
const MIN_TICK_PX = 48;

/** Tick times: round multiples of one step inside the stretches that are not breaks, none closer than MIN_TICK_PX. */
export function ticks(axis: TimeAxis): number[] {
  const step = TICK_STEPS_MS.find((s) => s * axis.scale >= MIN_TICK_PX) ?? TICK_STEPS_MS[TICK_STEPS_MS.length - 1]!;
  const out: number[] = [];
  let lastX = Number.NEGATIVE_INFINITY;
  for (const s of axis.segments) {
    if (s.quiet) continue;
    for (let t = Math.ceil(s.fromMs / step) * step; t <= s.toMs; t += step) {
      const x = axis.x(t);
      if (x - lastX < MIN_TICK_PX) continue;
      out.push(t);
      lastX = x;
    }
  }
  return out;
}

/** "3m", "3m20s", "45s", "1h05m" */
export function formatTick(ms: number): string {
  const total = Math.round(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, '0')}m${s > 0 ? `${String(s).padStart(2, '0')}s` : ''}`;
  if (m === 0) return `${s}s`;
  return s === 0 ? `${m}m` : `${m}m${String(s).padStart(2, '0')}s`;
}
