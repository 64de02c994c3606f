// Malformed heartbeats, generated: Leases, pod annotations and local heartbeat files mutated with
// wrong types, future and past times, another node's name, huge values, truncated JSON and
// missing fields. The parsers (beatFromLease, beatFromPod, beatFromFile) must never throw, must
// refuse with a reason whatever is not a whole, sane beat for this node, and whatever they do
// accept must be sane. Fed through the agent loop (Agent with fake actuators and a fake clock, as
// src/agent/agent.test.ts) next to a parent whose real beats are fresh, whatever parses must never
// crash the loop nor activate that parent.
//
// LASTSEEN_FUZZ_RUNS sets the runs per parser property (default 2,000); the agent property runs a
// tenth of that.
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { type Actuators, Agent, type LiveRead } from '../../src/agent/agent.js';
import { leaseParent, localFileParent, type PodStatusLike, v1PodInfo } from '../../src/agent/parents.js';
import { annotationPatch, beatFromPod } from '../../src/channels/annotation.js';
import { type BeatResult, MAX_SEQUENCE } from '../../src/channels/fields.js';
import { beatFromLease, leaseWithBeat } from '../../src/channels/lease.js';
import { beatFromFile, LOCAL_BEAT_VERSION, localBeatText, MAX_BEAT_FILE_BYTES } from '../../src/channels/local.js';
import { FakeTime } from '../../src/core/fake-time.test-helpers.js';
import {
  ANNOTATION_HOLDER_UID,
  ANNOTATION_LAST_SEEN,
  ANNOTATION_PHASE,
  ANNOTATION_ROLE,
  ANNOTATION_SEQUENCE,
  LABEL_NODE,
  LABEL_PARENT,
  localBeatFile,
} from '../../src/core/names.js';
import type { Beat } from '../../src/core/types.js';
import { parsePolicyText } from '../../src/policy/policy.js';

const RUNS = Number(process.env.LASTSEEN_FUZZ_RUNS ?? 2_000);
const AGENT_RUNS = Math.max(20, Math.round(RUNS / 10));

const NODE = 'node-1';
const NS = 'kube-system';
const KEY = 'kube-apiserver';
const POD = 'kube-apiserver-node-1';
const UID = '0f4c6a2e-8d1b-4f7e-9a0c-5b3d2e1f6a7b';

const baseBeat = (channel: Beat['channel'], sequence = 42): Beat => ({
  channel,
  holder: POD,
  holderUid: UID,
  role: 'parent',
  phase: 'Ready',
  sequence,
  renewTime: '2025-06-01T12:00:00.123456Z',
});

function validLease(): Record<string, unknown> {
  const lease = leaseWithBeat(null, { namespace: NS, key: KEY, node: NODE, role: 'parent', windowMs: 3000 }, baseBeat('lease'));
  return JSON.parse(JSON.stringify(lease)) as Record<string, unknown>;
}

function validPod(): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: POD,
      namespace: NS,
      uid: UID,
      labels: { [LABEL_PARENT]: KEY },
      annotations: { 'lastseen.dev/checkpoint': 'true', ...annotationPatch(baseBeat('annotation')).metadata.annotations },
    },
    spec: { nodeName: NODE, containers: [{ name: 'main', image: 'x' }] },
  };
}

function validFileDoc(): Record<string, unknown> {
  return JSON.parse(localBeatText({ node: NODE, namespace: NS, key: KEY, role: 'parent' }, baseBeat('local'))) as Record<string, unknown>;
}

// ---- bad and odd values ----

