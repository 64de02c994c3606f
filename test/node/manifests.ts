// The test bed's self-hosted control plane, as objects. Bootstrapped the way self-hosted clusters
// are: etcd and a temporary api-server, scheduler and controller-manager as static pods; then the
// real ones as DaemonSet pods (hostNetwork) with the `lastseen heartbeat` sidecar; then the
// temporary ones go, and the only way back after a reboot is lastseen. etcd stays a static pod.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parseAllDocuments, parseDocument, stringify, type YAMLMap, type YAMLSeq } from 'yaml';
import { REPO, type TestbedEnv } from './env.js';

const IMAGE = (c: string) => `lastseen.test/${c}:testbed`;
export const LASTSEEN_IMAGE = 'lastseen.test/lastseen:testbed';
/**
 * lastseen's image on a bed: the release image by digest from the node's registry where the bed has
 * one (the kubelet pulls it once), else the bed's own imported image (never pulled).
 */
export function lastseenImage(env: TestbedEnv): { image: string; imagePullPolicy: 'IfNotPresent' | 'Never' } {
  const image = env.lastseenImage;
  return image ? { image, imagePullPolicy: 'IfNotPresent' } : { image: LASTSEEN_IMAGE, imagePullPolicy: 'Never' };
}
export const ETCD_CLIENT_PORT = 12379;
export const ETCD_PEER_PORT = 12380;
export const SCHEDULER_PORT = 10359;
export const CONTROLLER_MANAGER_PORT = 10357;

/** The node folder, mounted at the same path in every control-plane container (PKI, kubeconfigs, etcd data). */
function nodeDirVolume(env: TestbedEnv) {
  return {
    volume: { name: 'node-dir', hostPath: { path: env.dir, type: 'Directory' } },
    mount: { name: 'node-dir', mountPath: env.dir, readOnly: true },
  };
}

export function apiserverArgs(env: TestbedEnv): string[] {
  const pki = `${env.dir}/pki`;
  return [
    '--advertise-address=127.0.0.1',
    '--bind-address=127.0.0.1',
    `--secure-port=${env.apiserverPort}`,
    `--etcd-servers=http://127.0.0.1:${ETCD_CLIENT_PORT}`,
    `--tls-cert-file=${pki}/server.crt`,
    `--tls-private-key-file=${pki}/server.key`,
    `--client-ca-file=${pki}/ca.crt`,
    `--kubelet-client-certificate=${pki}/admin.crt`,
    `--kubelet-client-key=${pki}/admin.key`,
    '--authorization-mode=Node,RBAC',
    // A real cluster's admission chain: the default plugins (ServiceAccount among them) plus
    // NodeRestriction, which holds the kubelet's node identity to its own node and mirror pods.
    '--enable-admission-plugins=NodeRestriction',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${pki}/sa.pub`,
    `--service-account-signing-key-file=${pki}/sa.key`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    // Two api-servers share the port while one hands over to the other (lastseen's overlap hand-over).
    '--permit-port-sharing',
    '--shutdown-watch-termination-grace-period=3s',
    '--cert-dir=/tmp',
  ];
}

function etcdPod(env: TestbedEnv) {
  const v = nodeDirVolume(env);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'etcd', namespace: 'kube-system', labels: { component: 'etcd', tier: 'control-plane' } },
    spec: {
      hostNetwork: true,
      priorityClassName: 'system-node-critical',
      containers: [
        {
          name: 'etcd',
          image: IMAGE('etcd'),
          imagePullPolicy: 'Never',
          command: [
            '/usr/local/bin/etcd',
            '--name=default',
            `--data-dir=${env.dir}/etcd-data`,
            `--listen-client-urls=http://127.0.0.1:${ETCD_CLIENT_PORT}`,
            `--advertise-client-urls=http://127.0.0.1:${ETCD_CLIENT_PORT}`,
            `--listen-peer-urls=http://127.0.0.1:${ETCD_PEER_PORT}`,
            `--initial-advertise-peer-urls=http://127.0.0.1:${ETCD_PEER_PORT}`,
            `--initial-cluster=default=http://127.0.0.1:${ETCD_PEER_PORT}`,
            '--log-level=warn',
          ],
          volumeMounts: [{ ...v.mount, readOnly: false }],
        },
      ],
      volumes: [v.volume],
    },
  };
}

