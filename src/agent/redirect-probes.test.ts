import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { redirectedProbes } from './redirect-probes.js';

const ports = { port: 6443, copyPort: 16443, exceptAddress: '127.0.0.2' };
const http = (port: number | string, host?: string) => ({ httpGet: { path: '/readyz', port, scheme: 'HTTPS', ...(host ? { host } : {}) } });

function pod(main: Partial<V1Container>, sidecarProbe = 'https://127.0.0.2:6443/readyz'): V1Pod {
  return {
    metadata: { name: 'kube-apiserver-m1' },
    spec: {
      initContainers: [{ name: 'lastseen-heartbeat', image: 'x', args: ['heartbeat', `--probe=${sidecarProbe}`, '--probe-insecure'] }],
      containers: [{ name: 'kube-apiserver', image: 'k', ...main }],
    },
  };
}

describe("the parent's probes under handover: redirect", () => {
  it('the recipe as shipped (the sidecar and every probe on 127.0.0.2, or another port): nothing to say', () => {
    expect(redirectedProbes(pod({ livenessProbe: http(6443, '127.0.0.2'), readinessProbe: http(6443, '127.0.0.2'), startupProbe: http(8080) }), ports)).toEqual(
      [],
    );
    expect(redirectedProbes(pod({ readinessProbe: http(6443, '::1') }, 'https://[::1]:6443/readyz'), ports)).toEqual([]);
  });

  it("names each probe on the parent's port that the redirect moves: on the pod's IP (no host), on a node address, by a named port", () => {
    const w = redirectedProbes(
      pod({
        ports: [{ name: 'https', containerPort: 6443 }],
        livenessProbe: http(6443),
        readinessProbe: http('https', '127.0.0.1'),
        startupProbe: { tcpSocket: { port: 6443, host: '10.0.0.11' } },
      }),
      ports,
    );
    expect(w).toHaveLength(3);
    expect(w[0]).toMatch(/container kube-apiserver: its livenessProbe \(httpGet on port 6443, host the pod's IP\).*host 127\.0\.0\.2/);
    expect(w[1]).toMatch(/readinessProbe \(httpGet on port 6443, host 127\.0\.0\.1\)/);
    expect(w[2]).toMatch(/startupProbe \(tcpSocket on port 6443, host 10\.0\.0\.11\)/);
  });

  it("names a heartbeat sidecar that probes the parent's port on a redirected address, with the probe to use", () => {
    const w = redirectedProbes(pod({}, 'https://127.0.0.1:6443/readyz'), ports);
    expect(w).toEqual([
      expect.stringMatching(
        /container lastseen-heartbeat: its heartbeat probe https:\/\/127\.0\.0\.1:6443\/readyz .*probe https:\/\/127\.0\.0\.2:6443\/readyz instead/,
      ),
    ]);
    const split: V1Pod = pod({});
    split.spec!.initContainers![0]!.args = ['heartbeat', '--probe', 'https://localhost:6443/livez'];
    expect(redirectedProbes(split, ports)).toHaveLength(1);
  });

  it('an excepted address of the policy, a probe of none, or a URL it cannot read: nothing to say', () => {
    expect(
      redirectedProbes(pod({ readinessProbe: http(6443, '127.0.0.9') }, 'https://127.0.0.9:6443/readyz'), { ...ports, exceptAddress: '127.0.0.9' }),
    ).toEqual([]);
    expect(redirectedProbes(pod({}, 'none'), ports)).toEqual([]);
    expect(redirectedProbes(pod({}, 'not a url'), ports)).toEqual([]);
  });
});
