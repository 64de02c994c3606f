// The docs and the code's comments name files (`src/agent/agent.ts`, `docs/decisions/0002-hand-over.md`)
// as the place to read a rule or its test. A renamed or never-written file leaves the reader with
// a pointer to nothing, so every such path must exist in the repository.
//
// What counts as a path: a word starting with one of the repository's top folders and a slash,
// found in a Markdown file under docs/ or in a comment line of a TypeScript file under src/ or
// test/. A path followed by `{` or `*` is a pattern (`src/agent/{agent,run}.ts`) and is skipped.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const TOP = ['src', 'test', 'docs', 'scripts', 'bench', 'deploy', 'crds', 'examples', 'notes'];
const PATH = new RegExp(`(?<![\\w/.@-])((?:${TOP.join('|')})/[A-Za-z0-9_./-]*[A-Za-z0-9_])`, 'g');
/** A line of TypeScript that is a comment, or ends in one. */
const COMMENT = /^\s*(\/\/|\*|\/\*)|\s\/\/\s/;

function filesUnder(dir: string, ext: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const rel = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && !e.name.startsWith('.')) out.push(...filesUnder(rel, ext));
    } else if (e.name.endsWith(ext)) out.push(rel);
  }
  return out;
}

/** `file:line: path` for every path named in `file` that does not exist. */
function missingPaths(file: string, text: string, comments: boolean): string[] {
  const out: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (comments && !COMMENT.test(line)) return;
    for (const m of line.matchAll(PATH)) {
      const path = m[1]!;
      const next = line[m.index + m[0].length];
      if (next === '{' || next === '*') continue;
      if (!existsSync(join(ROOT, path))) out.push(`${file}:${i + 1}: ${path}`);
    }
  });
  return out;
}

describe('paths named in the docs and in comments exist', () => {
  it('finds a path that does not exist (the check itself)', () => {
    // Built, so this file's own comments name no missing file.
    const gone = ['src', 'agent', 'no-such-file.ts'].join('/');
    expect(missingPaths('x.ts', `// see src/agent/agent.ts and ${gone}`, true)).toEqual([`x.ts:1: ${gone}`]);
    expect(missingPaths('x.ts', `const p = '${gone}';`, true)).toEqual([]);
    expect(missingPaths('x.md', 'src/agent/{agent,nothing}.ts, a pattern', false)).toEqual([]);
  });

  it('docs/**/*.md', () => {
    const missing = filesUnder('docs', '.md').flatMap((f) => missingPaths(f, readFileSync(join(ROOT, f), 'utf8'), false));
    expect(missing, 'name an existing file, or drop the path').toEqual([]);
  });

  it('comments in src/ and test/', () => {
    const files = [...filesUnder('src', '.ts'), ...filesUnder('test', '.ts')];
    const missing = files.flatMap((f) => missingPaths(relative(ROOT, join(ROOT, f)), readFileSync(join(ROOT, f), 'utf8'), true));
    expect(missing, 'name an existing file, or drop the path').toEqual([]);
  });
});

// An issue number means nothing to a reader of the repository (the tracker is not in it): a
// comment or a test name says what the rule is for instead.
const ISSUE = /\b[Ii]ssues? #?\d+/;

describe('no issue numbers in the code', () => {
  it('finds one (the check itself)', () => {
    expect(ISSUE.test(['// ', 'Issue', ' 10: the goal'].join(''))).toBe(true);
    expect(ISSUE.test('// the issuer 10 times')).toBe(false);
  });

  it('src/ and test/', () => {
    const files = [...filesUnder('src', '.ts'), ...filesUnder('test', '.ts')];
    const found = files.flatMap((f) =>
      readFileSync(join(ROOT, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => (ISSUE.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(found, 'say what the rule is for, not which issue asked for it').toEqual([]);
  });
});
