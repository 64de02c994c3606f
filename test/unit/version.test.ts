import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { checkoutCommit, VERSION, versionLine } from '../../src/version.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const node = process.execPath;

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

describe('--version', () => {
  it('names the commit of the checkout it runs from, and only of its own checkout', () => {
    const head = execFileSync('git', ['-C', root, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    expect(checkoutCommit(root)).toMatch(new RegExp(`^${head}(-dirty)?$`));
    // A folder inside the checkout is not a package root: an npm install of lastseen inside some
    // other repository must not report that repository's commit.
    expect(checkoutCommit(join(root, 'src'))).toBeUndefined();
    const bare = mkdtempSync(join(tmpdir(), 'lastseen-version-'));
    try {
      expect(checkoutCommit(bare)).toBeUndefined();
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
    expect(versionLine('0123abc')).toBe(`${VERSION} (commit 0123abc)`);
    expect(versionLine('')).toBe(VERSION);
  });

  it('a bundle prints the version and the commit baked in at build time, for --version and -V', () => {
    const out = mkdtempSync(join(tmpdir(), 'lastseen-version-bundle-'));
    try {
      const env = { ...process.env, LASTSEEN_COMMIT: 'feedbeef0123' };
      execFileSync(node, [join(root, 'scripts/bundle.mjs'), '--outfile', join(out, 'lastseen.mjs')], { env, stdio: 'pipe' });
      // Run from a folder with no git: the commit can only come from the bundle itself.
      for (const flag of ['--version', '-V']) {
        const printed = execFileSync(node, [join(out, 'lastseen.mjs'), flag], { cwd: out, encoding: 'utf8' });
        expect(printed).toBe(`${VERSION} (commit feedbeef0123)\n`);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('the CHANGELOG (Keep a Changelog) has an entry for this version and a link for each entry', () => {
    const log = readFileSync(join(root, 'CHANGELOG.md'), 'utf8');
    const entries = [...log.matchAll(/^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$/gm)].map((m) => m[1]!);
    expect(entries[0]).toBe('Unreleased');
    expect(entries).toContain(VERSION);
    expect(entries.at(-1)).toBe('0.1.0');
    for (const e of entries) expect(log, `link for [${e}]`).toMatch(new RegExp(`^\\[${e.replaceAll('.', '\\.')}\\]: https://`, 'm'));
  });

  it('LICENSE holds the Apache License 2.0 that package.json names', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { license: string };
    expect(pkg.license).toBe('Apache-2.0');
    const text = readFileSync(join(root, 'LICENSE'), 'utf8');
    expect(text).toMatch(/^\s+Apache License\n\s+Version 2\.0, January 2004\n/);
    expect(text).toContain('END OF TERMS AND CONDITIONS');
  });
});
