import type { V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { FakeTime as FakeClock } from '../core/fake-time.test-helpers.js';
import { ANNOTATION_POLICY_PROBLEM } from '../core/names.js';
import type { Beat } from '../core/types.js';
import type { BeatClient } from '../kube/beat-client.js';
import { beatFromLease, CONFLICTS_BEFORE_PATCH, LeaseChannel, type LeaseTarget, leaseWithBeat, MAX_UPDATE_RETRIES } from './lease.js';

// biome-ignore lint/suspicious/noExplicitAny: the tables below break arbitrary fields of a JSON document on purpose
type Loose = Record<string, any>;

const target: LeaseTarget = { namespace: 'kube-system', key: 'kube-apiserver', node: 'n1', role: 'parent', windowMs: 20_500 };
const beat: Beat = {
  channel: 'lease',
  holder: 'api-1',
  holderUid: '1b4e28ba-2fa1-11d2-883f-0016d3cca427',
  role: 'parent',
  phase: 'Ready',
  sequence: 7,
  renewTime: '2026-12-02T10:00:01.123456Z',
};

function lease(edit: (l: Loose) => void = () => {}): unknown {
  const l = JSON.parse(JSON.stringify(leaseWithBeat(null, target, beat)));
  edit(l);
  return l;
}

describe('leaseWithBeat', () => {
  it('writes name, labels, annotations and the MicroTime verbatim', () => {
    const l = leaseWithBeat(null, target, beat);
    expect(l.metadata).toMatchObject({
      name: 'kube-apiserver.n1',
      namespace: 'kube-system',
      labels: {
        'lastseen.dev/node': 'n1',
        'lastseen.dev/parent': 'kube-apiserver',
        'app.kubernetes.io/managed-by': 'lastseen',
        'app.kubernetes.io/name': 'lastseen',
      },
      annotations: { 'lastseen.dev/phase': 'Ready', 'lastseen.dev/sequence': '7', 'lastseen.dev/role': 'parent', 'lastseen.dev/holder-uid': beat.holderUid },
    });
    expect(l.spec).toMatchObject({ holderIdentity: 'api-1', leaseDurationSeconds: 21, leaseTransitions: 0 });
    expect(JSON.parse(JSON.stringify(l)).spec.renewTime).toBe('2026-12-02T10:00:01.123456Z');
  });

  it('keeps the cached resourceVersion and foreign fields; counts holder transitions', () => {
    const base = leaseWithBeat(null, target, { ...beat, holder: 'api-0' });
    base.metadata!.resourceVersion = '42';
    base.metadata!.annotations!['someone/else'] = 'x';
    const l = leaseWithBeat(base, target, beat);
    expect(l.metadata?.resourceVersion).toBe('42');
    expect(l.metadata?.annotations?.['someone/else']).toBe('x');
    expect(l.spec?.leaseTransitions).toBe(1);
    expect(leaseWithBeat(l, target, { ...beat, sequence: 8 }).spec?.leaseTransitions).toBe(1);
  });

  it('marks an unprobed Ready, also when the previous beat on the Lease was probed', () => {
    const unprobed = leaseWithBeat(null, target, { ...beat, phase: 'Ready', unprobed: true });
    expect(unprobed.metadata?.annotations?.['lastseen.dev/unprobed']).toBe('true');
    expect(beatFromLease(JSON.parse(JSON.stringify(unprobed)), 'n1')).toEqual({ ok: true, beat: { ...beat, phase: 'Ready', unprobed: true } });
    // The next beat, now probed, overwrites the marker carried over from the stored Lease.
    const probed = leaseWithBeat(unprobed, target, { ...beat, phase: 'Ready', sequence: beat.sequence + 1 });
    expect(probed.metadata?.annotations?.['lastseen.dev/unprobed']).toBe('false');
    expect(beatFromLease(JSON.parse(JSON.stringify(probed)), 'n1')).toMatchObject({ ok: true, beat: { phase: 'Ready' } });
    expect((beatFromLease(JSON.parse(JSON.stringify(probed)), 'n1') as { beat: object }).beat).not.toHaveProperty('unprobed');
  });

  it('declares the interval as an annotation, read back by beatFromLease; none from an older writer', () => {
    const l = leaseWithBeat(null, target, { ...beat, intervalMs: 5000 });
    expect(l.metadata?.annotations?.['lastseen.dev/interval-ms']).toBe('5000');
    expect(beatFromLease(JSON.parse(JSON.stringify(l)), 'n1')).toEqual({ ok: true, beat: { ...beat, intervalMs: 5000 } });
    expect(beatFromLease(lease(), 'n1')).toEqual({ ok: true, beat });
    const bad = JSON.parse(JSON.stringify(l));
    bad.metadata.annotations['lastseen.dev/interval-ms'] = '5s';
    expect(beatFromLease(bad, 'n1')).toMatchObject({ ok: false, reason: expect.stringMatching(/interval-ms is "5s", not a whole number of milliseconds/) });
  });

  it('round-trips through beatFromLease', () => {
    expect(beatFromLease(lease(), 'n1')).toEqual({ ok: true, beat });
    const cp = leaseWithBeat(null, { ...target, role: 'checkpoint' }, { ...beat, role: 'checkpoint' });
    expect(cp.metadata?.name).toBe('kube-apiserver.n1.checkpoint');
    expect(beatFromLease(cp, 'n1')).toMatchObject({ ok: true, beat: { role: 'checkpoint' } });
  });
});

describe('beatFromLease refuses, with a reason, never a throw', () => {
  const A = 'metadata.annotations';
  it.each<[string, unknown, RegExp]>([
    ['null', null, /not a Lease/],
    ['a string', 'kube-apiserver.n1', /not a Lease/],
    ['no name', lease((l) => delete l.metadata.name), /name is missing/],
    ['another node', lease((l) => (l.metadata.labels['lastseen.dev/node'] = 'n2')), /"n2", not this node "n1"/],
    ['no node label', lease((l) => (l.metadata.labels = null)), /lastseen.dev\/node is missing/],
    ['name of another node', lease((l) => (l.metadata.name = 'kube-apiserver.n2')), /name does not match/],
    ['no parent label', lease((l) => delete l.metadata.labels['lastseen.dev/parent']), /lastseen.dev\/parent/],
    ['unknown phase', lease((l) => (l.metadata.annotations['lastseen.dev/phase'] = 'Dancing')), /phase is "Dancing"/],
    ['phase of wrong type', lease((l) => (l.metadata.annotations['lastseen.dev/phase'] = 3)), /phase is missing/],
    ['unknown role', lease((l) => (l.metadata.annotations['lastseen.dev/role'] = 'boss')), /role is "boss"/],
    ['negative sequence', lease((l) => (l.metadata.annotations['lastseen.dev/sequence'] = '-1')), /not a positive integer/],
    ['zero sequence', lease((l) => (l.metadata.annotations['lastseen.dev/sequence'] = '0')), /not a positive integer/],
    ['fractional sequence', lease((l) => (l.metadata.annotations['lastseen.dev/sequence'] = '1.5')), /not a positive integer/],
    ['huge sequence', lease((l) => (l.metadata.annotations['lastseen.dev/sequence'] = '99999999999999')), /impossibly large/],
    ['absurd sequence', lease((l) => (l.metadata.annotations['lastseen.dev/sequence'] = '1e400')), /not a positive integer/],
    ['no sequence', lease((l) => delete l.metadata.annotations['lastseen.dev/sequence']), /sequence is missing/],
    ['bad uid', lease((l) => (l.metadata.annotations['lastseen.dev/holder-uid'] = 'x y')), /not a uid/],
    ['no holder', lease((l) => delete l.spec.holderIdentity), /holderIdentity is missing/],
    ['holder not a name', lease((l) => (l.spec.holderIdentity = 'Api_1!')), /not a valid pod name/],
    ['no spec', lease((l) => delete l.spec), /holderIdentity/],
    ['renewTime a number', lease((l) => (l.spec.renewTime = 1764669601)), /not a time/],
    ['renewTime 3 digits', lease((l) => (l.spec.renewTime = '2026-12-02T10:00:01.123Z')), /six fractional digits/],
    ['renewTime with offset', lease((l) => (l.spec.renewTime = '2026-12-02T10:00:01.123456+01:00')), /six fractional digits/],
    ['renewTime Feb 30', lease((l) => (l.spec.renewTime = '2026-02-30T10:00:01.123456Z')), /not a real instant/],
    ['renewTime hour 25', lease((l) => (l.spec.renewTime = '2026-12-02T25:00:01.123456Z')), /not a real instant/],
    ['renewTime Go zero time (past)', lease((l) => (l.spec.renewTime = '0001-01-01T00:00:00.000000Z')), /before the Unix epoch/],
    ['renewTime 1969 (past)', lease((l) => (l.spec.renewTime = '1969-12-31T23:59:59.999999Z')), /before the Unix epoch/],
    ['renewTime year 10000 (future)', lease((l) => (l.spec.renewTime = '10000-01-01T00:00:00.000000Z')), /six fractional digits/],
    ['renewTime invalid Date', lease((l) => (l.spec.renewTime = new Date('nope'))), /invalid date/],
    [`${A} an array`, lease((l) => (l.metadata.annotations = ['x'])), /role is missing/],
  ])('%s', (_name, input, reason) => {
    const r = beatFromLease(input, 'n1');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });

  it.each([
    // Skewed clocks are the agent's everyday reality, and it compares renew times for equality only.
    ['a year ahead', '2027-12-02T10:00:01.123456Z'],
    ['the epoch (node rebooted without a real-time clock)', '1970-01-01T00:00:05.000001Z'],
    ['far future', '2999-01-01T00:00:00.000000Z'],
  ])('accepts a skewed renewTime: %s', (_name, renewTime) => {
    expect(
      beatFromLease(
        lease((l) => (l.spec.renewTime = renewTime)),
        'n1',
      ),
    ).toMatchObject({ ok: true, beat: { renewTime } });
  });
});

/** A fake api: an in-memory Lease with resourceVersions, failures on demand, request counting. */
function fakeApi() {
  const state = { stored: null as V1Lease | null, rv: 0, requests: [] as string[], conflictNext: 0, failNext: 0, clients: 0, closed: 0 };
  const apiError = (code: number) =>
    Object.assign(new Error(`HTTP ${code}`), {
      code,
      body: JSON.stringify({ kind: 'Status', reason: code === 409 ? 'Conflict' : 'NotFound', message: `code ${code}` }),
    });
  const save = (l: V1Lease) => {
    state.stored = JSON.parse(JSON.stringify({ ...l, metadata: { ...l.metadata, resourceVersion: String(++state.rv) } }));
    return JSON.parse(JSON.stringify(state.stored));
  };
  const guard = (verb: string) => {
    state.requests.push(verb);
    if (state.failNext > 0) {
      state.failNext--;
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { type: 'system', code: 'ECONNREFUSED' });
    }
  };
  const api = {
    async readLease() {
      guard('GET');
      if (!state.stored) throw apiError(404);
      return JSON.parse(JSON.stringify(state.stored));
    },
    async createLease({ body }: { body: V1Lease }) {
      guard('POST');
      if (state.stored) throw apiError(409);
      return save(body);
    },
    async replaceLease({ body }: { body: V1Lease }) {
      guard('PUT');
      if (!state.stored) throw apiError(404);
      if (state.conflictNext > 0) {
        state.conflictNext--;
        state.rv++;
        throw apiError(409);
      }
      if (body.metadata?.resourceVersion !== state.stored.metadata?.resourceVersion) throw apiError(409);
      return save(body);
    },
    async mergePatchLease({ body }: { body: { metadata: V1Lease['metadata']; spec: V1Lease['spec'] } }) {
      guard('PATCH');
      if (!state.stored) throw apiError(404);
      const s = state.stored;
      // JSON merge patch: a null value removes the key.
      const annotations: Record<string, string | null> = { ...s.metadata?.annotations, ...body.metadata?.annotations };
      for (const [k, v] of Object.entries(annotations)) if (v === null) delete annotations[k];
      return save({
        ...s,
        metadata: { ...s.metadata, labels: { ...s.metadata?.labels, ...body.metadata?.labels }, annotations: annotations as Record<string, string> },
        spec: { ...s.spec, ...body.spec },
      });
    },
  };
  const makeClient = (): BeatClient => {
    state.clients++;
    return { ...api, close: () => state.closed++ } as unknown as BeatClient;
  };
  return { state, makeClient };
}

