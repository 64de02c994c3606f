// The agent's NodeCheckpoint is owned by its Node, so the cluster's garbage collector (the
// api-server's word) removes it with the Node; with no Node to read it is created without an owner.
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { monotonicClock, realTimers } from '../../src/agent/agent.js';
import { StatusWriter } from '../../src/agent/status.js';
import { kubectl, kubeConfigFor } from './harness.js';

const RUN = Math.random().toString(36).slice(2, 8);
const WITH_NODE = `owned-${RUN}`;
const WITHOUT_NODE = `unowned-${RUN}`;

afterAll(async () => {
  await kubectl(['delete', 'nodecheckpoint', WITH_NODE, WITHOUT_NODE, '--ignore-not-found']);
  await kubectl(['delete', 'node', WITH_NODE, '--ignore-not-found']);
});

async function written(node: string): Promise<{ metadata: { ownerReferences?: Array<{ kind: string; name: string; uid: string }> } }> {
  const kc = kubeConfigFor('admin');
  const w = new StatusWriter({
    node,
    kubeConfig: kc,
    views: () => [],
    conditions: () => [],
    clock: monotonicClock,
    timers: realTimers,
    logger: pino({ level: 'silent' }),
  });
  await w.flush();
  expect(w.writes).toBe(1);
  const api = kc.makeApiClient(CustomObjectsApi);
  return (await api.getClusterCustomObject({ group: 'lastseen.dev', version: 'v1alpha1', plural: 'nodecheckpoints', name: node })) as never;
}

describe('NodeCheckpoint owner', () => {
  it('is the Node when the agent can read it, and none when there is no Node', async () => {
    const node = await kubeConfigFor('admin')
      .makeApiClient(CoreV1Api)
      .createNode({ body: { apiVersion: 'v1', kind: 'Node', metadata: { name: WITH_NODE } } });
    expect((await written(WITH_NODE)).metadata.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Node', name: WITH_NODE, uid: node.metadata!.uid! }]);
    expect((await written(WITHOUT_NODE)).metadata.ownerReferences).toBeUndefined();
  });
});
