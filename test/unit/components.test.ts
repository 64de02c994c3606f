// deploy/components: the parent recipes applied to a bootkube/Typhoon-style control plane (a
// kube-apiserver DaemonSet, kube-scheduler and kube-controller-manager Deployments in kube-system),
// built by the real kustomize (`kubectl kustomize`, release-tools.ts). Each parent gets the heartbeat
// sidecar with its own probe, the Ready proof's process namespace and capabilities, no service
// links and port sharing; nothing else changes; the agent's overlay carries the overlap policy.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicyText, policyFor } from '../../src/policy/policy.js';
import { type K8sObject, kubectlPath, objects, ROOT, tool } from './release-tools.js';

interface Container {
  name: string;
  command?: string[];
  args?: string[];
  restartPolicy?: string;
  env?: { name: string; value?: string }[];
  securityContext?: { capabilities?: { add?: string[] } };
  readinessProbe?: { exec?: { command: string[] }; periodSeconds?: number; timeoutSeconds?: number };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface Workload extends K8sObject {
  spec: {
    template: {
      metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: {
        shareProcessNamespace?: boolean;
        enableServiceLinks?: boolean;
        serviceAccountName?: string;
        initContainers?: Container[];
        containers: Container[];
        volumes?: { name: string; emptyDir?: object }[];
      };
    };
  };
}

/** A self-hosted control plane as bootkube renders it (trimmed to what the recipes touch). */
function controlPlane(kind: 'DaemonSet' | 'Deployment', name: string, command: string[]): object {
  return {
    apiVersion: 'apps/v1',
    kind,
    metadata: { name, namespace: 'kube-system', labels: { tier: 'control-plane', component: name } },
    spec: {
      selector: { matchLabels: { tier: 'control-plane', component: name } },
      template: {
        metadata: { labels: { tier: 'control-plane', component: name } },
        spec: {
          hostNetwork: true,
          serviceAccountName: name,
          containers: [{ name, image: `registry.k8s.io/${name}:v1.36.3`, command, volumeMounts: [{ name: 'secrets', mountPath: '/etc/kubernetes/secrets' }] }],
          volumes: [{ name: 'secrets', secret: { secretName: name } }],
        },
      },
    },
  };
}
const SAMPLE = [
  controlPlane('DaemonSet', 'kube-apiserver', ['kube-apiserver', '--secure-port=6443', '--bind-address=0.0.0.0']),
  controlPlane('Deployment', 'kube-scheduler', ['kube-scheduler', '--leader-elect=true']),
  controlPlane('Deployment', 'kube-controller-manager', ['kube-controller-manager', '--leader-elect=true']),
  controlPlane('DaemonSet', 'kube-proxy', ['kube-proxy', '--hostname-override=$(NODE_NAME)']),
];
const PROBES: Record<string, string> = {
  'kube-apiserver': 'https://127.0.0.1:6443/readyz',
  'kube-scheduler': 'https://127.0.0.1:10259/healthz',
  'kube-controller-manager': 'https://127.0.0.1:10257/healthz',
};

let dir: string;
let built: Map<string, K8sObject>;

// kustomize takes relative paths only: the recipes are reached from the temp folder by one.
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'lastseen-components-'));
  writeFileSync(join(dir, 'control-plane.yaml'), SAMPLE.map((o) => stringify(o)).join('---\n'));
  const components = ['parent-kube-system', ...Object.keys(PROBES).map((n) => `parent-${n}`)].map((c) => relative(dir, join(ROOT, 'deploy/components', c)));
  writeFileSync(join(dir, 'kustomization.yaml'), stringify({ resources: ['control-plane.yaml'], components }));
  built = objects(tool(kubectlPath(), ['kustomize', dir]));
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('parent recipes (deploy/components)', () => {
  it.each(Object.entries(PROBES))('%s gets the heartbeat sidecar, the Ready proof and port sharing', (name, probe) => {
    const kind = name === 'kube-apiserver' ? 'DaemonSet' : 'Deployment';
    const w = built.get(`${kind} kube-system/${name}`) as Workload;
    expect(w, name).toBeDefined();
    const pod = w.spec.template.spec;
    expect(w.spec.template.metadata.labels).toMatchObject({ 'lastseen.dev/parent': name, component: name });
    expect(w.spec.template.metadata.annotations).toEqual({ 'lastseen.dev/checkpoint': 'true' });
    expect(pod.shareProcessNamespace).toBe(true);
    expect(pod.enableServiceLinks).toBe(false);
    expect(pod.serviceAccountName).toBe('lastseen-heartbeat');
    const sidecars = pod.initContainers ?? [];
    expect(sidecars.map((c) => c.name)).toEqual(['lastseen-heartbeat']);
    const hb = sidecars[0]!;
    expect(hb.restartPolicy).toBe('Always');
    expect(hb.args).toContain(`--probe=${probe}`);
    expect(hb.securityContext?.capabilities?.add?.sort()).toEqual(['DAC_READ_SEARCH', 'KILL', 'SYS_PTRACE']);
    expect(hb.env).toContainEqual({ name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' });
    // The parent's own container keeps its command, with port sharing added, and its own volumes.
    expect(pod.containers).toHaveLength(1);
    expect(pod.containers[0]!.command?.at(-1)).toBe('--permit-port-sharing');
    expect(pod.containers[0]!.command?.[0]).toBe(name);
    expect(pod.volumes?.map((v) => v.name).sort()).toEqual(['lastseen-heartbeats', 'lastseen-podinfo', 'lastseen-policy', 'lastseen-ready', 'secrets']);
    // The pod's Ready follows the sidecar's proof: an exec probe reading the file the heartbeat
    // writes, in an emptyDir of this pod alone (not the node's shared heartbeat folder).
    const readyFile = hb.args?.find((a) => a.startsWith('--ready-file='))?.slice('--ready-file='.length);
    expect(readyFile).toBe('/run/lastseen/ready/state');
    expect(hb.readinessProbe?.exec?.command).toEqual([
      '/nodejs/bin/node',
      '--max-semi-space-size=1',
      '/app/lastseen-heartbeat.mjs',
      'ready',
      `--ready-file=${readyFile}`,
    ]);
    expect(hb.volumeMounts).toContainEqual({ name: 'lastseen-ready', mountPath: '/run/lastseen/ready' });
    expect(pod.volumes?.find((v) => v.name === 'lastseen-ready')?.emptyDir).toEqual({ medium: 'Memory', sizeLimit: '1Mi' });
    // The main container gets no probe from the recipe: its own stay as they were.
    expect(pod.containers[0]!.readinessProbe).toBeUndefined();
    // The api-server, deleted, serves on through a preStop pause while its copy starts beside it
    // (src/core/deletion.ts); the grace covers the pause and its own shutdown. The others stop at once.
    const lifecycle = (pod.containers[0] as { lifecycle?: unknown }).lifecycle;
    const grace = (pod as { terminationGracePeriodSeconds?: number }).terminationGracePeriodSeconds;
    if (name === 'kube-apiserver') {
      expect(lifecycle).toEqual({ preStop: { sleep: { seconds: 20 } } });
      expect(grace).toBe(45);
    } else {
      expect(lifecycle).toBeUndefined();
      expect(grace).toBeUndefined();
    }
  });

  it('the three sidecars are the same but for the probe', () => {
    const sidecar = (key: string) => {
      const c = structuredClone((built.get(key) as Workload).spec.template.spec.initContainers![0]!);
      c.args = c.args?.filter((a) => !a.startsWith('--probe='));
      return c;
    };
    const api = sidecar('DaemonSet kube-system/kube-apiserver');
    expect(sidecar('Deployment kube-system/kube-scheduler')).toEqual(api);
    expect(sidecar('Deployment kube-system/kube-controller-manager')).toEqual(api);
  });

  it('leaves other workloads alone and adds the heartbeat account, token grant and policy in kube-system', () => {
    const proxy = SAMPLE[3] as Workload;
    expect(built.get('DaemonSet kube-system/kube-proxy')).toEqual(proxy);
    for (const key of [
      'ServiceAccount kube-system/lastseen-heartbeat',
      'RoleBinding kube-system/lastseen-heartbeat',
      'Role kube-system/lastseen-agent-tokens',
      'RoleBinding kube-system/lastseen-agent-tokens',
      'ConfigMap kube-system/lastseen-policy',
    ])
      expect(built.has(key), key).toBe(true);
  });

  it('the agent overlay (deploy/base + self-hosted-agent) hands the three over by overlap, and the heartbeats read the same policy', () => {
    const overlay = mkdtempSync(join(tmpdir(), 'lastseen-components-agent-'));
    try {
      writeFileSync(
        join(overlay, 'kustomization.yaml'),
        stringify({
          resources: [relative(overlay, join(ROOT, 'deploy/base'))],
          components: [relative(overlay, join(ROOT, 'deploy/components/self-hosted-agent'))],
        }),
      );
      const agentSide = objects(tool(kubectlPath(), ['kustomize', overlay]));
      const cm = agentSide.get('ConfigMap lastseen-system/lastseen-policy') as unknown as { data: Record<string, string> };
      const text = cm.data['policy.yaml']!;
      expect(text).toBe(readFileSync(join(ROOT, 'deploy/components/parent-kube-system/policy.yaml'), 'utf8'));
      expect((built.get('ConfigMap kube-system/lastseen-policy') as unknown as { data: Record<string, string> }).data['policy.yaml']).toBe(text);
      const result = parsePolicyText(text);
      if (!result.ok) throw new Error(`the policy does not validate: ${JSON.stringify(result.errors)}`);
      for (const key of Object.keys(PROBES))
        expect(policyFor(result.policy, { namespace: 'kube-system', key, labels: {} }).policy.handover, key).toBe('overlap');
      expect(policyFor(result.policy, { namespace: 'kube-system', key: 'kube-apiserver', labels: {} }).policy.whenApiUnreachable).toBe('activate');
      const agent = (agentSide.get('DaemonSet lastseen-system/lastseen-agent') as Workload).spec.template.spec.containers[0]!;
      expect(agent.env).toContainEqual({ name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' });
      expect(agent.env).toContainEqual({ name: 'KUBERNETES_SERVICE_PORT', value: '6443' });
    } finally {
      rmSync(overlay, { recursive: true, force: true });
    }
  });

  it('parent-kube-apiserver-redirect, after parent-kube-apiserver: no port sharing, the sidecar probing 127.0.0.2, nothing else', () => {
    const d = mkdtempSync(join(tmpdir(), 'lastseen-components-redirect-'));
    try {
      writeFileSync(join(d, 'control-plane.yaml'), stringify(SAMPLE[0]));
      const render = (names: string[]) => {
        const components = names.map((c) => relative(d, join(ROOT, 'deploy/components', c)));
        writeFileSync(join(d, 'kustomization.yaml'), stringify({ resources: ['control-plane.yaml'], components }));
        return objects(tool(kubectlPath(), ['kustomize', d])).get('DaemonSet kube-system/kube-apiserver') as Workload;
      };
      const overlap = render(['parent-kube-system', 'parent-kube-apiserver']);
      const w = render(['parent-kube-system', 'parent-kube-apiserver', 'parent-kube-apiserver-redirect']);
      // The last value of a flag wins: the recipe's --permit-port-sharing is turned off after it.
      expect(w.spec.template.spec.containers[0]?.command).toEqual([
        ...(overlap.spec.template.spec.containers[0]?.command ?? []),
        '--permit-port-sharing=false',
      ]);
      expect(w.spec.template.spec.initContainers?.[0]?.args).toEqual(
        overlap.spec.template.spec.initContainers?.[0]?.args?.map((a) =>
          a === `--probe=${PROBES['kube-apiserver']}` ? '--probe=https://127.0.0.2:6443/readyz' : a,
        ),
      );
      const strip = (x: Workload) => {
        const c = structuredClone(x);
        delete c.spec.template.spec.containers[0]?.command;
        delete c.spec.template.spec.initContainers?.[0]?.args;
        return c;
      };
      expect(strip(w)).toEqual(strip(overlap));
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});
