// The policy observer: the shared tracker (valid -> emitted once; invalid -> refused, last good
// kept; missing -> last good kept, defaults only without one), the file source over a temp folder,
// and the ConfigMap source over a scripted informer transport.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeTime, memoryLogger } from '../../core/fake-time.test-helpers.js';
import type { InformerTransport } from '../../kube/informer.js';
import { defaultPolicy, type Policy, type PolicyError, parsePolicyText } from '../../policy/policy.js';
import { configMapPolicySource, filePolicySource, type LastGoodPolicy } from './policy-source.js';

const head = 'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\n';
const GOOD_10S = `${head}defaults: { interval: 10s, window: 40s, startupGrace: 60s }\n`;
const GOOD_2S = `${head}defaults: { interval: 2s, window: 8s }\n`;
const BAD_WINDOW = `${head}defaults: { interval: 10s, window: 15s }\n`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lastseen-policy-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Recorded =
  | { type: 'policy'; policy: Policy; origin: string }
  | { type: 'invalid'; errors: PolicyError[]; origin: string }
  | { type: 'missing'; origin: string; using: 'last-good' | 'defaults' };

function recorder() {
  const events: Recorded[] = [];
  const texts: string[] = [];
  return {
    events,
    texts,
    onPolicy: (policy: Policy, origin: string, text?: string) => {
      events.push({ type: 'policy', policy, origin });
      if (text !== undefined) texts.push(text);
    },
    onInvalid: (errors: PolicyError[], origin: string) => events.push({ type: 'invalid', errors, origin }),
    onMissing: (origin: string, using: 'last-good' | 'defaults') => events.push({ type: 'missing', origin, using }),
  };
}

async function fileSource(lastGood: LastGoodPolicy | null = null) {
  const time = new FakeTime();
  const { log, records } = await memoryLogger();
  const r = recorder();
  const path = join(dir, 'policy.yaml');
  const src = filePolicySource({ path, log, timers: time, lastGood, ...r });
  return { time, src, path, records, events: r.events, texts: r.texts };
}

function policyOf(text: string): Policy {
  const r = parsePolicyText(text);
  if (!r.ok) throw new Error('test policy invalid');
  return r.policy;
}

