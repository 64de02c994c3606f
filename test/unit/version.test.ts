import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { VERSION } from '../../src/version.js';

describe('version', () => {
  it('src/version.ts says what package.json says', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(VERSION).toBe(pkg.version);
  });

  it('README lists every metric the agent registers', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const source = readFileSync(new URL('../../src/agent/metrics.ts', import.meta.url), 'utf8');
    const names = [...source.matchAll(/name: '(lastseen_[a-z_]+)'/g)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(10);
    for (const n of names) expect(readme, `README names ${n}`).toMatch(new RegExp(`\`${n}[{\`]`));
  });

  it('the agent exports lastseen_build_info with its version and runtime', async () => {
    const text = await new AgentMetrics(false).registry.metrics();
    expect(text).toContain(`lastseen_build_info{version="${VERSION}",runtime="${process.version}"} 1\n`);
  });
});
