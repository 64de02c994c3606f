#!/usr/bin/env node
// Bundle the CLI into one file, dist/lastseen.mjs: what the container image ships (with Node.js 24
// and nothing else) and what can be copied onto a node as `kubectl-lastseen`. Beside it, the
// heartbeat sidecar's own bundle, dist/lastseen-heartbeat.mjs (src/cli/heartbeat-main.ts: only
// `heartbeat`, no @kubernetes/client-node), which every parent pod runs.
//
//   node scripts/bundle.mjs            whitespace and syntax minified, names kept (stack traces
//                                      name real functions), pure ASCII
//   node scripts/bundle.mjs --minify   identifiers minified too
//   --outfile PATH                     the CLI bundle's path; the sidecar's goes beside it
//   --metafile PATH                    esbuild's metafile of both bundles (their inputs), which
//                                      scripts/release-image.mjs turns into the image's SBOM
//
// `lastseen --version` names the commit the bundle was built from (src/version.ts): git's HEAD,
// with "-dirty" when tracked files differ from it, or LASTSEEN_COMMIT when set (a build without
// .git, such as the Dockerfile's, passes it in).
//
// Memory, not disk, is why the default output is compacted and ASCII: Node keeps the whole
// source of the bundle in memory for the process's life, and V8 stores a source with a single
// non-ASCII character as UTF-16, two bytes per character. Measured (Node 24, an idle
// `heartbeat` 10 s after spawn): 105 MiB with the readable 8.9 MB output (comments kept by
// esbuild, some with non-ASCII), 96 MiB with the same made ASCII, 91 MiB compacted (4.6 MB) and
// ASCII. Full minification was no better (101 MiB) and loses the names.
//
// ESM for Node.js 22 and later (the oldest supported line). Some dependencies are CommonJS and call `require`, `__filename` or
// `__dirname`, none of which exist in an ES module; the banner defines them from import.meta.
import { execFileSync } from 'node:child_process';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// --outfile PATH writes elsewhere (tests bundle into a temp folder so parallel runs do not collide).
const at = process.argv.indexOf('--outfile');
const outfile = at > 0 && process.argv[at + 1] ? process.argv[at + 1] : join(root, 'dist', 'lastseen.mjs');
const minify = process.argv.includes('--minify');
const metaAt = process.argv.indexOf('--metafile');
const metafile = metaAt > 0 ? process.argv[metaAt + 1] : undefined;

function gitCommit() {
  if (process.env.LASTSEEN_COMMIT !== undefined) return process.env.LASTSEEN_COMMIT;
  const git = (...args) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const sha = git('rev-parse', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') === '' ? sha : `${sha}-dirty`;
  } catch {
    return ''; // no git here: --version prints the bare version
  }
}
const commit = gitCommit();

const banner = [
  "import { createRequire as __lastseenCreateRequire } from 'node:module';",
  "import { fileURLToPath as __lastseenFileURLToPath } from 'node:url';",
  "import { dirname as __lastseenDirname } from 'node:path';",
  'const require = __lastseenCreateRequire(import.meta.url);',
  'const __filename = __lastseenFileURLToPath(import.meta.url);',
  'const __dirname = __lastseenDirname(__filename);',
].join('\n');

async function bundle(entry, outfile) {
const result = await build({
  absWorkingDir: root,
  entryPoints: [entry],
  outfile,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  banner: { js: banner },
  define: { LASTSEEN_BUILD_COMMIT: JSON.stringify(commit) },
  // Optional native or dev-only modules that some dependencies probe for at run time.
  external: ['bufferutil', 'utf-8-validate', 'pino-pretty'],
  sourcemap: false,
  minify,
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'eof',
  metafile: true,
  logLevel: 'warning',
  write: false,
});

// esbuild escapes every non-ASCII character in code (charset ascii, its default) but not in the
// comments it keeps (the legal comments at the end): escape those too, so V8 can hold the source
// one byte per character. Inside a comment the escape is only text.
const [output] = result.outputFiles;
const text = output.text.replace(/[^\x00-\x7f]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
await mkdir(dirname(outfile), { recursive: true });
await writeFile(outfile, text, { mode: 0o755 });

const { size } = await stat(outfile);
const inputs = Object.keys(result.metafile.inputs).length;
process.stdout.write(`bundle: ${outfile} ${(size / 1024).toFixed(0)} KiB from ${inputs} files\n`);
return result.metafile;
}

const cli = await bundle('src/cli/main.ts', outfile);
const sidecar = await bundle('src/cli/heartbeat-main.ts', join(dirname(outfile), 'lastseen-heartbeat.mjs'));
// The point of the sidecar's bundle: fail the build if client-node (or undici) creeps back in.
const heavy = Object.keys(sidecar.inputs).filter((f) => /node_modules\/(@kubernetes\/client-node|undici)\//.test(f));
if (heavy.length > 0) throw new Error(`lastseen-heartbeat.mjs must not bundle client-node or undici; it takes ${heavy.slice(0, 3).join(', ')}`);
if (metafile) await writeFile(metafile, JSON.stringify({ inputs: { ...cli.inputs, ...sidecar.inputs } }));
