import { describe, expect, it } from 'vitest';
import { fixtures, POD, POLICY } from './fixtures.test-helpers.js';
import { announceKnownBad, exclusiveCopy, forgetVerdict, knownBad, observeSpec, probationEnded, strikeFailedHandover, verdictWake } from './known-bad.js';
import { OWN_SPEC_BIND_SLACK_MS } from './overlap.js';
import { PROBATION, strike } from './probation.js';
import type { Action } from './types.js';

const BAD = { ...POD, uid: 'u2', specHash: 'h-bad' };
const events = (as: Action[]) => as.flatMap((a) => (a.type === 'event' ? [a.reason] : []));

describe('known-bad: no hand-over to a spec on probation', () => {
  it("a failed hand-over strikes a spec other than the copy's, never the copy's own", () => {
    const { state: s, now } = structuredClone(fixtures().HandingOver!);
    s.pod = BAD;
    const actions: Action[] = [];
    strikeFailedHandover(s, now, actions);
    expect(s.knownBad).toMatchObject({ specHash: 'h-bad', strikes: 1, until: now + PROBATION.release.initialMs });
    expect(verdictWake(s)).toBe(now + PROBATION.release.initialMs);
    expect(events(actions)).toEqual(['KnownBadSpec']);
    const own = structuredClone(fixtures().HandingOver!);
    strikeFailedHandover(own.state, own.now, []);
    expect(own.state.knownBad).toBeNull();
  });

  it('holds while the pod runs the held spec; a new spec or a Healthy parent ends it', () => {
    const { state: s, now } = structuredClone(fixtures().Active!);
    s.pod = BAD;
    s.knownBad = strike(null, BAD, now);
    expect(knownBad(s, now)).toBe(true);
    observeSpec(s, BAD);
    expect(s.knownBad).not.toBeNull();
    observeSpec(s, { ...BAD, specHash: 'h3' });
    expect(s.knownBad).toBeNull();
    s.knownBad = strike(null, BAD, now);
    forgetVerdict(s);
    expect(s.knownBad).toBeNull();
  });

  it('announced once with its reason; its end said once, and the spec tried again', () => {
    const { state: s, now } = structuredClone(fixtures().Active!);
    s.pod = BAD;
    s.knownBad = strike(null, BAD, now);
    const actions: Action[] = [];
    announceKnownBad(s, now, actions);
    announceKnownBad(s, now, actions);
    expect(s.reason.code).toBe('KnownBadSpec');
    expect(actions.filter((a) => a.type === 'note')).toHaveLength(1);
    probationEnded(s, now + 1, actions);
    expect(s.reason.code).toBe('KnownBadSpec');
    probationEnded(s, s.knownBad.until, actions);
    expect(s.reason.code).toBe('ProbationEnded');
    expect(events(actions)).toEqual(['ProbationEnded']);
  });

  it('overlap: the copy stops sharing for a held spec, unless the spec fails as fast as it starts', () => {
    const { state: s, now } = structuredClone(fixtures({ ...POLICY, handover: 'overlap' }).Active!);
    s.pod = BAD;
    s.exitWatch.readyAfterMs = 1000;
    s.knownBad = strike(null, { ...BAD, lastExitRanMs: 1000 + OWN_SPEC_BIND_SLACK_MS + 1 }, now, PROBATION.overlap);
    expect(exclusiveCopy(s, now)).toBe(true);
    s.pod = null; // unknown after an agent restart: still held
    expect(exclusiveCopy(s, now)).toBe(true);
    s.knownBad = strike(null, { ...BAD, lastExitRanMs: 900 }, now, PROBATION.overlap);
    expect(exclusiveCopy(s, now)).toBe(false);
    const release = structuredClone(fixtures().Active!);
    release.state.knownBad = strike(null, BAD, release.now);
    expect(exclusiveCopy(release.state, release.now)).toBe(false);
  });
});
