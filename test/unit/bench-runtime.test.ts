// The bench's runtime section (8) must fail, saying how to build the old bundle, when that bundle is
// missing, never skip silently.
import { afterEach, describe, expect, it } from 'vitest';
import { howToGetOld, oldBundle, runtimePairs } from '../../bench/sections/runtime.js';

describe('bench runtime section', () => {
  const saved = process.env.LASTSEEN_BENCH_OLD_BUNDLE;
  afterEach(() => {
    if (saved === undefined) delete process.env.LASTSEEN_BENCH_OLD_BUNDLE;
    else process.env.LASTSEEN_BENCH_OLD_BUNDLE = saved;
  });

  it('names the missing old bundle and the commands that build it', () => {
    process.env.LASTSEEN_BENCH_OLD_BUNDLE = '/nonexistent/bundle-b439bbf.mjs';
    expect(oldBundle()).toBe('/nonexistent/bundle-b439bbf.mjs');
    expect(() => runtimePairs()).toThrow(howToGetOld('/nonexistent/bundle-b439bbf.mjs'));
    const msg = howToGetOld('/nonexistent/bundle-b439bbf.mjs');
    expect(msg).toContain('/nonexistent/bundle-b439bbf.mjs');
    expect(msg).toContain('git worktree add');
    expect(msg).toContain('b439bbf');
    expect(msg).toContain('npm ci');
    expect(msg).toContain('scripts/bundle.mjs');
  });
});
