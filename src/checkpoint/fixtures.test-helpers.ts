// Test fixtures: a parent pod as the api-server returns it (server-set fields included), and an
// in-memory DataResolver. Used by the tests beside this file only.
import type { V1Pod } from '@kubernetes/client-node';
import type { DataResolver } from './capture.js';

export function parentPod(): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'kube-apiserver-x7k2p',
      generateName: 'kube-apiserver-',
      namespace: 'kube-system',
      uid: 'uid-parent-1',
      resourceVersion: '4711',
      creationTimestamp: new Date('2026-01-02T03:04:05Z'),
      managedFields: [{ manager: 'kube-controller-manager', operation: 'Update' }],
      labels: { app: 'kube-apiserver', 'controller-revision-hash': 'abc' },
      annotations: {
        'lastseen.dev/checkpoint': 'true',
        'lastseen.dev/last-seen': '2026-01-02T03:04:05.000000Z',
        'lastseen.dev/sequence': '17',
        'kubectl.kubernetes.io/last-applied-configuration': '{}',
        'prometheus.io/scrape': 'true',
      },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'kube-apiserver', uid: 'uid-ds', controller: true }],
    },
    spec: {
      nodeName: 'node-a',
      nodeSelector: { 'node-role.kubernetes.io/control-plane': '' },
      serviceAccountName: 'kube-apiserver',
      serviceAccount: 'kube-apiserver',
      automountServiceAccountToken: true,
      priority: 2000001000,
      priorityClassName: 'system-node-critical',
      hostNetwork: true,
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] }],
          },
        },
      },
      tolerations: [{ operator: 'Exists' }],
      initContainers: [
        {
          name: 'lastseen-heartbeat',
          image: 'lastseen:1',
          restartPolicy: 'Always',
          args: ['heartbeat', '--channels=lease,local'],
          env: [{ name: 'LASTSEEN_ROLE', value: 'parent' }],
        },
      ],
      containers: [
        {
          name: 'kube-apiserver',
          image: 'registry.k8s.io/kube-apiserver:v1.34.0',
          command: ['kube-apiserver', '--secure-port=6443'],
          volumeMounts: [
            { name: 'certs', mountPath: '/etc/kubernetes/pki' },
            { name: 'config', mountPath: '/etc/config' },
            { name: 'kube-api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
          ],
        },
      ],
      volumes: [
        { name: 'certs', secret: { secretName: 'apiserver-certs', defaultMode: 0o400 } },
        { name: 'config', configMap: { name: 'apiserver-config', items: [{ key: 'config.yaml', path: 'config.yaml' }] } },
        {
          name: 'kube-api-access',
          projected: {
            sources: [
              { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
            ],
          },
        },
        { name: 'host-etc', hostPath: { path: '/etc/ssl', type: 'Directory' } },
      ],
    },
    status: { phase: 'Running', podIP: '10.0.0.1', hostIP: '10.0.0.1' },
  };
}

/** A resolver over fixed objects; counts its calls. */
export function memoryResolver(
  secrets: Record<string, Record<string, string>> = {
    'kube-system/apiserver-certs': { 'tls.crt': 'CERT-1', 'tls.key': 'KEY-1' },
  },
  configMaps: Record<string, Record<string, string>> = {
    'kube-system/apiserver-config': { 'config.yaml': 'a: 1\n', other: 'ignored' },
    'kube-system/kube-root-ca.crt': { 'ca.crt': 'CA' },
  },
): DataResolver & { calls: string[] } {
  const calls: string[] = [];
  const toBuffers = (o: Record<string, string> | undefined) => (o ? Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Buffer.from(v)])) : null);
  return {
    calls,
    secret: async (ns, name) => {
      calls.push(`secret ${ns}/${name}`);
      return toBuffers(secrets[`${ns}/${name}`]);
    },
    configMap: async (ns, name) => {
      calls.push(`configMap ${ns}/${name}`);
      return toBuffers(configMaps[`${ns}/${name}`]);
    },
    serviceAccountToken: async (ns, sa, audience, expirationSeconds) => {
      calls.push(`token ${ns}/${sa}`);
      return Buffer.from(`token-for-${sa}-${audience ?? 'api'}-${expirationSeconds ?? 0}`);
    },
  };
}