describe('file policy source', () => {
  it('starts with the defaults; a valid file is emitted once, unchanged re-reads emit nothing', async () => {
    const { src, path, events } = await fileSource();
    expect(src.current()).toEqual(defaultPolicy());
    expect(src.isValid()).toBe(true);
    await writeFile(path, GOOD_10S);
    await src.checkNow();
    await src.checkNow();
    await writeFile(path, `# a comment only\n${GOOD_10S}`);
    await src.checkNow();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'policy', origin: `file ${path}` });
    expect(src.current().defaults.intervalMs).toBe(10_000);
  });

  it('refuses an invalid policy with field paths, once per distinct text, and keeps the last good', async () => {
    const { src, path, events, records } = await fileSource();
    await writeFile(path, GOOD_10S);
    await src.checkNow();
    await writeFile(path, BAD_WINDOW);
    await src.checkNow();
    await src.checkNow();
    expect(events.map((e) => e.type)).toEqual(['policy', 'invalid']);
    const bad = events[1];
    expect(bad?.type === 'invalid' && bad.errors.map((e) => e.path)).toEqual(['defaults.window']);
    expect(src.isValid()).toBe(false);
    expect(src.current().defaults.intervalMs).toBe(10_000);
    expect(records.find((r) => r.msg === 'policy refused; keeping the last valid one')).toMatchObject({ errors: [{ path: 'defaults.window' }] });
    // Not YAML at all: refused too, with a position.
    await writeFile(path, 'defaults: [\n');
    await src.checkNow();
    const notYaml = events[2];
    expect(notYaml?.type === 'invalid' && notYaml.errors[0]?.message).toMatch(/not valid YAML/);
    expect(src.current().defaults.intervalMs).toBe(10_000);
  });

  it('the same good policy after an invalid one is emitted again (validity regained)', async () => {
    const { src, path, events } = await fileSource();
    await writeFile(path, GOOD_10S);
    await src.checkNow();
    await writeFile(path, BAD_WINDOW);
    await src.checkNow();
    await writeFile(path, GOOD_10S);
    await src.checkNow();
    expect(events.map((e) => e.type)).toEqual(['policy', 'invalid', 'policy']);
    expect(src.isValid()).toBe(true);
  });

  it('a missing file with no last good policy gives the built-in defaults (valid), said once as missing', async () => {
    const { src, events, records } = await fileSource();
    await src.checkNow();
    await src.checkNow();
    expect(events).toEqual([
      { type: 'policy', policy: defaultPolicy(), origin: 'built-in defaults' },
      { type: 'missing', origin: `file ${join(dir, 'policy.yaml')}`, using: 'defaults' },
    ]);
    expect(records.find((r) => r.msg === 'no policy found and no last good one; using the built-in defaults')).toMatchObject({ level: 40 });
    expect(src.isValid()).toBe(true);
    expect(src.isMissing()).toBe(true);
  });

  // A deleted policy used to drop the last good one for the built-in defaults.
  it('removing the file keeps the last good policy, not the defaults, says so once, and a new file clears it', async () => {
    const { src, path, events, records, texts } = await fileSource();
    await writeFile(path, GOOD_2S);
    await src.checkNow();
    await rm(path);
    await src.checkNow();
    await src.checkNow();
    expect(src.current().defaults.intervalMs).toBe(2_000);
    expect(src.isValid()).toBe(true);
    expect(src.isMissing()).toBe(true);
    expect(events.map((e) => e.type)).toEqual(['policy', 'missing']);
    expect(events[1]).toMatchObject({ type: 'missing', using: 'last-good' });
    expect(records.find((r) => r.msg === 'no policy found; keeping the last good policy')).toMatchObject({ level: 40, keeping: `file ${path}` });
    expect(texts).toEqual([GOOD_2S]);
    await writeFile(path, GOOD_10S);
    await src.checkNow();
    expect(src.isMissing()).toBe(false);
    expect(src.current().defaults.intervalMs).toBe(10_000);
    expect(texts).toEqual([GOOD_2S, GOOD_10S]);
  });

  // Restoring the very policy that was kept must clear "missing": the agent clears its metric and
  // condition only on a policy read from a document, which used to be swallowed as "no change".
  it('the identical file put back after a removal is emitted with its text and clears missing', async () => {
    const { src, path, events, texts } = await fileSource();
    await writeFile(path, GOOD_2S);
    await src.checkNow();
    await rm(path);
    await src.checkNow();
    expect(src.isMissing()).toBe(true);
    await writeFile(path, GOOD_2S);
    await src.checkNow();
    expect(src.isMissing()).toBe(false);
    expect(events.map((e) => e.type)).toEqual(['policy', 'missing', 'policy']);
    expect(texts).toEqual([GOOD_2S, GOOD_2S]);
    // Re-reading it once more is no change.
    await src.checkNow();
    expect(events).toHaveLength(3);
  });

  it('a restart with the file missing (persisted last good policy), then the identical file back: emitted with its text', async () => {
    const { src, path, events, texts } = await fileSource({ policy: policyOf(GOOD_10S), origin: 'persisted' });
    await src.checkNow();
    expect(src.isMissing()).toBe(true);
    await writeFile(path, GOOD_10S);
    await src.checkNow();
    expect(src.isMissing()).toBe(false);
    expect(events.map((e) => e.type)).toEqual(['policy', 'missing', 'policy']);
    expect(texts).toEqual([GOOD_10S]);
  });

  it('a last good policy given at start (persisted by the agent) is in force before the first read and kept when the file is missing', async () => {
    const { src, events } = await fileSource({ policy: policyOf(GOOD_10S), origin: 'persisted /var/lib/lastseen/last-good-policy.yaml' });
    expect(src.current().defaults.intervalMs).toBe(10_000);
    await src.checkNow();
    expect(src.current().defaults.intervalMs).toBe(10_000);
    expect(events).toEqual([
      { type: 'policy', policy: policyOf(GOOD_10S), origin: 'last good policy (persisted /var/lib/lastseen/last-good-policy.yaml)' },
      { type: 'missing', origin: `file ${join(dir, 'policy.yaml')}`, using: 'last-good' },
    ]);
  });

  it('an invalid file after a missing one is refused; the last good policy stays', async () => {
    const { src, path, events } = await fileSource();
    await writeFile(path, GOOD_2S);
    await src.checkNow();
    await rm(path);
    await src.checkNow();
    await writeFile(path, BAD_WINDOW);
    await src.checkNow();
    expect(events.map((e) => e.type)).toEqual(['policy', 'missing', 'invalid']);
    expect(src.isMissing()).toBe(false);
    expect(src.isValid()).toBe(false);
    expect(src.current().defaults.intervalMs).toBe(2_000);
  });

  it('an unreadable path (a folder) is refused, not defaulted', async () => {
    const { src, path, events } = await fileSource();
    await writeFile(path, GOOD_2S);
    await src.checkNow();
    await rm(path);
    const { mkdir } = await import('node:fs/promises');
    await mkdir(path);
    await src.checkNow();
    expect(events.at(-1)).toMatchObject({ type: 'invalid', errors: [{ path: '(document)', message: expect.stringContaining('cannot read') }] });
    expect(src.current().defaults.intervalMs).toBe(2_000);
  });

  it('polls every pollMs once started; a throwing callback does not stop it; stop() ends it', async () => {
    const time = new FakeTime();
    const { log } = await memoryLogger();
    const path = join(dir, 'policy.yaml');
    const seen: number[] = [];
    const src = filePolicySource({
      path,
      pollMs: 5_000,
      log,
      timers: time,
      onPolicy: (p) => {
        seen.push(p.defaults.intervalMs);
        throw new Error('consumer bug');
      },
      onInvalid: () => undefined,
    });
    await writeFile(path, GOOD_10S);
    src.start();
    await waitUntil(() => seen.length === 1);
    await writeFile(path, GOOD_2S);
    await time.advance(4_999);
    expect(seen).toEqual([10_000]);
    await time.advance(1);
    await waitUntil(() => seen.length === 2);
    await src.stop();
    expect(time.pending()).toBe(0);
  });
});