function staticPod(env: TestbedEnv, name: string, image: string, command: string[]) {
  const v = nodeDirVolume(env);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'kube-system', labels: { component: name, tier: 'bootstrap' } },
    spec: {
      hostNetwork: true,
      priorityClassName: 'system-node-critical',
      containers: [{ name: image, image: IMAGE(image), imagePullPolicy: 'Never', command, volumeMounts: [v.mount] }],
      volumes: [v.volume],
    },
  };
}

export function schedulerCommand(env: TestbedEnv, port: number): string[] {
  const kc = `${env.dir}/scheduler.kubeconfig`;
  // Delegated authentication through the same kubeconfig: in a pod it would otherwise use the
  // `kubernetes` Service's address, which leads nowhere on the test bed (no kube-proxy).
  return [
    '/usr/local/bin/kube-scheduler',
    `--kubeconfig=${kc}`,
    `--authentication-kubeconfig=${kc}`,
    `--authorization-kubeconfig=${kc}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    '--leader-elect=true',
    '--permit-port-sharing',
  ];
}

export function controllerManagerCommand(env: TestbedEnv, port: number): string[] {
  return [
    '/usr/local/bin/kube-controller-manager',
    `--kubeconfig=${env.dir}/controller-manager.kubeconfig`,
    `--authentication-kubeconfig=${env.dir}/controller-manager.kubeconfig`,
    `--authorization-kubeconfig=${env.dir}/controller-manager.kubeconfig`,
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    `--root-ca-file=${env.dir}/pki/ca.crt`,
    `--service-account-private-key-file=${env.dir}/pki/sa.key`,
    '--use-service-account-credentials=true',
    '--leader-elect=true',
    '--permit-port-sharing',
    // No cloud, no node IPAM: the test bed's pods all use the host network.
    '--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle,-node-route-controller',
  ];
}

/** Static pods: etcd (stays) and the temporary control plane (`bootstrap-*`, removed once the DaemonSets serve). */
export function staticManifests(env: TestbedEnv): Record<string, object> {
  return {
    'etcd.yaml': etcdPod(env),
    'bootstrap-kube-apiserver.yaml': staticPod(env, 'bootstrap-kube-apiserver', 'kube-apiserver', ['/usr/local/bin/kube-apiserver', ...apiserverArgs(env)]),
    // Port 0: no serving port, so it never meets the self-hosted one's.
    'bootstrap-kube-scheduler.yaml': staticPod(
      env,
      'bootstrap-kube-scheduler',
      'kube-scheduler',
      schedulerCommand(env, 0).filter((a) => a !== '--permit-port-sharing'),
    ),
    'bootstrap-kube-controller-manager.yaml': staticPod(
      env,
      'bootstrap-kube-controller-manager',
      'kube-controller-manager',
      controllerManagerCommand(env, 0).filter((a) => a !== '--permit-port-sharing'),
    ),
  };
}

function heartbeatSidecar(env: TestbedEnv, probe: string) {
  return {
    name: 'lastseen-heartbeat',
    ...lastseenImage(env),
    restartPolicy: 'Always',
    // The sidecar's own bundle, as deploy/examples/parent-daemonset.yaml runs it.
    command: ['/nodejs/bin/node', '--max-semi-space-size=1', '/app/lastseen-heartbeat.mjs'],
    args: ['heartbeat', `--probe=${probe}`, '--probe-insecure', '--policy-file=/etc/lastseen/policy.yaml', `--ready-file=${READY_FILE}`],
    // The pod's Ready follows the sidecar's proof, as in the shipped recipes (deploy/components).
    readinessProbe: {
      exec: { command: ['/nodejs/bin/node', '--max-semi-space-size=1', '/app/lastseen-heartbeat.mjs', 'ready', `--ready-file=${READY_FILE}`] },
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 2,
    },
    env: [
      ...inClusterEnv(env),
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
      { name: 'LASTSEEN_PARENT_KEY', valueFrom: { fieldRef: { fieldPath: "metadata.labels['lastseen.dev/parent']" } } },
      { name: 'LASTSEEN_LABELS_FILE', value: '/etc/podinfo/labels' },
    ],
    // The probe reads which process holds the port (/proc/<pid>/fd of another user), as deploy/examples says.
    securityContext: {
      runAsUser: 0,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'], add: ['SYS_PTRACE', 'DAC_READ_SEARCH'] },
    },
    volumeMounts: [
      { name: 'lastseen-heartbeats', mountPath: '/run/lastseen/heartbeats' },
      { name: 'lastseen-policy', mountPath: '/etc/lastseen', readOnly: true },
      { name: 'podinfo', mountPath: '/etc/podinfo', readOnly: true },
      { name: 'lastseen-ready', mountPath: '/run/lastseen/ready' },
    ],
  };
}

/** Where the sidecar keeps its last proof for its readiness probe: an emptyDir of the pod's own. */
const READY_FILE = '/run/lastseen/ready/state';
const READY_VOLUME = { name: 'lastseen-ready', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } };

/** The cluster network is absent here (no kube-proxy): pods reach the api-server on the node's loopback. */
export function inClusterEnv(env: TestbedEnv) {
  return [
    { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
    { name: 'KUBERNETES_SERVICE_PORT', value: String(env.apiserverPort) },
  ];
}

function selfHosted(env: TestbedEnv, name: string, command: string[], probe: string, checkpoint: boolean) {
  const v = nodeDirVolume(env);
  const labels = { 'app.kubernetes.io/name': name, component: name, tier: 'control-plane', 'lastseen.dev/parent': name };
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name, namespace: 'kube-system', labels: { 'app.kubernetes.io/name': name } },
    spec: {
      selector: { matchLabels: { 'app.kubernetes.io/name': name } },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels, annotations: checkpoint ? { 'lastseen.dev/checkpoint': 'true' } : {} },
        spec: {
          hostNetwork: true,
          dnsPolicy: 'ClusterFirstWithHostNet',
          priorityClassName: 'system-node-critical',
          serviceAccountName: 'lastseen-heartbeat',
          // The heartbeat's probe counts the parent Ready only when a process of this pod holds the port.
          shareProcessNamespace: true,
          tolerations: [{ operator: 'Exists' }],
          terminationGracePeriodSeconds: 10,
          initContainers: [heartbeatSidecar(env, probe)],
          containers: [{ name, image: IMAGE(name), imagePullPolicy: 'Never', command, volumeMounts: [v.mount] }],
          volumes: [
            v.volume,
            { name: 'lastseen-heartbeats', hostPath: { path: '/run/lastseen/heartbeats', type: 'DirectoryOrCreate' } },
            { name: 'lastseen-policy', configMap: { name: 'lastseen-policy' } },
            { name: 'podinfo', projected: { sources: [{ downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } }] } },
            READY_VOLUME,
          ],
        },
      },
    },
  };
}

/** The probe port each shipped parent recipe (each deploy/components/parent-kube-apiserver, -scheduler, -controller-manager) assumes, and the test bed's. */
const RECIPE_PORTS: Record<(typeof RECIPE_PARENTS)[number], { shipped: number; testbed: (env: TestbedEnv) => number }> = {
  'kube-apiserver': { shipped: 6443, testbed: (env) => env.apiserverPort },
  'kube-scheduler': { shipped: 10259, testbed: () => SCHEDULER_PORT },
  'kube-controller-manager': { shipped: 10257, testbed: () => CONTROLLER_MANAGER_PORT },
};
const RECIPE_PARENTS = ['kube-apiserver', 'kube-scheduler', 'kube-controller-manager'] as const;

/**
 * The self-hosted control plane made a lastseen parent by the shipped recipes, as an operator does
 * it: bare DaemonSets (no sidecar, no port sharing, as bootkube renders them) with
 * deploy/components/parent-kube-system and parent-kube-{apiserver,scheduler,controller-manager}
 * applied by the real kustomize (`kubectl kustomize`). Then only what the test bed differs in:
 * the image it builds and imports itself (no registry), its ports (the recipes assume 6443, 10259
 * and 10257), and its policy (the recipe's plus the ready-proof demo's override).
 */
export function selfHostedFromComponents(env: TestbedEnv, policyYaml: string, handover: Handover = 'overlap'): object[] {
  const bare = RECIPE_PARENTS.map((name) => {
    const ds = selfHosted(env, name, bareCommand(env, name), '', true) as ReturnType<typeof selfHosted>;
    const t = ds.spec.template as { metadata: { labels: Record<string, string>; annotations: Record<string, string> } };
    t.metadata = { labels: { 'app.kubernetes.io/name': name, component: name, tier: 'control-plane' }, annotations: {} };
    const spec = ds.spec.template.spec as unknown as Record<string, unknown> & { volumes: Array<{ name: string }> };
    for (const k of ['serviceAccountName', 'shareProcessNamespace', 'initContainers']) delete spec[k];
    spec.volumes = spec.volumes.filter((v) => v.name === 'node-dir');
    return ds;
  });
  const dir = mkdtempSync(join(tmpdir(), 'lastseen-testbed-recipes-'));
  let rendered: string;
  try {
    writeFileSync(join(dir, 'control-plane.yaml'), bare.map((o) => stringify(o)).join('---\n'));
    // kustomize takes components by relative path only.
    const recipes = ['parent-kube-system', ...RECIPE_PARENTS.map((n) => `parent-${n}`), ...(handover === 'redirect' ? ['parent-kube-apiserver-redirect'] : [])];
    const components = recipes.map((c) => relative(dir, join(REPO, 'deploy', 'components', c)));
    writeFileSync(join(dir, 'kustomization.yaml'), stringify({ resources: ['control-plane.yaml'], components }));
    rendered = execFileSync(env.kubectl, ['kustomize', dir], { encoding: 'utf8', maxBuffer: 16 << 20 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const objects = parseAllDocuments(rendered).map((d) => d.toJSON() as RecipeObject);
  for (const o of objects) {
    if (o.kind === 'ConfigMap' && o.metadata.name === 'lastseen-policy') o.data = { 'policy.yaml': policyYaml };
    const name = o.metadata.name as (typeof RECIPE_PARENTS)[number];
    if (o.kind !== 'DaemonSet' || !RECIPE_PARENTS.includes(name)) continue;
    const ports = RECIPE_PORTS[name];
    const sidecar = o.spec?.template.spec.initContainers?.find((c) => c.name === 'lastseen-heartbeat');
    if (!sidecar) throw new Error(`deploy/components/parent-${name} gave the ${name} DaemonSet no lastseen-heartbeat sidecar`);
    Object.assign(sidecar, lastseenImage(env));
    const probe = sidecar.args?.findIndex((a) => a.startsWith('--probe=')) ?? -1;
    const shipped = `:${ports.shipped}/`;
    if (probe < 0 || !sidecar.args?.[probe]?.includes(shipped)) throw new Error(`the ${name} recipe's sidecar does not probe port ${ports.shipped}`);
    sidecar.args[probe] = sidecar.args[probe].replace(shipped, `:${ports.testbed(env)}/`);
    for (const e of sidecar.env ?? []) if (e.name === 'KUBERNETES_SERVICE_PORT') e.value = String(env.apiserverPort);
    if (handover === 'redirect' && name === 'kube-apiserver') {
      // The recipe's sidecar probes 127.0.0.2 (the address the redirect never moves): the
      // api-server must accept connections there, so it binds every address, not the loopback one.
      const main = o.spec?.template.spec.containers?.[0];
      const at = main?.command?.indexOf('--bind-address=127.0.0.1') ?? -1;
      if (!main?.command || at < 0) throw new Error('the kube-apiserver DaemonSet has no --bind-address=127.0.0.1 to widen');
      main.command[at] = '--bind-address=0.0.0.0';
    }
  }
  return objects;
}

