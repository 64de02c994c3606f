import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { copyOfAgentPod } from './self.js';

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
