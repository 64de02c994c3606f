#!/usr/bin/env node
// scripts/testbed-image.mjs — the test beds' images of their own binaries (pause, etcd, the
// control plane's components), assembled by crane (scripts/crane) without a Docker engine.
//
//   node scripts/testbed-image.mjs --name lastseen.test/etcd:testbed --out img.tar \
//     --file /path/on/host:/path/in/image [--file ...] [--libs] \
//     [--entrypoint '["/pause"]'] [--cmd '[...]'] [--user 65532] [--workdir /app] [--env K=V]
//
// Writes an image tarball named --name that `ctr -n k8s.io images import` takes. --libs adds the
// shared libraries and the loader that `ldd` lists for every file given (a binary linked to libc
// runs in an image holding nothing else). The one layer is made here (every file root-owned, mtime
// 0, sorted); crane appends it to an empty base and writes the config. lastseen's own image is not
// made here: the real-node bed pulls the release image (scripts/release-image.mjs) from its registry.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: o } = parseArgs({
  options: {
    name: { type: 'string' },
    out: { type: 'string' },
    file: { type: 'string', multiple: true, default: [] },
    libs: { type: 'boolean', default: false },
    entrypoint: { type: 'string' },
    cmd: { type: 'string' },
    user: { type: 'string' },
    workdir: { type: 'string' },
    env: { type: 'string', multiple: true, default: [] },
  },
});
if (!o.name || !o.out || o.file.length === 0) {
  console.error('testbed-image: --name, --out and at least one --file host:image are required');
  process.exit(2);
}

const craneScript = join(dirname(fileURLToPath(import.meta.url)), 'crane');
let craneBin;
try {
  craneBin = execFileSync(craneScript, ['path'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
} catch (e) {
  console.error(`testbed-image: ${String(e.stderr ?? e.message).trim()}`);
  process.exit(1);
}

/** `crane registry serve` on a loopback port, for crane to build the image in. */
async function serveRegistry(stage) {
  mkdirSync(join(stage, 'registry'));
  const child = spawn(craneBin, ['registry', 'serve', '--address', '127.0.0.1:0', '--disk', join(stage, 'registry')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const port = await new Promise((ok, no) => {
    child.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/serving on port (\d+)/);
      if (m) ok(m[1]);
    });
    child.on('exit', (code) => no(new Error(`crane registry serve exited ${code}: ${err}`)));
  });
  return { host: `127.0.0.1:${port}`, stop: () => child.kill() };
}

const stage = mkdtempSync(join(tmpdir(), 'lastseen-image-'));
let registry;
try {
  const root = join(stage, 'rootfs');
  mkdirSync(join(root, 'tmp'), { recursive: true });
  chmodSync(join(root, 'tmp'), 0o1777);
  const put = (from, to) => {
    const dest = join(root, to);
    mkdirSync(dirname(dest), { recursive: true });
    copyFileSync(from, dest); // follows symlinks: the image holds the file itself
    chmodSync(dest, statSync(from).mode & 0o7777);
  };
  const hostFiles = [];
  for (const spec of o.file) {
    const i = spec.indexOf(':');
    if (i <= 0) throw new Error(`--file ${spec}: expected host-path:image-path`);
    put(spec.slice(0, i), spec.slice(i + 1));
    hostFiles.push(spec.slice(0, i));
  }
  if (o.libs) {
    const libs = new Set();
    for (const f of hostFiles) {
      let out = '';
      try {
        out = execFileSync('ldd', [f], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      } catch {
        continue; // "not a dynamic executable": a static binary or a data file
      }
      for (const line of out.split('\n')) {
        const m = line.match(/(?:=>\s*)?(\/\S+)\s+\(0x/);
        if (m) libs.add(m[1]);
      }
    }
    for (const lib of libs) put(lib, lib);
  }
  const layer = join(stage, 'layer.tar');
  execFileSync('tar', ['--create', '--file', layer, '--directory', root, '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '--sort=name', '.']);
  // crane assembles the image: it appends the layer to an empty base in a registry of its own on
  // loopback, sets the config there, and writes the result as a tarball named --name.
  registry = await serveRegistry(stage);
  const crane = (...args) => {
    try {
      return execFileSync(craneBin, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
    } catch (e) {
      throw new Error(`crane ${args[0]} failed: ${String(e.stderr ?? e.message).trim()}`);
    }
  };
  const build = `${registry.host}/testbed:build`;
  crane('append', '--oci-empty-base', '-f', layer, '-t', build);
  const list = (flag, s) => (s === undefined ? [] : [`${flag}=${JSON.parse(s).join(',')}`]);
  crane(
    'mutate',
    build,
    '--set-platform',
    'linux/amd64',
    ...list('--entrypoint', o.entrypoint),
    ...list('--cmd', o.cmd),
    ...(o.user ? ['--user', o.user] : []),
    ...(o.workdir ? ['--workdir', o.workdir] : []),
    ...['PATH=/usr/local/bin:/usr/bin:/bin', ...o.env].flatMap((e) => ['--env', e]),
    '--label',
    `org.opencontainers.image.title=${o.name}`,
    '--label',
    'dev.lastseen.testbed=true',
    '-t',
    o.name,
    '-o',
    o.out,
  );
  console.log(`${o.name} -> ${o.out} (${(statSync(o.out).size / 1048576).toFixed(1)} MiB)`);
} finally {
  registry?.stop();
  rmSync(stage, { recursive: true, force: true });
}
