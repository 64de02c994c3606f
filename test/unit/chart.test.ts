// charts/lastseen: `helm lint` passes, and `helm template` with the default values gives the same
// objects as `kubectl kustomize deploy/base`, one by one (with monitoring on, deploy/monitoring's
// too); each value changes what it says and nothing else. Real helm and kubectl (release-tools.ts).
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { VERSION } from '../../src/version.js';
import { helmPath, type K8sObject, kustomize, objects, tool } from './release-tools.js';

const CHART = 'charts/lastseen';
const template = (...args: string[]) => objects(tool(helmPath(), ['template', 'lastseen', CHART, ...args]));

function agentOf(objs: Map<string, K8sObject>) {
  const ds = objs.get('DaemonSet lastseen-system/lastseen-agent') as unknown as {
    spec: { template: { spec: { nodeSelector: unknown; tolerations: unknown; containers: { name: string; image: string; resources: unknown }[] } } };
  };
  expect(ds, 'the agent DaemonSet').toBeDefined();
  return { pod: ds.spec.template.spec, agent: ds.spec.template.spec.containers.find((c) => c.name === 'agent')! };
}

describe('helm chart', () => {
  it('helm lint passes, strict', () => {
    const out = tool(helmPath(), ['lint', '--strict', CHART]);
    expect(out).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('the chart version and appVersion are the package version', () => {
    const chart = parse(tool(helmPath(), ['show', 'chart', CHART])) as { version: string; appVersion: string };
    expect(chart.version).toBe(VERSION);
    expect(chart.appVersion).toBe(VERSION);
  });

  it('default values render the objects of deploy/base, one by one', () => {
    const want = objects(kustomize('deploy/base'));
    const got = template();
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [key, obj] of want) expect(got.get(key), key).toEqual(obj);
  });

  it('monitoring.enabled adds the objects of deploy/monitoring, one by one', () => {
    const want = new Map([...objects(kustomize('deploy/base')), ...objects(kustomize('deploy/monitoring'))]);
    const got = template('--set', 'monitoring.enabled=true');
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [key, obj] of want) expect(got.get(key), key).toEqual(obj);
  });

  it('image, resources, tolerations and nodeSelector come from the values', () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    const { pod, agent } = agentOf(
      template(
        '--set',
        `image.repository=registry.example/lastseen,image.digest=${digest}`,
        '--set',
        'agent.resources.limits.memory=512Mi',
        '--set-json',
        'agent.tolerations=[{"operator":"Exists"}]',
        '--set-json',
        'agent.nodeSelector={"node-role.kubernetes.io/control-plane":""}',
      ),
    );
    expect(agent.image).toBe(`registry.example/lastseen@${digest}`);
    expect(agent.resources).toEqual({ requests: { cpu: '20m', memory: '128Mi' }, limits: { cpu: '200m', memory: '512Mi' } });
    expect(pod.tolerations).toEqual([{ operator: 'Exists' }]);
    // Helm merges a map given on the command line into the default one (a list replaces it).
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux', 'node-role.kubernetes.io/control-plane': '' });
    expect(agentOf(template('--set', 'image.tag=0.2.0')).agent.image).toBe('ghcr.io/lastseen/lastseen:0.2.0');
  });

  it('a policy in the values replaces the policy file; the namespace moves every namespaced object and subject', () => {
    const policy = { apiVersion: 'lastseen.dev/v1alpha1', kind: 'Policy', defaults: { window: '30s' } };
    const got = template('--set-json', `policy=${JSON.stringify(policy)}`, '--set', 'namespace.name=ops-lastseen,crds.install=false');
    const cm = got.get('ConfigMap ops-lastseen/lastseen-policy') as unknown as { data: Record<string, string> };
    expect(parse(cm.data['policy.yaml']!)).toEqual(policy);
    expect(got.has('Namespace /ops-lastseen')).toBe(true);
    expect([...got.keys()].some((k) => k.startsWith('CustomResourceDefinition'))).toBe(false);
    for (const [key, o] of got) {
      expect(key, 'nothing left in lastseen-system').not.toContain('lastseen-system');
      for (const s of (o.subjects as { namespace?: string }[] | undefined) ?? []) if (s.namespace) expect(s.namespace, key).toBe('ops-lastseen');
    }
    expect(template('--set', 'namespace.create=false').has('Namespace /lastseen-system')).toBe(false);
  });

  it('a value of the wrong shape is refused, naming it', () => {
    expect(() => template('--set', 'image.digest=latest')).toThrow(/image\.digest|digest/);
    expect(() => template('--set', 'monitoring.enable=true')).toThrow(/monitoring/);
  });
});
