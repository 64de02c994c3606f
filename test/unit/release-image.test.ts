// The release image (scripts/release-image.mjs): built twice from the same tree it has the same index
// digest; the layout holds linux/amd64 and linux/arm64 images with the Dockerfile's user,
// entrypoint and working folder, an SPDX SBOM of each, and the image for this machine's
// architecture runs `lastseen --version` on its own Node.js and libraries.
// Needs crane (scripts/crane ensure), apt-get, dpkg-deb and GNU tar; the first run downloads
// Node.js from npm and the .debs from Debian into ~/.cache/lastseen/release-image.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
// Two builds one after the other (the second on a warm cache): about a minute each on two busy
// cores, several more when the cache is cold.
const BUILD_TIMEOUT_MS = 15 * 60_000;

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string };
  annotations?: Record<string, string>;
}
interface SpdxPackage {
  name: string;
  versionInfo: string;
  externalRefs?: { referenceLocator: string }[];
}

let work: string;
const layouts: string[] = [];
const blob = (layout: string, digest: string) => join(layout, 'blobs', ...digest.split(':'));
const json = <T>(file: string) => JSON.parse(readFileSync(file, 'utf8')) as T;
const topIndex = (layout: string) => json<{ manifests: Descriptor[] }>(join(layout, 'index.json')).manifests;

// Both builds are of one commit: the one checked out when the test starts (a commit made while it
// runs must not count as a change; in CI nothing moves). Sources edited between the two builds
// would still differ, as they should.
const git = async (...args: string[]) => (await run('git', ['-C', root, ...args])).stdout.trim();
let pinned: NodeJS.ProcessEnv = {};

async function build(out: string, ...more: string[]): Promise<void> {
  try {
    const env = { ...process.env, ...pinned };
    await run(process.execPath, [join(root, 'scripts/release-image.mjs'), '--out', out, ...more], { cwd: root, env, maxBuffer: 16 << 20 });
  } catch (e) {
    const err = e as { stderr?: string };
    throw new Error(`scripts/release-image.mjs --out ${out} failed (crane comes from \`scripts/crane ensure\`): ${err.stderr ?? String(e)}`);
  }
}

let registry: ChildProcess | undefined;
let pushedTo = '';

/** crane's own registry on a loopback port, for the first build to push to. */
async function serveRegistry(): Promise<string> {
  const crane = (await run(join(root, 'scripts/crane'), ['path'])).stdout.trim();
  registry = spawn(crane, ['registry', 'serve', '--address', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const child = registry;
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const m = err.match(/serving on port (\d+)/);
      if (m) resolve(`127.0.0.1:${m[1]}`);
    });
    child.on('exit', (code) => reject(new Error(`crane registry serve exited ${code}: ${err}`)));
  });
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'lastseen-release-image-test-'));
  const head = await git('rev-parse', 'HEAD');
  const dirty = (await git('status', '--porcelain', '--untracked-files=no')) !== '';
  pinned = { LASTSEEN_COMMIT: dirty ? `${head}-dirty` : head, SOURCE_DATE_EPOCH: await git('log', '-1', '--format=%ct', head) };
  pushedTo = `${await serveRegistry()}/lastseen:test`;
  // Each build gets its own bundles (scripts/bundle.mjs run twice, back to back), so the whole
  // path from the sources is covered, without a minute-long image build between the two bundlings.
  for (const name of ['a', 'b']) {
    const out = join(work, `bundles-${name}`);
    await run(process.execPath, [join(root, 'scripts/bundle.mjs'), '--outfile', join(out, 'lastseen.mjs'), '--metafile', join(out, 'meta.json')], {
      env: { ...process.env, ...pinned },
    });
  }
  await build(join(work, 'a'), '--bundles', join(work, 'bundles-a'), '--push', pushedTo);
  await build(join(work, 'b'), '--bundles', join(work, 'bundles-b'));
  layouts.push(join(work, 'a'), join(work, 'b'));
}, BUILD_TIMEOUT_MS);