const HUGE = 'a'.repeat(100_000);
/** Values that are never a valid field, of every type. */
const special = fc.constantFrom<unknown>(
  undefined,
  null,
  '',
  ' ',
  0,
  -1,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  -0,
  2 ** 53 + 1,
  1e308,
  MAX_SEQUENCE + 1,
  String(MAX_SEQUENCE + 1),
  '99999999999999999',
  '1e3',
  '0x10',
  '-5',
  '007x',
  HUGE,
  `${'a'.repeat(254)}`,
  'Not_A_DNS_Name',
  'ready',
  'READY',
  'Ready ',
  'parent ',
  'Parent',
  '1969-12-31T23:59:59.999999Z',
  '0001-01-01T00:00:00.000000Z',
  '2024-02-30T00:00:00.000000Z',
  '2024-01-01T25:00:00.000000Z',
  '2024-01-01T00:00:00Z',
  '2024-01-01T00:00:00.123Z',
  '2024-01-01 00:00:00.000000',
  new Date(Number.NaN),
  [],
  [1, 2],
  {},
  { nested: { deep: true } },
  true,
  false,
  BigInt(7),
  Symbol('beat'),
  () => 'a function',
);
/** Values a writer on another node, or with a wrong or odd clock, could send; some are valid. */
const odd = fc.constantFrom<unknown>(
  'another-node',
  'node-10',
  'NODE-1',
  '9999-12-31T23:59:59.999999Z',
  '2999-01-01T00:00:00.000000Z',
  '1970-01-01T00:00:00.000000Z',
  '1999-12-31T23:59:59.999999Z',
  new Date('2100-01-01T00:00:00Z'),
  new Date(8.64e15),
  new Date(0),
  '1',
  String(MAX_SEQUENCE),
  1,
  MAX_SEQUENCE,
  'checkpoint',
  'Ready',
);
/** Any value, except the two phases that are deliberate signals (a forged Stopping is a real Stopping). */
const anyValue = fc
  .oneof(
    { weight: 3, arbitrary: special },
    { weight: 2, arbitrary: odd },
    { weight: 2, arbitrary: fc.anything({ maxDepth: 2 }) },
    { weight: 1, arbitrary: fc.string({ maxLength: 300 }) },
  )
  .filter((v) => v !== 'Starting' && v !== 'Stopping');

type Path = string[];
type Mutation = { path: Path; op: 'delete' } | { path: Path; op: 'set'; value: unknown };

function mutations(paths: Path[]): fc.Arbitrary<Mutation[]> {
  const one: fc.Arbitrary<Mutation> = fc.oneof(
    fc.constantFrom(...paths).map((path): Mutation => ({ path, op: 'delete' })),
    fc.tuple(fc.constantFrom(...paths), anyValue).map(([path, value]): Mutation => ({ path, op: 'set', value })),
  );
  return fc.array(one, { minLength: 1, maxLength: 3 });
}

function mutate<T>(base: T, ms: Mutation[]): unknown {
  let root: unknown = base;
  for (const m of ms) {
    if (m.path.length === 0) {
      root = m.op === 'set' ? m.value : undefined;
      continue;
    }
    let o: unknown = root;
    for (const k of m.path.slice(0, -1)) {
      if (typeof o !== 'object' || o === null) break;
      o = (o as Record<string, unknown>)[k];
    }
    if (typeof o !== 'object' || o === null) continue;
    const last = m.path[m.path.length - 1]!;
    if (m.op === 'delete') delete (o as Record<string, unknown>)[last];
    else (o as Record<string, unknown>)[last] = m.value;
  }
  return root;
}

const LEASE_PATHS: Path[] = [
  [],
  ['metadata'],
  ['metadata', 'name'],
  ['metadata', 'namespace'],
  ['metadata', 'labels'],
  ['metadata', 'labels', LABEL_NODE],
  ['metadata', 'labels', LABEL_PARENT],
  ['metadata', 'annotations'],
  ['metadata', 'annotations', ANNOTATION_PHASE],
  ['metadata', 'annotations', ANNOTATION_SEQUENCE],
  ['metadata', 'annotations', ANNOTATION_ROLE],
  ['metadata', 'annotations', ANNOTATION_HOLDER_UID],
  ['spec'],
  ['spec', 'holderIdentity'],
  ['spec', 'renewTime'],
];
const POD_PATHS: Path[] = [
  [],
  ['metadata'],
  ['metadata', 'name'],
  ['metadata', 'uid'],
  ['metadata', 'annotations'],
  ['metadata', 'annotations', ANNOTATION_LAST_SEEN],
  ['metadata', 'annotations', ANNOTATION_PHASE],
  ['metadata', 'annotations', ANNOTATION_SEQUENCE],
  ['metadata', 'annotations', ANNOTATION_ROLE],
  ['metadata', 'annotations', ANNOTATION_HOLDER_UID],
  ['spec'],
  ['spec', 'nodeName'],
];
const FILE_FIELDS = ['version', 'node', 'namespace', 'key', 'holder', 'holderUid', 'role', 'phase', 'sequence', 'renewTime'];
const FILE_PATHS: Path[] = [[], ...FILE_FIELDS.map((f) => [f])];

const malformedLease = mutations(LEASE_PATHS).map((ms) => mutate(validLease(), ms));
const malformedPod = mutations(POD_PATHS).map((ms) => mutate(validPod(), ms));

