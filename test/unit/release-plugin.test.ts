// The kubectl plugin, both ways it is installed as `kubectl-lastseen`: the CLI bundle (on a machine
// with Node.js) and the single executable from scripts/release-plugin.mjs (with no Node.js on PATH
// at all). The real kubectl (scripts/control-plane's) finds and runs each, and the flags kubectl
// users type after `kubectl lastseen status` reach it: --kubeconfig and --context pick the cluster
// (the api-server it called is named in the error when none answers there), an unknown --context
// is a usage error naming the known ones. krew's own validator accepts the krew manifest.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { VERSION } from '../../src/version.js';
import { krewValidatorPath, kubectlPath, ROOT, tool } from './release-tools.js';

let dir: string;
let kubeconfig: string;

/** Two clusters on loopback ports where nothing listens: `a` (the current context) and `b`. */
function twoClusters(): string {
  const cluster = (name: string, port: number) => ({ name, cluster: { server: `https://127.0.0.1:${port}` } });
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [cluster('a', 1), cluster('b', 2)],
    users: [{ name: 'u', user: { token: 'unused' } }],
    contexts: [
      { name: 'a', context: { cluster: 'a', user: 'u' } },
      { name: 'b', context: { cluster: 'b', user: 'u' } },
    ],
    'current-context': 'a',
  });
}

const INSTALLS = {
  // The bundle's `#!/usr/bin/env node` finds this test's Node.js (>= 22) first.
  bundle: () => `${join(dir, 'bundle')}:${dirname(process.execPath)}`,
  // Nothing but the plugin on PATH: no node to fall back on.
  'single executable': () => join(dir, 'sea'),
};
type Install = keyof typeof INSTALLS;

function kubectl(install: Install, args: string[]) {
  const env = { HOME: dir, PATH: INSTALLS[install](), KUBECONFIG: join(dir, 'none') };
  const r = spawnSync(kubectlPath(), args, { env, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// A bundle, then a single executable (postject copies a 120 MB Node.js) and its krew archive:
// about 100 s on two busy cores.
const BUILD_TIMEOUT_MS = 8 * 60_000;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'lastseen-plugin-'));
  const out = join(dir, 'dist');
  const b = spawnSync(process.execPath, [join(ROOT, 'scripts/bundle.mjs'), '--outfile', join(out, 'lastseen.mjs')], { encoding: 'utf8' });
  if (b.status !== 0) throw new Error(`scripts/bundle.mjs failed: ${b.stderr}`);
  mkdirSync(join(dir, 'bundle'));
  copyFileSync(join(out, 'lastseen.mjs'), join(dir, 'bundle', 'kubectl-lastseen'));
  chmodSync(join(dir, 'bundle', 'kubectl-lastseen'), 0o755);
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const sea = spawnSync(process.execPath, [join(ROOT, 'scripts/release-plugin.mjs'), '--out', out, '--arch', arch, '--krew'], { encoding: 'utf8' });
  if (sea.status !== 0) throw new Error(`scripts/release-plugin.mjs failed: ${sea.stderr}`);
  mkdirSync(join(dir, 'sea'));
  copyFileSync(join(out, `kubectl-lastseen-linux-${arch}`), join(dir, 'sea', 'kubectl-lastseen'));
  chmodSync(join(dir, 'sea', 'kubectl-lastseen'), 0o755);
  kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, twoClusters());
}, BUILD_TIMEOUT_MS);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.each(Object.keys(INSTALLS) as Install[])('kubectl lastseen (%s)', (install) => {
  it('is executable, and kubectl lists and runs it as a plugin', () => {
    expect(statSync(join(dir, 'dist/lastseen.mjs')).mode & 0o111, 'npm run bundle makes it executable').toBe(0o111);
    const list = kubectl(install, ['plugin', 'list']);
    expect(list.stdout).toContain(join(dir, install === 'bundle' ? 'bundle' : 'sea', 'kubectl-lastseen'));
    expect(list.stderr).not.toMatch(/warning/i);
    const v = kubectl(install, ['lastseen', '--version']);
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(new RegExp(`^${VERSION.replaceAll('.', '\\.')} \\(commit [0-9a-f]{40}(-dirty)?\\)\\n$`));
  });

  it('--context picks the cluster, with --kubeconfig and -n as kubectl users type them', () => {
    const viaB = kubectl(install, ['lastseen', 'status', '--context', 'b', '-n', 'kube-system', '--kubeconfig', kubeconfig]);
    expect(viaB.stderr).toContain('https://127.0.0.1:2');
    expect(viaB.stderr).not.toContain('https://127.0.0.1:1');
    expect(viaB.code).toBe(4); // the api-server did not answer
    const viaDefault = kubectl(install, ['lastseen', 'status', `--kubeconfig=${kubeconfig}`, '--namespace=kube-system']);
    expect(viaDefault.stderr).toContain('https://127.0.0.1:1');
    expect(viaDefault.code).toBe(4);
  });

  it('an unknown --context is a usage error that names the contexts there are', () => {
    const r = kubectl(install, ['lastseen', 'status', '--context=prod', '--kubeconfig', kubeconfig]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--context "prod": no such context in the kubeconfig (it has: a, b)');
  });
});

describe('krew', () => {
  it("krew's own validator accepts the plugin manifest, whose sha256 is its archive's", () => {
    const manifest = join(dir, 'dist', 'lastseen.yaml');
    tool(krewValidatorPath(), ['-skip-install', '-manifest', manifest]);
    const arch = process.arch === 'x64' ? 'amd64' : process.arch;
    const archive = join(dir, 'dist', `kubectl-lastseen-linux-${arch}.tar.gz`);
    const sha256 = createHash('sha256').update(readFileSync(archive)).digest('hex');
    expect(readFileSync(manifest, 'utf8')).toContain(`sha256: ${sha256}`);
    const listed = spawnSync('tar', ['--list', '--gzip', '--file', archive], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
    expect(listed.sort()).toEqual(['LICENSE', 'kubectl-lastseen']);
  });
});
