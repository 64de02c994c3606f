// A non-root parent's checkpoint on a real kubelet (its copies get the owner and modes its own volumes give it): the parent runs as uid 1000
// with fsGroup 1000 and mounts a Secret and the usual kube-api-access volume; lastseen captures it
// (the library the agent uses, run here as root, as the agent is) and the kubelet runs the copy as a
// static pod. The copy must read its files, and see each with the owner, group and mode the parent
// sees in its own volumes. Before, the copies were root's 0600 files in 0700 folders (hostPath
// volumes honour neither fsGroup nor defaultMode), and the copy failed with EACCES.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeResolver } from '../../src/agent/actuators.js';
import { capture } from '../../src/checkpoint/capture.js';
import { ManifestDir } from '../../src/checkpoint/manifests.js';
import { Store } from '../../src/checkpoint/store.js';
import { makeKubeClient } from '../../src/kube/client.js';
import { lastseenImage, staticManifests } from './manifests.js';
import { CHECKPOINTS, log, MANIFESTS, realNodeTestbed, type Testbed } from './testbed.js';

const NS = 'copies';
const PARENT = 'reader';
const MARK = 'COPIES ';
/** Prints, once, who the container runs as and how it sees each mounted file; then idles. */
const READER = `
const fs = require('fs');
const see = (p) => { try { const s = fs.statSync(p); return { mode: (s.mode & 0o7777).toString(8), uid: s.uid, gid: s.gid, text: fs.readFileSync(p, 'utf8').slice(0, 16) }; } catch (e) { return { error: e.code }; } };
console.log(${JSON.stringify(MARK)} + JSON.stringify({ uid: process.getuid(), key: see('/etc/demo-secret/key'), token: see('/var/run/secrets/kubernetes.io/serviceaccount/token'), ca: see('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt') }));
setInterval(() => {}, 1 << 30);
`;

let tb: Testbed;
let lastProblem = '';

/** Waits for `pod` to print; on a timeout, says what kubectl and the pod's status said. */
async function waitSeen(pod: string): Promise<Record<string, unknown>> {
  try {
    await tb.waitFor(`${pod} to print what it sees`, 120, () => seen(pod) !== undefined);
  } catch (e) {
    const status = await tb.kubectl(['get', 'pod', '-n', NS, pod, '-o', 'jsonpath={.status}']).catch((err: Error) => err.message);
    throw new Error(`${(e as Error).message}; ${lastProblem}; status: ${status}`);
  }
  return seen(pod)!;
}
beforeAll(() => {
  tb = realNodeTestbed();
});
afterAll(async () => {
  await tb?.node('down');
});

/**
 * What the container of `pod` printed, parsed (undefined until it has). Read from the kubelet's log
 * folder: the test-bed node has no address, so the api-server cannot proxy `kubectl logs`.
 */
function seen(pod: string): Record<string, unknown> | undefined {
  const root = join(tb.env.dir, 'pod-logs');
  const dirs = existsSync(root) ? readdirSync(root).filter((d) => d.startsWith(`${NS}_${pod}_`)) : [];
  lastProblem = dirs.length === 0 ? `no log folder ${NS}_${pod}_* in ${root}` : '';
  for (const d of dirs) {
    const folder = join(root, d, 'app');
    for (const f of existsSync(folder) ? readdirSync(folder) : []) {
      // CRI log lines: `<time> stdout F <text>`.
      const line = readFileSync(join(folder, f), 'utf8')
        .split('\n')
        .map((l) => l.split(' ').slice(3).join(' '))
        .find((l) => l.startsWith(MARK));
      if (line) return JSON.parse(line.slice(MARK.length));
      lastProblem = `${join(folder, f)} holds no line starting ${MARK.trim()}`;
    }
  }
  return undefined;
}