/** How the test bed's policy hands the self-hosted api-server over (the scheduler and controller-manager stay on overlap). */
export type Handover = 'overlap' | 'redirect';

/** The copy's own port under `handover: redirect` on the test bed (its api-server port is 16443, the recipe's default copy port). */
export const REDIRECT_COPY_PORT = 17443;

/**
 * The test bed's policy with kube-apiserver handed over by redirect: its override gets
 * `handover: redirect` and the bed's ports (the parent on the bed's api-server port, the copy on
 * REDIRECT_COPY_PORT; the excepted address is the default, 127.0.0.2).
 */
export function redirectPolicy(env: TestbedEnv, policyYaml: string): string {
  const doc = parseDocument(policyYaml);
  const overrides = doc.get('overrides') as YAMLSeq<YAMLMap> | undefined;
  const api = overrides?.items.find((o) => o.get('name') === 'kube-apiserver');
  if (!api) throw new Error('the test bed policy has no kube-apiserver override');
  api.setIn(['policy', 'handover'], 'redirect');
  api.setIn(['policy', 'redirect'], doc.createNode({ port: env.apiserverPort, copyPort: REDIRECT_COPY_PORT }, { flow: true }));
  return doc.toString();
}

/** The test beds' policy (deploy/overlays/testbed/policy.yaml), kube-apiserver handed over as `handover` says. */
export function testbedPolicy(env: TestbedEnv, handover: Handover): string {
  const policy = readFileSync(join(REPO, 'deploy', 'overlays', 'testbed', 'policy.yaml'), 'utf8');
  return handover === 'redirect' ? redirectPolicy(env, policy) : policy;
}

