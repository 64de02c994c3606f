#!/usr/bin/env node
// scripts/testbed-image.mjs — make a container image without a registry or a Docker engine.
//
//   node scripts/testbed-image.mjs --name lastseen:testbed --out img.tar \
//     --file /path/on/host:/path/in/image [--file ...] [--libs] \
//     [--entrypoint '["/nodejs/bin/node","/app/lastseen.mjs"]'] [--user 65532] [--workdir /app] [--env K=V]
//
// Writes a docker-archive tarball (manifest.json, the image config, one layer) that
// `ctr -n k8s.io images import` takes. --libs adds the shared libraries and the loader that `ldd`
// lists for every file given (a binary linked to libc runs in an image holding nothing else).
// Every file is owned by root, with a fixed mtime, so the same inputs give the same image id.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
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

const stage = mkdtempSync(join(tmpdir(), 'lastseen-image-'));
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
  const diffId = `sha256:${createHash('sha256').update(readFileSync(layer)).digest('hex')}`;
  const parseList = (s) => (s === undefined ? undefined : JSON.parse(s));
  const config = {
    architecture: 'amd64',
    os: 'linux',
    created: '1970-01-01T00:00:00Z',
    config: {
      Entrypoint: parseList(o.entrypoint),
      Cmd: parseList(o.cmd),
      User: o.user,
      WorkingDir: o.workdir,
      Env: ['PATH=/usr/local/bin:/usr/bin:/bin', ...o.env],
      Labels: { 'org.opencontainers.image.title': o.name, 'dev.lastseen.testbed': 'true' },
    },
    rootfs: { type: 'layers', diff_ids: [diffId] },
    history: [{ created: '1970-01-01T00:00:00Z', created_by: 'scripts/testbed-image.mjs' }],
  };
  const configText = JSON.stringify(config);
  const configName = `${createHash('sha256').update(configText).digest('hex')}.json`;
  writeFileSync(join(stage, configName), configText);
  writeFileSync(join(stage, 'manifest.json'), JSON.stringify([{ Config: configName, RepoTags: [o.name], Layers: ['layer.tar'] }]));
  execFileSync('tar', ['--create', '--file', o.out, '--directory', stage, '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', 'manifest.json', configName, 'layer.tar']);
  console.log(`${o.name} -> ${o.out} (${(statSync(o.out).size / 1048576).toFixed(1)} MiB)`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
