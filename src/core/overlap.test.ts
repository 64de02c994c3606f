import { describe, expect, it } from 'vitest';
import { beat, fixtures, POD, POLICY } from './fixtures.test-helpers.js';
import { announceFallback, copyRewritten, exitsUnknown, OWN_SPEC_BIND_SLACK_MS, observeCopy, observeExits, overlapStands } from './overlap.js';
import { OVERLAP_EXITS_FOR_VERDICT } from './probation.js';
import type { Action, ParentState } from './types.js';

const OVERLAP = { ...POLICY, handover: 'overlap' as const };
const copyBeat = (phase: 'Starting' | 'Ready') => beat(phase, { role: 'checkpoint', holder: 'copy', holderUid: 'copy-1' });

/** An overlap parent Active since 6700 (manifest written then), its copy Ready 1 s later, the parent starting beside it. */
function besideReadyCopy(): ParentState {
  const s = structuredClone(fixtures(OVERLAP).Active!.state);
  s.pod = { ...POD, restarts: 0 };
  s.phase = 'Starting';
  observeCopy(s, copyBeat('Ready'), 7700);
  return s;
}

describe('overlap: exits beside a port-sharing copy', () => {
  it('exits count only once a copy from the manifest as last written beats Ready; its time to Ready is kept', () => {
    const s = structuredClone(fixtures(OVERLAP).Active!.state);
    s.pod = { ...POD, restarts: 0 };
    observeCopy(s, copyBeat('Starting'), 7000);
    expect(s.exitWatch.ready).toBe(false);
    observeCopy(s, copyBeat('Ready'), 7700);
    expect(s.exitWatch).toMatchObject({ ready: true, readyAfterMs: 1000, base: { uid: POD.uid, restarts: 0 } });
    expect(s.checkpointHolder).toBe('copy-1');
    // A rewrite: the copy that ran before does not count until a new one is Ready.
    copyRewritten(s, 8000);
    observeCopy(s, copyBeat('Ready'), 8100);
    expect(s.exitWatch.ready).toBe(false);
  });

  it(`another spec's exits are counted; the ${OVERLAP_EXITS_FOR_VERDICT}th is a verdict`, () => {
    const s = besideReadyCopy();
    for (let n = 1; n < OVERLAP_EXITS_FOR_VERDICT; n++) {
      s.pod = { ...POD, specHash: 'h-bad', restarts: n };
      observeExits(s, 8000 + n);
      expect(s.knownBad).toBeNull();
    }
    s.pod = { ...POD, specHash: 'h-bad', restarts: OVERLAP_EXITS_FOR_VERDICT };
    observeExits(s, 9000);
    expect(s.knownBad).toMatchObject({ specHash: 'h-bad', strikes: 1 });
  });

  it("the copy's own spec exiting as fast as a failed bind: the ports are not shared, said once; a long run is no such sign", () => {
    const fast = besideReadyCopy();
    fast.pod = { ...POD, restarts: 1, lastExitRanMs: 1000 + OWN_SPEC_BIND_SLACK_MS };
    observeExits(fast, 9000);
    expect(overlapStands(fast)).toBe(false);
    const actions: Action[] = [];
    announceFallback(fast, actions);
    announceFallback(fast, actions);
    expect(actions.filter((a) => a.type === 'event').map((a) => a.type === 'event' && a.reason)).toEqual(['OverlapUnavailable']);
    const slow = besideReadyCopy();
    slow.pod = { ...POD, restarts: 1, lastExitRanMs: 1001 + OWN_SPEC_BIND_SLACK_MS };
    observeExits(slow, 9000);
    expect(overlapStands(slow)).toBe(true);
  });

  it('no exit: a container lost with its node, or a count reported across an outage with no base listed beside the Ready copy', () => {
    const lost = besideReadyCopy();
    lost.pod = { ...POD, specHash: 'h-bad', restarts: 5, lastExitUnknown: true };
    observeExits(lost, 9000);
    expect(lost.exitWatch.exits).toBeUndefined();
    // The copy not seen Ready yet when the api-server went: a count after it may predate the copy.
    const early = structuredClone(fixtures(OVERLAP).Active!.state);
    early.pod = { ...POD, specHash: 'h-bad', restarts: 0 };
    early.exitWatch.base = { uid: POD.uid, restarts: 0 };
    exitsUnknown(early);
    early.pod = { ...POD, specHash: 'h-bad', restarts: 5 };
    observeExits(early, 9000);
    expect(early.exitWatch.exits).toBeUndefined();
  });

  it('across an outage, a base listed beside the Ready sharing copy still counts (a bad spec whose bound share made the probe fail)', () => {
    const outage = besideReadyCopy();
    outage.pod = { ...POD, specHash: 'h-bad', restarts: 0 };
    outage.phase = 'Starting';
    observeExits(outage, 8000); // the base: listed while the copy was Ready
    exitsUnknown(outage);
    exitsUnknown(outage);
    outage.pod = { ...POD, specHash: 'h-bad', restarts: 2 };
    observeExits(outage, 9000);
    expect(outage.exitWatch.exits).toBe(2);
    expect(outage.exitWatch.base).toEqual({ uid: POD.uid, restarts: 2 });
  });
});