class ConfigMapApi implements InformerTransport {
  cm: { metadata: { name: string; namespace: string; uid: string; resourceVersion: string }; data?: Record<string, string> } | null = null;
  rv = 1;
  queries: Array<Record<string, string>> = [];
  private line: ((l: string) => void) | null = null;
  set(data: Record<string, string> | undefined) {
    const old = this.cm;
    this.cm = { metadata: { name: 'lastseen-policy', namespace: 'lastseen', uid: 'u1', resourceVersion: String(++this.rv) }, ...(data ? { data } : {}) };
    this.line?.(JSON.stringify({ type: old ? 'MODIFIED' : 'ADDED', object: this.cm }));
  }
  remove() {
    const old = this.cm;
    this.cm = null;
    if (old) this.line?.(JSON.stringify({ type: 'DELETED', object: old }));
  }
  async getJson(_p: string, query: Record<string, string>) {
    this.queries.push(query);
    return { items: this.cm ? [this.cm] : [], metadata: { resourceVersion: String(this.rv) } };
  }
  async stream(_p: string, query: Record<string, string>, signal: AbortSignal, onLine: (l: string) => void) {
    this.queries.push(query);
    this.line = onLine;
    const done = new Promise<void>((_res, rej) => signal.addEventListener('abort', () => rej(new Error('aborted'))));
    done.catch(() => undefined);
    return { done };
  }
}

