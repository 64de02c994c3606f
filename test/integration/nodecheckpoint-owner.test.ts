// The agent's NodeCheckpoint is owned by its Node, so the cluster's garbage collector (the
// api-server's word) removes it with the Node; with no Node to read it is created without an owner,
// and the owner is added on a later status write once the Node can be read.
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { realTimers } from '../../src/agent/agent.js';
import { OWNER_RETRY_MS, StatusWriter } from '../../src/agent/status.js';
import { kubeConfigFor, kubectl } from './harness.js';

const RUN = Math.random().toString(36).slice(2, 8);
const WITH_NODE = `owned-${RUN}`;
const WITHOUT_NODE = `unowned-${RUN}`;
const LATE_NODE = `late-${RUN}`;

afterAll(async () => {
  await kubectl(['delete', 'nodecheckpoint', WITH_NODE, WITHOUT_NODE, LATE_NODE, '--ignore-not-found']);
  await kubectl(['delete', 'node', WITH_NODE, LATE_NODE, '--ignore-not-found']);
});

type Owned = { metadata: { ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string }> } };
let fakeNow = 0;

function writer(node: string): StatusWriter {
  return new StatusWriter({
    node,
    kubeConfig: kubeConfigFor('admin'),
    views: () => [],
    conditions: () => [],
    clock: { now: () => fakeNow },
    timers: realTimers,
    logger: pino({ level: 'silent' }),
  });
}

/** One status write by `w`, then the NodeCheckpoint as the api-server has it. */
async function written(node: string, w = writer(node)): Promise<Owned> {
  const before = w.writes;
  await w.flush();
  expect(w.writes).toBe(before + 1);
  const api = kubeConfigFor('admin').makeApiClient(CustomObjectsApi);
  return (await api.getClusterCustomObject({ group: 'lastseen.dev', version: 'v1alpha1', plural: 'nodecheckpoints', name: node })) as Owned;
}

const createNode = (name: string) =>
  kubeConfigFor('admin')
    .makeApiClient(CoreV1Api)
    .createNode({ body: { apiVersion: 'v1', kind: 'Node', metadata: { name } } });

describe('NodeCheckpoint owner', () => {
  it('is the Node when the agent can read it, and none when there is no Node', async () => {
    const node = await createNode(WITH_NODE);
    expect((await written(WITH_NODE)).metadata.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Node', name: WITH_NODE, uid: node.metadata!.uid! }]);
    expect((await written(WITHOUT_NODE)).metadata.ownerReferences).toBeUndefined();
  });

  it('created without one (no Node to read yet), gets its owner on a later write once the Node exists', async () => {
    const w = writer(LATE_NODE);
    expect((await written(LATE_NODE, w)).metadata.ownerReferences).toBeUndefined();
    const node = await createNode(LATE_NODE);
    // Not read again before OWNER_RETRY_MS: a status write costs no extra request meanwhile.
    expect((await written(LATE_NODE, w)).metadata.ownerReferences).toBeUndefined();
    fakeNow += OWNER_RETRY_MS;
    expect((await written(LATE_NODE, w)).metadata.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Node', name: LATE_NODE, uid: node.metadata!.uid! }]);
  });
});