describe('LeaseChannel', () => {
  const b = (sequence: number): Beat => ({ ...beat, sequence });

  it('creates the Lease, then renews with one PUT per beat from the cached copy', async () => {
    const { state, makeClient } = fakeApi();
    const ch = new LeaseChannel({ target, makeClient, clock: new FakeClock({ io: true }), random: () => 0.5 });
    await ch.write(b(1), 1000);
    expect(state.requests).toEqual(['GET', 'POST']);
    state.requests = [];
    for (let i = 2; i <= 10; i++) await ch.write(b(i), 1000);
    expect(state.requests).toEqual(Array(9).fill('PUT'));
    expect(beatFromLease(state.stored, 'n1')).toMatchObject({ ok: true, beat: { sequence: 10 } });
  });

  it('a conflict re-reads and retries, not a failure; repeated conflicts fall back to a merge patch', async () => {
    const { state, makeClient } = fakeApi();
    const failures: string[] = [];
    const ch = new LeaseChannel({ target, makeClient, clock: new FakeClock({ io: true }), onFailure: (e) => failures.push(e.kind) });
    await ch.write(b(1), 1000);
    state.requests = [];
    state.conflictNext = 1;
    await ch.write(b(2), 1000);
    expect(state.requests).toEqual(['PUT', 'GET', 'PUT']);
    state.requests = [];
    state.conflictNext = 100; // a second writer in a tight loop: every PUT conflicts
    await ch.write(b(3), 1000);
    expect(state.requests).toEqual(['PUT', 'GET', 'PUT', 'PATCH']);
    expect(state.requests.filter((r) => r === 'PUT')).toHaveLength(CONFLICTS_BEFORE_PATCH);
    expect(beatFromLease(state.stored, 'n1')).toMatchObject({ ok: true, beat: { sequence: 3 } });
    expect(failures).toEqual([]);
  });

  it('shows the policy problem of the shared target as an annotation, and removes it once cleared (PUT and merge patch)', async () => {
    const { state, makeClient } = fakeApi();
    const shared = { ...target, policyProblem: 'invalid policy /p.yaml: defaults.interval: bad' as string | null };
    const ch = new LeaseChannel({ target: shared, makeClient, clock: new FakeClock({ io: true }) });
    await ch.write(b(1), 1000);
    expect(state.stored?.metadata?.annotations?.[ANNOTATION_POLICY_PROBLEM]).toBe('invalid policy /p.yaml: defaults.interval: bad');
    shared.policyProblem = null;
    await ch.write(b(2), 1000);
    expect(state.stored?.metadata?.annotations).not.toHaveProperty(ANNOTATION_POLICY_PROBLEM);
    shared.policyProblem = 'cannot read /p.yaml';
    await ch.write(b(3), 1000);
    expect(state.stored?.metadata?.annotations?.[ANNOTATION_POLICY_PROBLEM]).toBe('cannot read /p.yaml');
    shared.policyProblem = null;
    state.requests = [];
    state.conflictNext = 100;
    await ch.write(b(4), 1000);
    expect(state.requests.at(-1)).toBe('PATCH');
    expect(state.stored?.metadata?.annotations).not.toHaveProperty(ANNOTATION_POLICY_PROBLEM);
    expect(beatFromLease(state.stored, 'n1')).toMatchObject({ ok: true, beat: { sequence: 4 } });
  });

  it('re-creates a Lease deleted under it', async () => {
    const { state, makeClient } = fakeApi();
    const ch = new LeaseChannel({ target, makeClient, clock: new FakeClock({ io: true }) });
    await ch.write(b(1), 1000);
    state.stored = null;
    state.requests = [];
    await ch.write(b(2), 1000);
    expect(state.requests).toEqual(['PUT', 'GET', 'POST']);
  });

  it('backs off on failures within the deadline, gets a fresh client after repeats, and gives up with the object named', async () => {
    const { state, makeClient } = fakeApi();
    const clock = new FakeClock({ io: true });
    const ch = new LeaseChannel({ target, makeClient, clock, random: () => 0.5 });
    await ch.write(b(1), 1000);
    state.requests = [];
    state.failNext = 100;
    const w = ch.write(b(2), clock.now() + 500);
    // Attach the expectation before time moves, or the rejection is briefly unhandled.
    const rejected = expect(w).rejects.toThrow(/lease kube-system\/kube-apiserver.n1: .*ECONNREFUSED/);
    await clock.advance(1000);
    await rejected;
    await expect(w).rejects.toThrow(/lease kube-system\/kube-apiserver.n1: .*ECONNREFUSED/);
    // Backoffs 50, 100, 200 fit in 500ms; the fourth (400) would not.
    expect(state.requests.length).toBe(4);
    expect(state.requests.length).toBeLessThanOrEqual(MAX_UPDATE_RETRIES);
    expect(state.clients).toBeGreaterThanOrEqual(2);
    expect(state.closed).toBeGreaterThanOrEqual(1);
    state.failNext = 0;
    state.requests = [];
    await ch.write(b(3), clock.now() + 500);
    expect(state.requests).toEqual(['PUT']);
  });
});
