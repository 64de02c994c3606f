// Pinning lastseen's image by digest, the way the install docs say: one `images:` entry with a
// `digest:` in the user's overlay pins every container that runs lastseen (the agent, and with the
// parent recipes the heartbeat sidecars of the control plane), and leaves no tag behind. Rendered by
// the real kustomize (kubectl kustomize), as a user's `kubectl apply -k` does.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { kubectlPath, objects, ROOT, tool } from './release-tools.js';

const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;
const PIN = { name: 'ghcr.io/lastseen/lastseen', newName: 'registry.example:5000/lastseen', digest: DIGEST };
const PINNED = `registry.example:5000/lastseen@${DIGEST}`;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Renders an overlay of the given kustomization fields (paths relative to the repository root). */
function render(k: { resources?: string[]; components?: string[]; images?: object[] }, files: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'lastseen-digest-'));
  dirs.push(dir);
  const rel = (p: string) => (p.startsWith('./') ? p : relative(dir, join(ROOT, p)));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const kustomization = { resources: k.resources?.map(rel), components: k.components?.map(rel), images: k.images };
  writeFileSync(join(dir, 'kustomization.yaml'), stringify(kustomization));
  return objects(tool(kubectlPath(), ['kustomize', dir]));
}

type PodSpec = { containers: { name: string; image: string }[]; initContainers?: { name: string; image: string }[] };
const images = (objs: ReturnType<typeof objects>) =>
  [...objs.values()]
    .filter((o) => o.kind === 'DaemonSet')
    .flatMap((o) => {
      const spec = (o as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
      return [...spec.containers, ...(spec.initContainers ?? [])].map((c) => `${o.metadata.name}/${c.name} ${c.image}`);
    });

describe('pinning the image by digest (kustomize images: digest)', () => {
  it('deploy/base: the agent runs the pinned digest, no tag left', () => {
    const plain = images(render({ resources: ['deploy/base'] }));
    expect(plain).toEqual(['lastseen-agent/agent ghcr.io/lastseen/lastseen:0.1.0']);
    const pinned = images(render({ resources: ['deploy/base'], components: ['deploy/components/self-hosted-agent'], images: [PIN] }));
    expect(pinned).toEqual([`lastseen-agent/agent ${PINNED}`]);
  });

  it('deploy/uninstall: the cleanup DaemonSet runs the same pinned digest', () => {
    expect(images(render({ resources: ['deploy/uninstall'] }))).toEqual(['lastseen-cleanup/cleanup ghcr.io/lastseen/lastseen:0.1.0']);
    expect(images(render({ resources: ['deploy/uninstall'], images: [PIN] }))).toEqual([`lastseen-cleanup/cleanup ${PINNED}`]);
  });

  it('the parent recipes: every heartbeat sidecar runs the pinned digest; the parents keep their own images', () => {
    const bare = (name: string) => ({
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name, namespace: 'kube-system' },
      spec: {
        selector: { matchLabels: { component: name } },
        template: { metadata: { labels: { component: name } }, spec: { containers: [{ name, image: `registry.k8s.io/${name}:v1.36.3`, command: [name] }] } },
      },
    });
    const parents = ['kube-apiserver', 'kube-scheduler', 'kube-controller-manager'];
    const got = images(
      render(
        {
          resources: ['./control-plane.yaml'],
          components: ['deploy/components/parent-kube-system', ...parents.map((p) => `deploy/components/parent-${p}`)],
          images: [PIN],
        },
        { 'control-plane.yaml': parents.map((p) => stringify(bare(p))).join('---\n') },
      ),
    ).sort();
    expect(got).toEqual(parents.flatMap((p) => [`${p}/${p} registry.k8s.io/${p}:v1.36.3`, `${p}/lastseen-heartbeat ${PINNED}`]).sort());
  });
});