/** File text: a mutated document, cut short, padded past the size limit, or not JSON at all. */
const malformedFile: fc.Arbitrary<string> = fc.oneof(
  mutations(FILE_PATHS).map((ms) => safeStringify(mutate(validFileDoc(), ms))),
  fc.tuple(mutations(FILE_PATHS), fc.nat()).map(([ms, n]) => {
    const t = safeStringify(mutate(validFileDoc(), ms));
    return t.slice(0, n % Math.max(1, t.length));
  }),
  fc
    .nat({ max: 200 })
    .map((n) => `${localBeatText({ node: NODE, namespace: NS, key: KEY, role: 'parent' }, baseBeat('local')).trimEnd()}${' '.repeat(MAX_BEAT_FILE_BYTES + n)}`),
  fc.string({ maxLength: 500 }),
  fc.string({ unit: 'binary', maxLength: 500 }),
  fc.json(),
);

function safeStringify(v: unknown): string {
  try {
    return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? Number(x) : x)) ?? String(v);
  } catch {
    return String(v);
  }
}

// ---- what an accepted beat must look like ----

const MICROTIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

function expectSaneOrRefused(r: BeatResult, channel: Beat['channel']): void {
  if (!r.ok) {
    expect(typeof r.reason).toBe('string');
    expect(r.reason.trim().length).toBeGreaterThan(0);
    return;
  }
  const b = r.beat;
  expect(b.channel).toBe(channel);
  expect(['parent', 'checkpoint']).toContain(b.role);
  expect(['Starting', 'Ready', 'Stopping']).toContain(b.phase);
  expect(Number.isInteger(b.sequence) && b.sequence >= 1 && b.sequence <= MAX_SEQUENCE).toBe(true);
  expect(b.renewTime).toMatch(MICROTIME);
  expect(Number(b.renewTime.slice(0, 4))).toBeGreaterThanOrEqual(1970);
  expect(b.holder.length).toBeGreaterThan(0);
  expect(b.holder.length).toBeLessThanOrEqual(253);
  expect(b.holder).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
  expect(typeof b.holderUid).toBe('string');
  expect(b.holderUid.length).toBeLessThanOrEqual(128);
}

function field(o: unknown, path: Path): unknown {
  let x: unknown = o;
  for (const k of path) {
    if (typeof x !== 'object' || x === null) return undefined;
    x = (x as Record<string, unknown>)[k];
  }
  return x;
}