describe('ConfigMap policy source', () => {
  async function cmSource(api: ConfigMapApi) {
    const time = new FakeTime();
    const { log } = await memoryLogger();
    const r = recorder();
    const src = configMapPolicySource({ kubeConfig: new KubeConfig(), namespace: 'lastseen', log, clock: time, timers: time, transport: api, ...r });
    src.start();
    await time.advance(0);
    return { time, src, events: r.events };
  }

  it('watches only the one ConfigMap by name and applies, refuses, and keeps the last good when it is deleted', async () => {
    const api = new ConfigMapApi();
    api.set({ 'policy.yaml': GOOD_10S });
    const { src, events } = await cmSource(api);
    expect(api.queries[0]).toMatchObject({ fieldSelector: 'metadata.name=lastseen-policy' });
    expect(events).toMatchObject([{ type: 'policy', origin: 'configmap lastseen/lastseen-policy' }]);
    api.set({ 'policy.yaml': BAD_WINDOW });
    expect(events.at(-1)).toMatchObject({ type: 'invalid', errors: [{ path: 'defaults.window' }] });
    expect(src.current().defaults.intervalMs).toBe(10_000);
    api.set({ 'other.yaml': GOOD_2S });
    expect(events.at(-1)).toMatchObject({ type: 'invalid', errors: [{ path: 'data.policy.yaml' }] });
    api.set({ 'policy.yaml': GOOD_2S });
    expect(events.at(-1)).toMatchObject({ type: 'policy' });
    expect(src.current().defaults.intervalMs).toBe(2_000);
    // Deleting the ConfigMap keeps the last good policy (it used to fall back to the defaults).
    api.remove();
    expect(events.at(-1)).toMatchObject({ type: 'missing', origin: 'configmap lastseen/lastseen-policy', using: 'last-good' });
    expect(src.current().defaults.intervalMs).toBe(2_000);
    expect(src.isValid()).toBe(true);
    expect(src.isMissing()).toBe(true);
    await src.stop();
  });

  it('the identical ConfigMap re-created after a deletion is emitted with its text and clears missing', async () => {
    const api = new ConfigMapApi();
    api.set({ 'policy.yaml': GOOD_10S });
    const time = new FakeTime();
    const { log } = await memoryLogger();
    const r = recorder();
    const src = configMapPolicySource({ kubeConfig: new KubeConfig(), namespace: 'lastseen', log, clock: time, timers: time, transport: api, ...r });
    src.start();
    await time.advance(0);
    api.remove();
    expect(src.isMissing()).toBe(true);
    api.set({ 'policy.yaml': GOOD_10S });
    expect(src.isMissing()).toBe(false);
    expect(r.events.map((e) => e.type)).toEqual(['policy', 'missing', 'policy']);
    expect(r.texts).toEqual([GOOD_10S, GOOD_10S]);
    await src.stop();
  });

  it('no ConfigMap at the first sync gives the defaults', async () => {
    const { src, events } = await cmSource(new ConfigMapApi());
    expect(events).toEqual([
      { type: 'policy', policy: defaultPolicy(), origin: 'built-in defaults' },
      { type: 'missing', origin: 'configmap lastseen/lastseen-policy', using: 'defaults' },
    ]);
    await src.stop();
  });

  it('no ConfigMap at the first sync, with a persisted last good policy: that one, not the defaults', async () => {
    const api = new ConfigMapApi();
    const time = new FakeTime();
    const { log } = await memoryLogger();
    const r = recorder();
    const src = configMapPolicySource({
      kubeConfig: new KubeConfig(),
      namespace: 'lastseen',
      log,
      clock: time,
      timers: time,
      transport: api,
      lastGood: { policy: policyOf(GOOD_10S), origin: 'persisted' },
      ...r,
    });
    expect(src.current().defaults.intervalMs).toBe(10_000);
    src.start();
    await time.advance(0);
    expect(r.events.map((e) => e.type)).toEqual(['policy', 'missing']);
    expect(src.current().defaults.intervalMs).toBe(10_000);
    await src.stop();
  });
});

async function waitUntil(cond: () => boolean) {
  const giveUpAt = Date.now() + 5_000;
  while (!cond() && Date.now() < giveUpAt) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}
