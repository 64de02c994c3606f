import { describe, expect, it } from 'vitest';
import { formatTick, planAxis, ticks } from './time-axis.js';

const M = 60_000;

describe('planAxis', () => {
  it('without moments, or with nothing worth compressing, is the linear axis', () => {
    // Moments every 50 s: no pause lasts a minute.
    for (const moments of [[], Array.from({ length: 13 }, (_, i) => i * 50_000)]) {
      const a = planAxis(moments, 10 * M, 100, 1000);
      expect(a.segments.filter((s) => s.quiet)).toEqual([]);
      expect(a.x(0)).toBe(100);
      expect(a.x(5 * M)).toBeCloseTo(600, 6);
      expect(a.x(10 * M)).toBe(1100);
    }
  });

  it('shrinks quiet stretches to narrow breaks and draws the busy ones at one scale', () => {
    // A cold start at 0, a fault at 30m with a minute of consequences, quiet until 2h.
    const a = planAxis([0, 5_000, 30 * M, 30 * M + 60_000], 120 * M, 0, 1000);
    const quiet = a.segments.filter((s) => s.quiet);
    expect(quiet.map((s) => [s.fromMs, s.toMs])).toEqual([
      [25_000, 30 * M - 10_000],
      [30 * M + 80_000, 120 * M],
    ]);
    for (const s of quiet) expect(s.x1 - s.x0).toBeLessThanOrEqual(34);
    for (const s of a.segments.filter((g) => !g.quiet)) expect((s.x1 - s.x0) / (s.toMs - s.fromMs)).toBeCloseTo(a.scale, 9);
    // The fault's minute takes nearly half the width (linearly it would take under 1%).
    expect(a.x(30 * M + 60_000) - a.x(30 * M)).toBeGreaterThan(450);
    // Segments tile the width, and x grows with t.
    expect(a.segments[0]!.x0).toBe(0);
    expect(a.segments[a.segments.length - 1]!.x1).toBe(1000);
    for (let i = 1; i < a.segments.length; i++) expect(a.segments[i]!.x0).toBeCloseTo(a.segments[i - 1]!.x1, 9);
    let last = -1;
    for (let t = 0; t <= 120 * M; t += 7_000) {
      expect(a.x(t)).toBeGreaterThanOrEqual(last);
      last = a.x(t);
    }
  });

  it('a pause under a minute is not a break, however wide it would be drawn', () => {
    const a = planAxis([0, 30 * M, 30 * M + 80_000], 120 * M, 0, 1000);
    expect(a.segments.filter((s) => s.quiet && s.fromMs >= 30 * M && s.toMs <= 31 * M)).toEqual([]);
    expect(a.segments.filter((s) => s.quiet).length).toBe(2);
  });

  it('never breaks a stretch it must keep (an unserved stretch, a recovery)', () => {
    const a = planAxis([0, 30 * M], 120 * M, 0, 1000, [[30 * M, 60 * M]]);
    const quiet = a.segments.filter((s) => s.quiet);
    expect(quiet.length).toBe(2);
    for (const s of quiet) expect(s.toMs <= 30 * M || s.fromMs >= 60 * M).toBe(true);
  });

  it('many breaks together take at most 30% of the width (each then narrower, down to 8 px)', () => {
    const moments = Array.from({ length: 30 }, (_, i) => i * 30 * M);
    const a = planAxis(moments, 30 * 30 * M, 0, 1000);
    const quiet = a.segments.filter((s) => s.quiet);
    expect(quiet.length).toBe(30);
    expect(quiet.reduce((s, q) => s + q.x1 - q.x0, 0)).toBeLessThanOrEqual(300 + 1e-9);
  });

  it('ticks fall on round times outside breaks, at least 48 px apart', () => {
    const a = planAxis([0, 30 * M, 31 * M], 120 * M, 0, 1000);
    const ts = ticks(a);
    expect(ts.length).toBeGreaterThan(5);
    for (const t of ts) expect(a.segments.some((s) => !s.quiet && t >= s.fromMs && t <= s.toMs)).toBe(true);
    for (let i = 1; i < ts.length; i++) expect(a.x(ts[i]!) - a.x(ts[i - 1]!)).toBeGreaterThanOrEqual(48);
    expect(ts).toContain(30 * M);
  });

  it.each([
    [0, '0s'],
    [45_000, '45s'],
    [180_000, '3m'],
    [200_000, '3m20s'],
    [3_900_000, '1h05m'],
    [3_905_000, '1h05m05s'],
  ])('formatTick(%i) = %s', (ms, s) => expect(formatTick(ms)).toBe(s));
});
