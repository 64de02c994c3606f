import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Lease, type V1Pod, Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ANNOTATION_SEQUENCE, leaseName } from '../../src/core/names.js';
import { type FaultSetup, faultSetup, KEY, sleep } from './fault-helpers.js';
import { apiserverPid, kubeConfigFor, waitFor } from './harness.js';

const POLICY = '{ interval: 250ms, window: 2s, startupGrace: 2s, channels: [lease, annotation, local] }';

interface Seen {
  what: 'lease' | 'pod';
  sequence: number;
  resourceVersion: string;
}

/** Every version of the parent's Lease and pod the api-server stores, from now on, in its order. */
async function watchSequences(s: FaultSetup): Promise<{ seen: Seen[]; ended: unknown[]; stop(): void }> {
  const kc = kubeConfigFor('admin');
  const seen: Seen[] = [];
  const ended: unknown[] = [];
  const record = (what: Seen['what'], o: V1Lease | V1Pod) => {
    const v = o.metadata?.annotations?.[ANNOTATION_SEQUENCE];
    if (v !== undefined) seen.push({ what, sequence: Number(v), resourceVersion: String(o.metadata?.resourceVersion) });
  };
  const lease = await new Watch(kc).watch(
    `/apis/coordination.k8s.io/v1/namespaces/${s.ns}/leases`,
    { fieldSelector: `metadata.name=${leaseName(KEY, s.node)}` },
    (_type: string, o: V1Lease) => record('lease', o),
    (err: unknown) => ended.push(err),
  );
  const pod = await new Watch(kc).watch(
    `/api/v1/namespaces/${s.ns}/pods`,
    { fieldSelector: `metadata.name=${s.pod.name}` },
    (_type: string, o: V1Pod) => record('pod', o),
    (err: unknown) => ended.push(err),
  );
  return {
    seen,
    ended,
    stop() {
      lease.abort();
      pod.abort();
    },
  };
}

/** Where the sequence went back between two stored versions, if it did. */
function wentBack(seen: Seen[], what: Seen['what']): string[] {
  const mine = seen.filter((x) => x.what === what);
  const back: string[] = [];
  mine.forEach((x, i) => {
    const prev = mine[i - 1];
    if (prev && x.sequence < prev.sequence) back.push(`${prev.sequence} -> ${x.sequence} (resourceVersion ${x.resourceVersion})`);
  });
  return back;
}

describe('late writes from a frozen api-server', () => {
  it('never move a stored sequence back: Lease and annotation, 5 s frozen while beating every 250 ms', async () => {
    const s = await faultSetup('late-writes', { policy: POLICY });
    const hb = s.heartbeat('lease,annotation,local');
    const w = await watchSequences(s);
    try {
      await waitFor(() => (w.seen.some((x) => x.what === 'lease') && w.seen.some((x) => x.what === 'pod')) || undefined, {
        timeoutMs: 30_000,
        what: 'the first Lease and annotation beats',
      });
      await sleep(1000);
      const pid = await apiserverPid();
      const before = w.seen.length;
      process.kill(pid, 'SIGSTOP');
      try {
        await sleep(5000);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      // The queued writes land, then the writer goes on: wait for rounds well past the freeze.
      const frozenAt = Math.max(...w.seen.slice(0, before).map((x) => x.sequence));
      await waitFor(() => (['lease', 'pod'] as const).every((what) => w.seen.some((x) => x.what === what && x.sequence > frozenAt + 30)) || undefined, {
        timeoutMs: 60_000,
        what: `beats past sequence ${frozenAt + 30} on both api channels after the thaw`,
      });
      await sleep(1000);
      expect(w.ended).toEqual([]);
      expect({ lease: wentBack(w.seen, 'lease'), pod: wentBack(w.seen, 'pod') }).toEqual({ lease: [], pod: [] });
      // The freeze did queue rounds (else this test proves nothing): the sequences stored right
      // after the thaw jump past the ones before it.
      const firstAfter = (what: Seen['what']) => w.seen.slice(before).find((x) => x.what === what)?.sequence ?? 0;
      expect(firstAfter('lease')).toBeGreaterThan(frozenAt);
      expect(firstAfter('pod')).toBeGreaterThan(frozenAt);

      const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
      await core.patchNamespacedPod(
        { name: s.pod.name, namespace: s.ns, body: { metadata: { annotations: { [ANNOTATION_SEQUENCE]: '999999' } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const afterOverwrite = () => {
        const i = w.seen.findIndex((x) => x.what === 'pod' && x.sequence === 999999);
        return i < 0 ? [] : w.seen.slice(i + 1).filter((x) => x.what === 'pod');
      };
      const own = await waitFor(() => (afterOverwrite().length >= 3 ? afterOverwrite() : undefined), {
        timeoutMs: 30_000,
        what: "three of the writer's own annotation beats after the overwrite",
      });
      expect(own.every((x) => x.sequence < 999999)).toBe(true);
      expect(wentBack(own, 'pod')).toEqual([]);
    } finally {
      w.stop();
      await hb.stop('SIGTERM');
      await s.agent.stop();
    }
  });
});
