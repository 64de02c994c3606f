// What `lastseen --version` prints: the release (package.json's version) and the git commit it was
// built from. A bundle (scripts/bundle.mjs) has the commit baked in at build time, since an image
// holds no .git; run from a checkout (tsx, or tsc's dist/), the commit is read from git when asked.
import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** lastseen's release, as package.json says (test/unit/version.test.ts keeps the two equal). */
export const VERSION = '0.1.0';

// Replaced by esbuild's `define` in scripts/bundle.mjs: the commit and whether the tree had
// uncommitted changes, e.g. "0123abcd…" or "0123abcd…-dirty"; "" when the build saw no git.
declare const LASTSEEN_BUILD_COMMIT: string | undefined;

/** The commit baked into a bundle; undefined when this code is not a bundle. */
export function bakedCommit(): string | undefined {
  return typeof LASTSEEN_BUILD_COMMIT === 'string' ? LASTSEEN_BUILD_COMMIT : undefined;
}

/**
 * The commit of the git checkout at `packageRoot`, with "-dirty" when its tracked files differ from
 * it; undefined when `packageRoot` is not the top of a git work tree (an npm install inside some
 * other repository must not report that repository's commit) or git is missing.
 */
export function checkoutCommit(packageRoot: string): string | undefined {
  const git = (...args: string[]) => execFileSync('git', ['-C', packageRoot, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    if (realpathSync(git('rev-parse', '--show-toplevel')) !== realpathSync(packageRoot)) return undefined;
    const sha = git('rev-parse', 'HEAD');
    const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
    return dirty ? `${sha}-dirty` : sha;
  } catch {
    return undefined;
  }
}

/** The `--version` line: "0.1.0 (commit 0123abc…)", or the bare version when no commit is known. */
export function versionLine(commit = bakedCommit() ?? checkoutCommit(fileURLToPath(new URL('..', import.meta.url)))): string {
  return commit ? `${VERSION} (commit ${commit})` : VERSION;
}
