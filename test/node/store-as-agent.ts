// Run by agent-caps.test.ts under a reduced capability set: the store's work for a non-root
// parent's copy (save, a mode put back on read, a token replaced in place), as the agent does it.
// Prints one JSON line: { ok: true } or { ok: false, error }.
import { chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { capture } from '../../src/checkpoint/capture.js';
import { memoryResolver, parentPod } from '../../src/checkpoint/fixtures.test-helpers.js';
import { Store } from '../../src/checkpoint/store.js';
import { tokenCopy } from '../../src/checkpoint/tokens.js';

const stateDir = process.argv[2];
if (!stateDir) throw new Error('usage: store-as-agent.ts STATE_DIR');
const ID = 'kube-system/kube-apiserver';
try {
  const pod = parentPod();
  pod.spec!.securityContext = { runAsUser: 1000, fsGroup: 1000 };
  const store = new Store({ stateDir });
  const r = await capture(
    pod,
    { parentKey: 'kube-apiserver', node: 'node-a', checkpointDir: store.checkpointDir(ID), capturedAt: new Date().toISOString(), lastReadyAt: null },
    memoryResolver(),
  );
  await store.save(ID, r.capture, r.data);
  const token = 'projected/kube-api-access/token';
  await chmod(join(store.checkpointDir(ID), token), 0o600); // a mode changed behind its back
  if (!(await store.load(ID))) throw new Error('the copy did not load');
  const fresh = Buffer.from('fresh-token');
  await store.replaceToken(ID, tokenCopy(token, { namespace: 'kube-system', name: 'kube-apiserver', expirationSeconds: 3607 }, fresh, Date.now()), fresh);
  if (!(await store.load(ID))) throw new Error('the copy did not load after the token was replaced');
  console.log(JSON.stringify({ ok: true }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: (e as Error).message }));
}