function parsedDoc(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

describe('parsers refuse malformed heartbeats with a reason, and never throw', () => {
  it('the valid bases parse (so every refusal below comes from a mutation)', () => {
    expect(beatFromLease(validLease(), NODE)).toEqual({ ok: true, beat: baseBeat('lease') });
    expect(beatFromPod(validPod(), NODE)).toEqual({ ok: true, beat: baseBeat('annotation') });
    expect(beatFromFile(JSON.stringify(validFileDoc()), { node: NODE, namespace: NS, key: KEY, role: 'parent' })).toEqual({
      ok: true,
      beat: baseBeat('local'),
    });
  });

  it(`Leases: ${RUNS} mutated objects, and anything at all`, () => {
    fc.assert(
      fc.property(fc.oneof({ weight: 9, arbitrary: malformedLease }, { weight: 1, arbitrary: fc.anything() }), (lease) => {
        const r = beatFromLease(lease, NODE);
        expectSaneOrRefused(r, 'lease');
        // Another node's Lease (or one with no node label) is never a beat for this node.
        if (field(lease, ['metadata', 'labels', LABEL_NODE]) !== NODE) expect(r.ok).toBe(false);
        // An accepted beat belongs to the parent its labels and name agree on.
        if (r.ok) expect(leaseParent(lease as never, NODE)?.key ?? KEY).toBe(KEY);
      }),
      { numRuns: RUNS },
    );
  });

  it(`pod annotations: ${RUNS} mutated pods, and anything at all`, () => {
    fc.assert(
      fc.property(fc.oneof({ weight: 9, arbitrary: malformedPod }, { weight: 1, arbitrary: fc.anything() }), (pod) => {
        const r = beatFromPod(pod, NODE);
        expectSaneOrRefused(r, 'annotation');
        if (field(pod, ['spec', 'nodeName']) !== NODE) expect(r.ok).toBe(false);
        // Annotations copied from another pod (holder uid is not this pod's uid) are refused.
        const uid = field(pod, ['metadata', 'uid']);
        if (r.ok && typeof uid === 'string' && uid !== '' && r.beat.holderUid !== '') expect(r.beat.holderUid).toBe(uid);
      }),
      { numRuns: RUNS },
    );
  });

  it(`local heartbeat files: ${RUNS} mutated, truncated, oversized and random texts`, () => {
    fc.assert(
      fc.property(malformedFile, fc.constantFrom<'parent' | 'checkpoint' | undefined>('parent', 'checkpoint', undefined), (text, role) => {
        const r = beatFromFile(text, { node: NODE, namespace: NS, key: KEY, ...(role ? { role } : {}) });
        expectSaneOrRefused(r, 'local');
        if (text.length > MAX_BEAT_FILE_BYTES) expect(r.ok).toBe(false);
        const doc = parsedDoc(text) as Record<string, unknown> | undefined;
        if (doc?.node !== NODE || doc?.version !== LOCAL_BEAT_VERSION) expect(r.ok).toBe(false);
        if (r.ok && role) expect(r.beat.role).toBe(role);
      }),
      { numRuns: RUNS },
    );
  });

  it('every truncation of a valid file is refused with a reason', () => {
    const text = localBeatText({ node: NODE, namespace: NS, key: KEY, role: 'parent' }, baseBeat('local'));
    const cut = text.trimEnd().length; // the whole object; only the newline may go
    for (let n = 0; n < cut; n++) {
      const r = beatFromFile(text.slice(0, n), { node: NODE, namespace: NS, key: KEY });
      expect(r.ok, `prefix of ${n} bytes`).toBe(false);
      if (!r.ok) expect(r.reason.length).toBeGreaterThan(0);
    }
  });

  it('times: far future and 1970 are accepted (freshness is measured on the agent clock, not by age); before 1970 and impossible instants are refused', () => {
    const withRenew = (renewTime: unknown) => {
      const l = validLease();
      (l.spec as Record<string, unknown>).renewTime = renewTime;
      return beatFromLease(l, NODE);
    };
    for (const t of ['9999-12-31T23:59:59.999999Z', '1970-01-01T00:00:00.000000Z', '2000-02-29T00:00:00.000000Z']) expect(withRenew(t).ok, t).toBe(true);
    for (const t of [
      '1969-12-31T23:59:59.999999Z',
      '2001-02-29T00:00:00.000000Z',
      '2024-13-01T00:00:00.000000Z',
      '2024-01-01T24:00:00.000000Z',
      '2024-01-01T00:00:60.000000Z',
      12345,
      null,
    ]) {
      const r = withRenew(t);
      expect(r.ok, String(t)).toBe(false);
      if (!r.ok) expect(r.reason).toMatch(/spec\.renewTime/);
    }
  });

  it("another node's Lease, pod and file are refused with a reason that names the node", () => {
    const lease = validLease();
    (lease.metadata as { labels: Record<string, string> }).labels[LABEL_NODE] = 'node-2';
    const pod = validPod();
    (pod.spec as Record<string, unknown>).nodeName = 'node-2';
    const file = localBeatText({ node: 'node-2', namespace: NS, key: KEY, role: 'parent' }, baseBeat('local'));
    for (const r of [beatFromLease(lease, NODE), beatFromPod(pod, NODE), beatFromFile(file, { node: NODE, namespace: NS, key: KEY })]) {
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.reason).toContain('node-2');
    }
  });
});

// ---- through the agent loop ----

const policy = (() => {
  const r = parsePolicyText(
    'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults: { interval: 1s, window: 3s, startupGrace: 4s, handoverTimeout: 5s, channels: [lease, annotation, local], whenApiUnreachable: activate }\n',
  );
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
})();

type Junk = { kind: 'lease'; obj: unknown } | { kind: 'pod'; obj: unknown } | { kind: 'file'; name: string; text: string };

const fileName = fc.constantFrom(
  localBeatFile(NS, KEY),
  localBeatFile(NS, KEY, 'checkpoint'),
  localBeatFile(NS, 'other'),
  'garbage.json',
  `${NS}_.json`,
  'UPPER_case.json',
);
/** What an informer hands over: the object as it survives JSON (no symbols, functions or bigints). */
const asJson = (v: unknown): unknown => parsedDoc(safeStringify(v));
const junk: fc.Arbitrary<Junk> = fc.oneof(
  malformedLease.map((obj): Junk => ({ kind: 'lease', obj: asJson(obj) })),
  malformedPod.map((obj): Junk => ({ kind: 'pod', obj: asJson(obj) })),
  fc.tuple(fileName, malformedFile).map(([name, text]): Junk => ({ kind: 'file', name, text })),
);
const schedule = fc.array(fc.record({ advanceMs: fc.integer({ min: 50, max: 900 }), junk: fc.array(junk, { maxLength: 3 }) }), {
  minLength: 15,
  maxLength: 40,
});

