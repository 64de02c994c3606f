#!/usr/bin/env node
// Bundle the CLI into one file, dist/lastseen.mjs: what the container image ships (with Node.js 24
// and nothing else) and what can be copied onto a node as `kubectl-lastseen`.
//
//   node scripts/bundle.mjs            readable output (stack traces name real functions)
//   node scripts/bundle.mjs --minify   smaller, for size-sensitive installs
//
// ESM for Node.js 22 and later (the oldest supported line). Some dependencies are CommonJS and call `require`, `__filename` or
// `__dirname`, none of which exist in an ES module; the banner defines them from import.meta.
import { stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// --outfile PATH writes elsewhere (tests bundle into a temp folder so parallel runs do not collide).
const at = process.argv.indexOf('--outfile');
const outfile = at > 0 && process.argv[at + 1] ? process.argv[at + 1] : join(root, 'dist', 'lastseen.mjs');
const minify = process.argv.includes('--minify');

const banner = [
  "import { createRequire as __lastseenCreateRequire } from 'node:module';",
  "import { fileURLToPath as __lastseenFileURLToPath } from 'node:url';",
  "import { dirname as __lastseenDirname } from 'node:path';",
  'const require = __lastseenCreateRequire(import.meta.url);',
  'const __filename = __lastseenFileURLToPath(import.meta.url);',
  'const __dirname = __lastseenDirname(__filename);',
].join('\n');

const result = await build({
  absWorkingDir: root,
  entryPoints: ['src/cli/main.ts'],
  outfile,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  banner: { js: banner },
  // Optional native or dev-only modules that some dependencies probe for at run time.
  external: ['bufferutil', 'utf-8-validate', 'pino-pretty'],
  sourcemap: false,
  minify,
  legalComments: 'eof',
  metafile: true,
  logLevel: 'warning',
});

const { size } = await stat(outfile);
const inputs = Object.keys(result.metafile.inputs).length;
process.stdout.write(`bundle: ${outfile} ${(size / 1024).toFixed(0)} KiB from ${inputs} files\n`);