afterAll(() => {
  registry?.kill();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('release image', () => {
  it('two builds from the same tree give the same index digest', () => {
    const [a, b] = layouts.map(topIndex);
    expect(a).toHaveLength(1);
    expect(a![0]!.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(a![0]!.annotations?.['org.opencontainers.image.ref.name']).toBe(`ghcr.io/lastseen/lastseen:${VERSION}`);
    for (const f of ['lastseen.mjs', 'lastseen-heartbeat.mjs']) {
      const same = readFileSync(join(work, 'bundles-a', f)).equals(readFileSync(join(work, 'bundles-b', f)));
      expect(same, `${f}: both bundlings gave the same bytes (a source edited while the test ran changes them)`).toBe(true);
    }
    expect(b![0]!.digest).toBe(a![0]!.digest);
  });

  it('--push puts the same index into a registry', async () => {
    const crane = (await run(join(root, 'scripts/crane'), ['path'])).stdout.trim();
    const { stdout } = await run(crane, ['digest', pushedTo]);
    expect(stdout.trim()).toBe(topIndex(layouts[0]!)[0]!.digest);
  });

  it('holds linux/amd64 and linux/arm64 with the Dockerfile user, entrypoint and working folder', () => {
    const layout = layouts[0]!;
    const index = json<{ manifests: Descriptor[] }>(blob(layout, topIndex(layout)[0]!.digest));
    const platforms = index.manifests.map((m) => `${m.platform?.os}/${m.platform?.architecture}`).sort();
    expect(platforms).toEqual(['linux/amd64', 'linux/arm64']);

    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    const entrypoint = JSON.parse(dockerfile.match(/^ENTRYPOINT (\[.*\])$/m)![1]!) as string[];
    const users = [...dockerfile.matchAll(/^USER (\S+)$/gm)].map((m) => m[1]);
    const workdirs = [...dockerfile.matchAll(/^WORKDIR (\S+)$/gm)].map((m) => m[1]);
    for (const m of index.manifests) {
      const manifest = json<{ config: Descriptor; layers: Descriptor[] }>(blob(layout, m.digest));
      const config = json<{ architecture: string; config: { User: string; Entrypoint: string[]; WorkingDir: string; Env: string[] } }>(
        blob(layout, manifest.config.digest),
      );
      // Every ENV of the Dockerfile's final stage (NODE_ENV, MALLOC_ARENA_MAX) is the release image's too.
      for (const env of dockerfile.slice(dockerfile.lastIndexOf('\nFROM ')).matchAll(/^ENV (\S+=\S+)$/gm)) expect(config.config.Env).toContain(env[1]);
      expect(config.architecture).toBe(m.platform?.architecture);
      expect(config.config.Entrypoint).toEqual(entrypoint);
      expect(config.config.User).toBe(users.at(-1));
      expect(config.config.User).not.toBe('0');
      expect(config.config.WorkingDir).toBe(workdirs.at(-1));
    }
  });

  it('has an SPDX SBOM per platform naming lastseen, Node.js 24 and the Debian packages for that architecture', () => {
    for (const arch of ['amd64', 'arm64']) {
      const sbom = json<{ spdxVersion: string; packages: SpdxPackage[] }>(join(layouts[0]!, `sbom-linux-${arch}.spdx.json`));
      expect(sbom.spdxVersion).toBe('SPDX-2.3');
      const byName = new Map(sbom.packages.map((p) => [p.name, p]));
      expect(byName.get('lastseen')?.versionInfo).toBe(VERSION);
      expect(byName.get('node')?.versionInfo).toMatch(/^24\./);
      for (const deb of ['libc6', 'libstdc++6', 'libgcc-s1']) {
        expect(byName.get(deb)?.externalRefs?.[0]?.referenceLocator, deb).toMatch(new RegExp(`^pkg:deb/debian/${deb.replace('+', '\\+')}@.*arch=${arch}`));
      }
      // What the bundle holds is listed too (the agent's Kubernetes client is most of it).
      expect(byName.get('@kubernetes/client-node')?.externalRefs?.[0]?.referenceLocator).toMatch(/^pkg:npm\/%40kubernetes\/client-node@2\./);
    }
  });

  it("runs lastseen --version on the image's own Node.js and libraries (this machine's architecture)", async () => {
    const layout = layouts[0]!;
    const arch = process.arch === 'x64' ? 'amd64' : process.arch;
    const index = json<{ manifests: Descriptor[] }>(blob(layout, topIndex(layout)[0]!.digest));
    const desc = index.manifests.find((m) => m.platform?.architecture === arch);
    expect(desc, `an image for ${arch}`).toBeDefined();
    const manifest = json<{ layers: Descriptor[] }>(blob(layout, desc!.digest));
    const rootfs = join(work, `rootfs-${arch}`);
    mkdirSync(rootfs);
    for (const l of manifest.layers) await run('tar', ['--extract', '--gzip', '--file', blob(layout, l.digest), '--directory', rootfs]);

    // The image's own loader and libraries, not the host's: what a container would run.
    const triple = arch === 'amd64' ? 'x86_64-linux-gnu' : 'aarch64-linux-gnu';
    const loader = join(rootfs, 'lib', triple, arch === 'amd64' ? 'ld-linux-x86-64.so.2' : 'ld-linux-aarch64.so.1');
    const libs = [join(rootfs, 'lib', triple), join(rootfs, 'usr/lib', triple)].join(':');
    const env = { PATH: '/usr/bin:/bin' };
    const { stdout } = await run(loader, ['--library-path', libs, join(rootfs, 'nodejs/bin/node'), join(rootfs, 'app/lastseen.mjs'), '--version'], { env });
    const label = json<{ config: { Labels: Record<string, string> } }>(blob(layout, json<{ config: Descriptor }>(blob(layout, desc!.digest)).config.digest));
    expect(stdout).toBe(`${VERSION} (commit ${label.config.Labels['org.opencontainers.image.revision']})\n`);
    const sidecar = await run(
      loader,
      ['--library-path', libs, join(rootfs, 'nodejs/bin/node'), join(rootfs, 'app/lastseen-heartbeat.mjs'), 'heartbeat', '--help'],
      { env },
    );
    expect(sidecar.stdout).toContain('Usage: lastseen heartbeat');
    // The SBOM inside the image is the one beside the layout.
    expect(readFileSync(join(rootfs, 'usr/share/doc/lastseen/sbom.spdx.json'), 'utf8')).toBe(
      readFileSync(join(layout, `sbom-linux-${arch}.spdx.json`), 'utf8'),
    );
    expect(readFileSync(join(rootfs, 'etc/passwd'), 'utf8')).toMatch(/^nonroot:x:65532:65532:/m);
  });

  it('each platform holds its own Node.js build (an ELF for that machine)', async () => {
    const layout = layouts[0]!;
    const index = json<{ manifests: Descriptor[] }>(blob(layout, topIndex(layout)[0]!.digest));
    // ELF e_machine: 62 x86-64, 183 AArch64.
    const machines: Record<string, number> = { amd64: 62, arm64: 183 };
    for (const m of index.manifests) {
      const manifest = json<{ layers: Descriptor[] }>(blob(layout, m.digest));
      const dir = join(work, `node-${m.platform!.architecture}`);
      mkdirSync(dir);
      // The Node.js layer is the second (base, node, app).
      await run('tar', ['--extract', '--gzip', '--file', blob(layout, manifest.layers[1]!.digest), '--directory', dir, './nodejs/bin/node']);
      const elf = readFileSync(join(dir, 'nodejs/bin/node')).subarray(0, 20);
      expect(elf.subarray(1, 4).toString()).toBe('ELF');
      expect(elf.readUInt16LE(18)).toBe(machines[m.platform!.architecture]);
    }
  });
});
