import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ManifestDir } from '../checkpoint/manifests.js';
import { Store } from '../checkpoint/store.js';
import { copyOfAgentPod, SelfCheckpoint } from './self.js';

const agentPod = (args: string[]): V1Pod => ({
  metadata: { name: 'lastseen-agent-abcde', namespace: 'lastseen-system' },
  spec: {
    hostNetwork: true,
    containers: [
      {
        name: 'agent',
        image: 'lastseen',
        args,
        ports: [{ name: 'health', containerPort: 9870 }],
        livenessProbe: { httpGet: { path: '/healthz', port: 'health' as unknown as number } },
        readinessProbe: { httpGet: { path: '/readyz', port: 9870 } },
      },
    ],
  },
});

describe("the agent's own copy", () => {
  it('serves its health endpoints on the next port, so it and the DaemonSet pod can run side by side', () => {
    const pod = agentPod(['agent', '--health-port=9870', '--policy-file=/etc/lastseen/policy.yaml']);
    const c = copyOfAgentPod(pod).spec!.containers[0]!;
    expect(c.args).toEqual(['agent', '--health-port=9871', '--policy-file=/etc/lastseen/policy.yaml']);
    expect(c.livenessProbe?.httpGet?.port).toBe(9871);
    expect(c.readinessProbe?.httpGet?.port).toBe(9871);
    expect(c.ports).toBeUndefined();
    // The pod itself is untouched.
    expect(pod.spec!.containers[0]!.args).toContain('--health-port=9870');
  });

  it('moves the default port too when the pod names none', () => {
    const c = copyOfAgentPod(agentPod(['agent'])).spec!.containers[0]!;
    expect(c.args).toEqual(['agent', '--health-port=9871']);
    expect(c.readinessProbe?.httpGet?.port).toBe(9871);
  });
});

describe('which pod the copy is captured from', () => {
  // Nothing here captures: the folders are never written and no api-server is asked.
  const deps = {
    store: new Store({ stateDir: join(tmpdir(), 'lastseen-self-test-state') }),
    manifests: new ManifestDir({ dir: join(tmpdir(), 'lastseen-self-test-manifests') }),
    kube: (): never => {
      throw new Error('no api-server in these tests');
    },
    logger: pino({ level: 'silent' }),
  };
  const self = () =>
    new SelfCheckpoint({
      node: 'n1',
      podName: 'lastseen-agent-old-n1',
      namespace: 'lastseen-system',
      ...deps,
    });
  const labels = { 'app.kubernetes.io/name': 'lastseen', 'app.kubernetes.io/component': 'agent' };
  const dsPod = (name: string, extra: Partial<V1Pod['metadata']> = {}): V1Pod => ({
    metadata: {
      name,
      namespace: 'lastseen-system',
      labels,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'lastseen-agent', uid: 'u', controller: true }],
      ...extra,
    },
    spec: { nodeName: 'n1', containers: [] },
  });
  const mirror: V1Pod = {
    metadata: { name: 'lastseen-agent-old-n1', namespace: 'lastseen-system', labels, annotations: { 'kubernetes.io/config.mirror': 'x' } },
    spec: { nodeName: 'n1', containers: [] },
  };

  it('the DaemonSet pod follows only itself', () => {
    const s = new SelfCheckpoint({
      node: 'n1',
      podName: 'lastseen-agent-abcde',
      namespace: 'lastseen-system',
      ...deps,
    });
    const pods = [mirror, dsPod('lastseen-agent-abcde'), dsPod('lastseen-agent-other')];
    expect(pods.filter((p) => s.isOwnDaemonSetPod(p)).map((p) => p.metadata?.name)).toEqual(['lastseen-agent-abcde']);
  });

  it('the static copy never captures from another pod, not even the DaemonSet pod of its node (a copy captured by the copy cannot reach the api-server)', () => {
    const s = self();
    const next = dsPod('lastseen-agent-new');
    expect(s.isOwnDaemonSetPod(mirror)).toBe(false);
    expect(s.isOwnDaemonSetPod(next)).toBe(false);
  });
});
