import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { withCopyPort } from './actuators.js';

const ports = { port: 6443, copyPort: 16443 };
const probe = (port: number, host?: string) => ({ httpGet: { path: '/livez', port, scheme: 'HTTPS', ...(host ? { host } : {}) } });

function apiserver(command: string[]): V1Pod {
  return {
    metadata: { name: 'kube-apiserver' },
    spec: {
      initContainers: [
        { name: 'lastseen-heartbeat', image: 'x', args: ['heartbeat', '--probe=https://127.0.0.2:6443/readyz', '--probe-insecure', '--ready-file=/run/x'] },
      ],
      containers: [
        { name: 'kube-apiserver', image: 'k', command, livenessProbe: probe(6443, '127.0.0.2'), readinessProbe: probe(6443), startupProbe: probe(8080) },
      ],
    },
  };
}

describe('the copy on its own port (handover: redirect)', () => {
  it('moves --secure-port, the sidecar probe address and the probes on the port, and turns the endpoint reconciler off', () => {
    const m = withCopyPort(
      apiserver([
        'kube-apiserver',
        '--secure-port=6443',
        '--etcd-servers=https://127.0.0.1:2379',
        '--service-account-issuer=https://10.0.0.10:6443',
        '--endpoint-reconciler-type=lease',
      ]),
      ports,
    );
    const c = m.spec!.containers[0]!;
    // The issuer is an identity: tokens the parent issued must still be the copy's.
    expect(c.command).toEqual([
      'kube-apiserver',
      '--secure-port=16443',
      '--etcd-servers=https://127.0.0.1:2379',
      '--service-account-issuer=https://10.0.0.10:6443',
      '--endpoint-reconciler-type=none',
    ]);
    expect(c.livenessProbe!.httpGet!.port).toBe(16443);
    expect(c.readinessProbe!.httpGet!.port).toBe(16443);
    expect(c.startupProbe!.httpGet!.port, 'another port stays').toBe(8080);
    expect(m.spec!.initContainers![0]!.args).toEqual(['heartbeat', '--probe=https://127.0.0.2:16443/readyz', '--probe-insecure', '--ready-file=/run/x']);
  });

  it('adds --secure-port to a kube-apiserver that relied on the default, and leaves other programs and ports alone', () => {
    const m = withCopyPort(apiserver(['/usr/local/bin/kube-apiserver', '--bind-address=0.0.0.0']), ports);
    expect(m.spec!.containers[0]!.command).toEqual([
      '/usr/local/bin/kube-apiserver',
      '--bind-address=0.0.0.0',
      '--secure-port=16443',
      '--endpoint-reconciler-type=none',
    ]);
    const other = withCopyPort(apiserver(['kube-scheduler', '--secure-port=10259', '--master=https://10.0.0.1:64430']), ports);
    expect(other.spec!.containers[0]!.command).toEqual(['kube-scheduler', '--secure-port=10259', '--master=https://10.0.0.1:64430']);
  });

  it('leaves the stored manifest as it was', () => {
    const stored = apiserver(['kube-apiserver', '--secure-port=6443']);
    const before = structuredClone(stored);
    withCopyPort(stored, ports);
    expect(stored).toEqual(before);
  });
});
