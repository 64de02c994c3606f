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

  it.each(['', '15', 's', '15 s', '1d', '-5s', 'PT', 'P1X', '5sec', '1m 30s', 'PT-5S', 'PT1M-90S'])('refuses %j', (text) => {
    const r = parseDuration(text);
    expect(r.ok).toBe(false);
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
