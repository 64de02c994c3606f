// The small demo parent (test/node/manifests.ts demoParent) as the real-node tests that use it see
// it: whether its port answers, its pods, and the beats on its Lease.
import { request } from 'node:http';
import { afterAll, beforeAll } from 'vitest';
import { DEMO_NAME, DEMO_PORT } from './manifests.js';
import { realNodeTestbed, type Testbed } from './testbed.js';

/** For a test file: a fresh node with a bootstrapped, self-hosted control plane and lastseen, down again after. */
export function withBootstrappedNode(set: (tb: Testbed) => void): void {
  let tb: Testbed | undefined;
  beforeAll(async () => {
    tb = realNodeTestbed();
    set(tb);
    await tb.fresh(true);
  });
  afterAll(async () => {
    await tb?.node('down');
  });
}

/** The demo port answers 200 within 1 s (whoever serves it). */
export function demoAnswers(): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port: DEMO_PORT, path: '/', timeout: 1000, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

export interface DemoPod {
  name: string;
  uid: string;
  restarts: number;
}

/** The demo DaemonSet's pods (not the checkpoint's mirror pod, not one being deleted). */
export async function demoPods(tb: Testbed): Promise<DemoPod[]> {
  const pods = JSON.parse(await tb.kubectl(['get', 'pods', '-n', 'kube-system', '-l', `app.kubernetes.io/name=${DEMO_NAME}`, '-o', 'json'])).items as Array<{
    metadata: { name: string; uid: string; annotations?: Record<string, string>; deletionTimestamp?: string };
    status?: { containerStatuses?: Array<{ name: string; restartCount: number }> };
  }>;
  return pods
    .filter((p) => !p.metadata.annotations?.['kubernetes.io/config.mirror'] && !p.metadata.deletionTimestamp)
    .map((p) => ({ name: p.metadata.name, uid: p.metadata.uid, restarts: p.status?.containerStatuses?.find((c) => c.name === 'app')?.restartCount ?? 0 }));
}

/** The parent's Lease (or its checkpoint's) as the agent reads it: who wrote the last beat and its phase. */
export async function demoLeaseBeat(tb: Testbed, role: 'parent' | 'checkpoint' = 'parent'): Promise<{ holder: string; phase: string } | null> {
  try {
    const name = `${DEMO_NAME}.${tb.env.nodeName}${role === 'checkpoint' ? '.checkpoint' : ''}`;
    const l = JSON.parse(await tb.kubectl(['get', 'lease', '-n', 'kube-system', name, '-o', 'json']));
    return { holder: l.spec.holderIdentity, phase: l.metadata.annotations['lastseen.dev/phase'] };
  } catch {
    return null;
  }
}