/** Feeds one junk input the way src/agent/run.ts wires its observers; returns whether it was accepted. */
function feed(agent: Agent, j: Junk): boolean {
  if (j.kind === 'lease') {
    const parent = leaseParent((j.obj ?? {}) as never, NODE);
    const r = beatFromLease(j.obj, NODE);
    if (!r.ok || !parent) return false;
    agent.beat(parent.namespace, parent.key, r.beat);
    return true;
  }
  if (j.kind === 'pod') {
    const r = beatFromPod(j.obj, NODE);
    if (!r.ok) return false;
    // The parent's own pod object, annotations intact but for a value the parser accepts: a beat of
    // the parent itself (its uid, a sequence). Not junk: one holder's sequences are comparable
    // across channels (src/core/beats.ts), so its sequence 42 outranks the Lease's and can silence
    // it, as a forged Stopping can stop it. Refusing it needs what only the api-server can tell (who
    // wrote the annotation), so it is left out here, as the deliberate phases are.
    if (r.beat.holderUid === UID && r.beat.role === 'parent') return false;
    agent.beat(NS, KEY, r.beat);
    return true;
  }
  const parent = localFileParent(j.name);
  if (!parent) return false;
  const r = beatFromFile(j.text, { node: NODE, namespace: parent.namespace, key: parent.key, role: parent.role });
  if (!r.ok) return false;
  agent.beat(parent.namespace, parent.key, r.beat);
  return true;
}

describe('the agent loop fed malformed heartbeats', () => {
  it(`${AGENT_RUNS} schedules of junk between a fresh parent's real beats: no crash, no activation, Healthy`, async () => {
    let accepted = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(schedule, async (steps) => {
        const time = new FakeTime();
        const calls: string[] = [];
        let real = baseBeat('lease', 1);
        const actuators: Actuators = {
          capture: async (_p, pod) => {
            calls.push('capture');
            return { specHash: pod.specHash };
          },
          activate: async () => void calls.push('activate'),
          retire: async () => void calls.push('retire'),
          collect: async () => void calls.push('collect'),
          readLive: async (): Promise<LiveRead> => ({ beats: [real] }),
          fence: async () => ({ killed: 0, detail: 'not hung' }),
          event: async (_p, e) => void calls.push(`event:${e.reason}`),
        };
        const agent = new Agent({
          node: NODE,
          clock: time,
          timers: time,
          logger: pino({ level: 'silent' }),
          actuators,
          podInfo: (pod: PodStatusLike) => v1PodInfo(pod, 'h1'),
          policy,
        });
        agent.api(true);
        agent.podsObserved(new Map([[`${NS}/${KEY}`, { namespace: NS, key: KEY, pod: { metadata: { uid: UID, name: POD } }, labels: {} }]]));
        let nextBeatAt = 0;
        const beatUntil = async (t: number) => {
          while (nextBeatAt <= t) {
            await time.advance(nextBeatAt - time.now());
            real = baseBeat('lease', real.sequence + 1);
            agent.beat(NS, KEY, real);
            nextBeatAt += 1000;
          }
          await time.advance(t - time.now());
        };
        await beatUntil(5_000); // past the startup grace: Healthy, captured
        for (const step of steps) {
          await beatUntil(time.now() + step.advanceMs);
          for (const j of step.junk) {
            if (feed(agent, j)) accepted++;
            else refused++;
          }
        }
        await beatUntil(time.now() + 2_000);
        const v = agent.views().find((x) => x.id === `${NS}/${KEY}`);
        expect(calls).not.toContain('activate');
        expect(v?.state.state).toBe('Healthy');
        expect(v?.state.checkpoint.active).toBe(false);
        await agent.stop();
      }),
      { numRuns: AGENT_RUNS },
    );
    // The generators reach both sides of the parsers.
    expect(refused).toBeGreaterThan(0);
    expect(accepted).toBeGreaterThan(0);
  });
});
