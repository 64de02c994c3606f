// Policy fuzzing: ≥ 10,000 generated documents, valid and invalid. The parser must never throw,
// never accept a policy that breaks a rule, and name a field path in every refusal.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { crossFieldErrors, type ParentPolicy, parsePolicy, parsePolicyText, policyFor } from '../../src/policy/policy.js';
import { CHANNELS } from '../../src/policy/schema.js';

const RUNS = Number(process.env.LASTSEEN_FUZZ_RUNS ?? 10_000);

const unit = fc.constantFrom('ms', 's', 'm', 'h');
const goDuration = fc.tuple(fc.integer({ min: 0, max: 5000 }), unit).map(([n, u]) => `${n}${u}`);
const isoDuration = fc.tuple(fc.integer({ min: 0, max: 600 }), fc.constantFrom('S', 'M', 'H')).map(([n, u]) => `PT${n}${u}`);
const junk = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 2 }),
  fc.object({ maxDepth: 1 }),
);
const duration = fc.oneof({ weight: 6, arbitrary: goDuration }, { weight: 3, arbitrary: isoDuration }, { weight: 1, arbitrary: junk });
const channels = fc.oneof(
  { weight: 8, arbitrary: fc.subarray([...CHANNELS], { minLength: 0 }) },
  { weight: 1, arbitrary: fc.array(fc.oneof(fc.constantFrom(...CHANNELS), fc.string()), { maxLength: 4 }) },
  { weight: 1, arbitrary: junk },
);
const block = fc.record(
  {
    interval: duration,
    window: duration,
    startupGrace: duration,
    startTimeout: duration,
    handoverTimeout: duration,
    handoverBackoff: fc.oneof(fc.record({ initial: duration, max: duration }, { requiredKeys: [] }), junk),
    gcGrace: duration,
    whenApiUnreachable: fc.oneof(fc.constantFrom('activate', 'hold'), junk),
    channels,
    typo: junk,
  },
  { requiredKeys: [] },
);
const selector = fc.record(
  {
    namespaces: fc.array(fc.string({ minLength: 1, maxLength: 5 }), { maxLength: 2 }),
    matchLabels: fc.dictionary(fc.string({ minLength: 1, maxLength: 4 }), fc.string({ maxLength: 4 }), { maxKeys: 2 }),
    matchExpressions: fc.array(
      fc.record({
        key: fc.string({ minLength: 1, maxLength: 4 }),
        operator: fc.constantFrom('In', 'NotIn', 'Exists', 'DoesNotExist', 'Is'),
        values: fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 }),
      }),
      { maxLength: 2 },
    ),
  },
  { requiredKeys: [] },
);
const document = fc.record(
  {
    apiVersion: fc.oneof({ weight: 9, arbitrary: fc.constant('lastseen.dev/v1alpha1') }, { weight: 1, arbitrary: junk }),
    kind: fc.oneof({ weight: 9, arbitrary: fc.constant('Policy') }, { weight: 1, arbitrary: junk }),
    defaults: fc.oneof({ weight: 9, arbitrary: block }, { weight: 1, arbitrary: junk }),
    overrides: fc.array(fc.record({ name: fc.string({ minLength: 1, maxLength: 6 }), selector, policy: block }), { maxLength: 3 }),
  },
  { requiredKeys: ['apiVersion', 'kind'] },
);

function assertValid(p: ParentPolicy) {
  expect(crossFieldErrors(p, 'x')).toEqual([]);
  for (const v of [
    p.intervalMs,
    p.windowMs,
    p.startupGraceMs,
    p.startTimeoutMs,
    p.handoverTimeoutMs,
    p.handoverBackoff.initialMs,
    p.handoverBackoff.maxMs,
    p.gcGraceMs,
  ]) {
    expect(Number.isInteger(v) && v > 0).toBe(true);
  }
  expect(p.channels.length).toBeGreaterThan(0);
  expect(['activate', 'hold']).toContain(p.whenApiUnreachable);
}

describe('policy fuzzing', () => {
  it(`${RUNS} generated documents: no crash, nothing invalid accepted, every refusal has a path`, () => {
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(document, fc.boolean(), (doc, asText) => {
        const r = asText ? parsePolicyText(stringify(doc)) : parsePolicy(doc);
        if (r.ok) {
          accepted++;
          assertValid(r.policy.defaults);
          // Any parent, whatever overrides match it, gets a policy that keeps every rule.
          const eff = policyFor(r.policy, { namespace: 'kube-system', key: 'k', labels: {} });
          assertValid(eff.policy);
        } else {
          refused++;
          expect(r.errors.length).toBeGreaterThan(0);
          for (const e of r.errors) {
            expect(e.path).toMatch(/^(\(document\)|line \d+|[A-Za-z][\w.[\]]*)/);
            expect(e.message.length).toBeGreaterThan(3);
          }
        }
      }),
      { numRuns: RUNS, seed: Number(process.env.LASTSEEN_FUZZ_SEED ?? 20261202) },
    );
    // The generator must exercise both sides, or this test proves nothing.
    expect(accepted).toBeGreaterThan(RUNS * 0.02);
    expect(refused).toBeGreaterThan(RUNS * 0.2);
  });

  it('truncated and garbled YAML never throws', () => {
    const good = 'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults:\n  interval: 5s\n  window: 20s\n';
    for (let i = 0; i <= good.length; i++) {
      const r = parsePolicyText(good.slice(0, i));
      if (!r.ok) for (const e of r.errors) expect(e.path.length).toBeGreaterThan(0);
    }
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (s) => void parsePolicyText(s)),
      { numRuns: 2000 },
    );
  });
});