/** Rendered deploy objects (`from`: the overlay, for the error) with their lastseen-policy ConfigMap holding `policyYaml`. */
export function withPolicy(docs: Array<{ kind?: string; metadata?: { name?: string }; data?: unknown }>, policyYaml: string, from: string): void {
  const cm = docs.find((o) => o?.kind === 'ConfigMap' && o.metadata?.name === 'lastseen-policy');
  if (!cm) throw new Error(`${from} rendered no lastseen-policy ConfigMap`);
  cm.data = { 'policy.yaml': policyYaml };
}

/** A pod whose lastseen-heartbeat sidecar (an init container that keeps running) has started: its kubelet runs the pod. */
export function heartbeatStarted(p: { status?: { initContainerStatuses?: Array<{ state?: { running?: unknown } }> } }): boolean {
  return (p.status?.initContainerStatuses ?? []).some((c) => c.state?.running);
}

type RecipeObject = {
  kind: string;
  metadata: { name: string };
  data?: Record<string, string>;
  spec?: {
    template: {
      spec: {
        initContainers?: Array<{ name: string; image?: string; imagePullPolicy?: string; args?: string[]; env?: Array<{ name: string; value?: string }> }>;
        containers?: Array<{ name: string; command?: string[] }>;
      };
    };
  };
};