describe('a non-root parent’s copies on a real kubelet', () => {
  it('the checkpoint of a runAsUser 1000 / fsGroup 1000 parent reads its Secret and token, seen as the parent sees its own', async () => {
    await tb.node('down');
    await tb.node('up');
    // Only the temporary control plane: an api-server to capture from, a controller-manager for
    // the namespace's ServiceAccount and kube-root-ca.crt.
    for (const [name, obj] of Object.entries(staticManifests(tb.env))) tb.writeStatic(name, obj);
    await tb.waitFor('the bootstrap api-server', 180, () => tb.readyz());
    await tb.apply([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }]);
    await tb.waitFor(
      `the default ServiceAccount and kube-root-ca.crt in ${NS}`,
      120,
      async () => (await tb.kubectl(['get', 'sa/default', 'configmap/kube-root-ca.crt', '-n', NS, '-o', 'name'])).split('\n').filter(Boolean).length === 2,
    );
    await tb.apply([
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'demo-secret', namespace: NS }, stringData: { key: 'demo-value' } },
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: PARENT, namespace: NS, labels: { 'lastseen.dev/parent': PARENT } },
        spec: {
          nodeName: tb.env.nodeName,
          hostNetwork: true,
          securityContext: { runAsUser: 1000, fsGroup: 1000 },
          containers: [
            {
              name: 'app',
              ...lastseenImage(tb.env),
              command: ['/nodejs/bin/node', '-e', READER],
              volumeMounts: [{ name: 'demo-secret', mountPath: '/etc/demo-secret', readOnly: true }],
            },
          ],
          volumes: [{ name: 'demo-secret', secret: { secretName: 'demo-secret' } }],
        },
      },
    ]);
    const parentSees = await waitSeen(PARENT);
    log(`the parent sees ${JSON.stringify(parentSees)}`);
    expect(parentSees).toMatchObject({ uid: 1000, key: { text: 'demo-value' } });

    // Capture and activate, as the agent's actuators do.
    const kc = new KubeConfig();
    kc.loadFromFile(tb.env.kubeconfig);
    const kube = makeKubeClient(kc, { requestTimeoutMs: 10_000 });
    const id = `${NS}/${PARENT}`;
    const store = new Store();
    try {
      const pod: V1Pod = await kc.makeApiClient(CoreV1Api).readNamespacedPod({ name: PARENT, namespace: NS });
      expect(pod.spec?.volumes?.some((v) => v.name.startsWith('kube-api-access-'))).toBe(true);
      const r = await capture(
        pod,
        { parentKey: PARENT, node: tb.env.nodeName, checkpointDir: store.checkpointDir(id), capturedAt: new Date().toISOString(), lastReadyAt: null },
        kubeResolver(kube, tb.env.nodeName),
      );
      await store.save(id, r.capture, r.data);
    } finally {
      kube.close();
    }
    // The parent goes (the usual reason a checkpoint runs); its copy takes over as a static pod.
    await tb.kubectl(['delete', 'pod', '-n', NS, PARENT, '--wait=false']);
    const copy = await store.load(id);
    await new ManifestDir({ dir: MANIFESTS }).activate(id, copy!.manifest);
    const mirror = `${PARENT}-${tb.env.nodeName}`;
    const t0 = Date.now();
    const copySees = await waitSeen(mirror);
    log(`the checkpoint sees ${JSON.stringify(copySees)} (${((Date.now() - t0) / 1000).toFixed(1)}s after its manifest)`);

    // The copy reads every file, each with the owner, group and mode the parent saw in its own volumes.
    expect(copySees).toEqual(parentSees);
    // And on the host nobody but root gets near them: the checkpoint folder and the data folders are 0700 root.
    for (const rel of ['', 'secrets', 'projected']) {
      const st = statSync(join(CHECKPOINTS, `${NS}_${PARENT}`, rel));
      expect([rel, (st.mode & 0o7777).toString(8), st.uid]).toEqual([rel, '700', 0]);
    }
  });
});
