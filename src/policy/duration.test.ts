import fc from 'fast-check';
import { Duration } from 'luxon';
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it.each([
    ['15s', 15_000],
    ['1m30s', 90_000],
    ['500ms', 500],
    ['2h', 7_200_000],
    ['1h2m3s4ms', 3_723_004],
    ['1.5s', 1500],
    ['PT15S', 15_000],
    ['PT1M30S', 90_000],
    ['pt0.5s', 500],
    [' 20s ', 20_000],
  ])('%s -> %d ms', (text, ms) => {
    expect(parseDuration(text)).toEqual({ ok: true, ms });
  });

  it.each(['', '15', 's', '15 s', '1d', '-5s', 'PT', 'P1X', '5sec', '1m 30s', '-PT5S', 'PT-5S', 'PT1S2M', 'P1H', 'PT1.5.S', 'T5S'])('refuses %j', (text) => {
    const r = parseDuration(text);
    expect(r.ok).toBe(false);
  });

  it.each([
    ['P1D', 86_400_000],
    ['P1W', 604_800_000],
    ['P1M', 2_592_000_000],
    ['P1Y', 31_536_000_000],
    ['P1DT', 86_400_000],
    ['PT1,5S', 1500],
    ['PT0.0005S', 0],
    ['PT1.5M', 90_000],
    ['P0.5DT1H', 46_800_000],
  ])('ISO %s -> %d ms (luxon casual lengths)', (text, ms) => {
    expect(parseDuration(text)).toEqual({ ok: true, ms });
  });

  // The ISO parse replaced luxon's Duration.fromISO(...).as('milliseconds') (issue 14): the same
  // answer on generated durations, every designator present or not, whole or fractional.
  it('agrees with luxon on ISO 8601 durations', () => {
    const amount = fc.option(fc.tuple(fc.integer({ min: 0, max: 500 }), fc.option(fc.integer({ min: 0, max: 999 }), { nil: undefined })), { nil: undefined });
    const show = (a: [number, number | undefined] | undefined, unit: string, sep = '.') => (a === undefined ? '' : `${a[0]}${a[1] === undefined ? '' : `${sep}${String(a[1]).padStart(3, '0')}`}${unit}`);
    fc.assert(
      fc.property(fc.array(amount, { minLength: 7, maxLength: 7 }), fc.boolean(), fc.boolean(), (a, comma, lower) => {
        const date = `${show(a[0], 'Y')}${show(a[1], 'M')}${show(a[2], 'W')}${show(a[3], 'D')}`;
        const time = `${show(a[4], 'H')}${show(a[5], 'M')}${show(a[6], 'S', comma ? ',' : '.')}`;
        const iso = `P${date}${time ? `T${time}` : ''}`;
        fc.pre(/\d/.test(iso));
        const text = lower ? iso.toLowerCase() : iso;
        const theirs = Duration.fromISO(iso);
        expect(theirs.isValid).toBe(true);
        expect(parseDuration(text)).toEqual({ ok: true, ms: Math.round(theirs.as('milliseconds')) });
      }),
      { numRuns: 2000 },
    );
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [500, '500ms'],
    [90_000, '1m30s'],
    [3_723_004, '1h2m3s4ms'],
  ])('%d -> %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
    if (ms > 0) expect(parseDuration(text)).toEqual({ ok: true, ms });
  });
});