/** A component's command as it runs before lastseen: the recipe adds --permit-port-sharing itself. */
function bareCommand(env: TestbedEnv, name: (typeof RECIPE_PARENTS)[number]): string[] {
  const full =
    name === 'kube-apiserver'
      ? ['/usr/local/bin/kube-apiserver', ...apiserverArgs(env)]
      : name === 'kube-scheduler'
        ? schedulerCommand(env, SCHEDULER_PORT)
        : controllerManagerCommand(env, CONTROLLER_MANAGER_PORT);
  return full.filter((a) => a !== '--permit-port-sharing');
}

/** The ready-proof parent's port on the node's loopback (host network, like the control plane). */
export const DEMO_PORT = 18080;
export const DEMO_NAME = 'ready-proof-demo';

/**
 * The main process of the ready-proof parent (test/node/ready-proof.test.ts), run by the lastseen
 * image's Node.js. `serve`: answer on DEMO_PORT with SO_REUSEPORT (so a successor can bind beside
 * its checkpoint, as the overlap hand-over needs). `crash`: wait until someone answers on the port
 * (the checkpoint), then bind it without SO_REUSEPORT, fail with EADDRINUSE and exit 1, as a
 * parent does whose checkpoint still holds its port; the kubelet restarts it, again and again.
 * `exclusive`: serve without SO_REUSEPORT after 2 s (reading its config, as a server does), so a
 * copy of it holds the port alone and a successor beside that copy fails with EADDRINUSE: the
 * policy's `handover: overlap` for a parent that cannot share its port
 * (test/node/overlap-unavailable.test.ts).
 */
const DEMO_SCRIPT = `
const http = require('node:http');
const port = ${DEMO_PORT};
if (process.env.MODE === 'crash') {
  const attempt = () => http.get({ host: '127.0.0.1', port, path: '/' }, (res) => {
    res.resume();
    const s = http.createServer();
    s.on('error', (e) => { console.error('listen ' + e.code + ': ' + e.message); process.exit(1); });
    s.listen({ port, host: '127.0.0.1' }, () => { console.error('bound: nobody held the port; crashing anyway'); process.exit(1); });
  }).on('error', () => setTimeout(attempt, 200));
  attempt();
} else if (process.env.MODE === 'exclusive') {
  setTimeout(() => {
    const s = http.createServer((_req, res) => res.end('ok'));
    s.on('error', (e) => { console.error('listen ' + e.code + ': ' + e.message); process.exit(1); });
    s.listen({ port, host: '127.0.0.1' }, () => console.log('serving on ' + port + ', not shared'));
  }, 2000);
} else {
  http.createServer((_req, res) => res.end('ok')).listen({ port, host: '127.0.0.1', reusePort: true }, () => console.log('serving on ' + port));
}
`;

/** A small parent in kube-system (the heartbeat's account, role and policy are there), on DEMO_PORT. */
export function demoParent(env: TestbedEnv, mode: 'serve' | 'crash' | 'exclusive') {
  const labels = { 'app.kubernetes.io/name': DEMO_NAME, 'lastseen.dev/parent': DEMO_NAME };
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: DEMO_NAME, namespace: 'kube-system', labels: { 'app.kubernetes.io/name': DEMO_NAME } },
    spec: {
      selector: { matchLabels: { 'app.kubernetes.io/name': DEMO_NAME } },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels, annotations: { 'lastseen.dev/checkpoint': 'true' } },
        spec: {
          hostNetwork: true,
          dnsPolicy: 'ClusterFirstWithHostNet',
          serviceAccountName: 'lastseen-heartbeat',
          shareProcessNamespace: true,
          // Exclusive: every taint a control-plane node may carry, but not one a test sets
          // (overlap-unavailable.test.ts holds the DaemonSet's next pod off the node with it).
          tolerations:
            mode === 'exclusive'
              ? [
                  { operator: 'Exists', effect: 'NoExecute' },
                  ...['node-role.kubernetes.io/control-plane', 'node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable'].map((key) => ({
                    key,
                    operator: 'Exists',
                  })),
                ]
              : [{ operator: 'Exists' }],
          terminationGracePeriodSeconds: 5,
          initContainers: [heartbeatSidecar(env, `http://127.0.0.1:${DEMO_PORT}/`)],
          containers: [
            {
              name: 'app',
              ...lastseenImage(env),
              command: ['/nodejs/bin/node', '-e', DEMO_SCRIPT],
              env: [{ name: 'MODE', value: mode }],
            },
          ],
          volumes: [
            { name: 'lastseen-heartbeats', hostPath: { path: '/run/lastseen/heartbeats', type: 'DirectoryOrCreate' } },
            { name: 'lastseen-policy', configMap: { name: 'lastseen-policy' } },
            { name: 'podinfo', projected: { sources: [{ downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } }] } },
            READY_VOLUME,
          ],
        },
      },
    },
  };
}
