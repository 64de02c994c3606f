// Slow beats: a parent whose heartbeat sidecar beats every `window - 1s` (`beatInterval`, the
// writer reading another policy than the agent). The beat declares its interval and the
// core judges the parent by max(window, 2 x that interval): never activated against while it beats,
// activated once its beats stop, but only after the widened window.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseScenario, parseScenarioText, runScenario, type ScenarioInput } from '../../src/sim/index.js';
import { type LogEntry, World } from '../../src/sim/world.js';

const apiserver = { key: 'kube-apiserver', kind: 'apiserver', portSharing: true, policy: { whenApiUnreachable: 'activate', handover: 'overlap' } } as const;
/** Window 20s, the sidecar beating every 19s: judged by 38s. */
const slow = { key: 'app', kind: 'app', beatInterval: '19s', policy: { window: '20s' } } as const;
const HANG_AT = 180_000;

function scenario(input: Partial<ScenarioInput>) {
  const r = parseScenario({ name: 'slow-beats', duration: '10m', nodes: [{ name: 'm1', master: true }], parents: [apiserver, slow], ...input });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

const activations = (logs: LogEntry[]) => logs.filter((l) => l.key === 'app' && /CheckpointActivated/.test(l.text));

describe('a parent beating every window - 1s (beatInterval)', () => {
  it.each([1, 2, 3, 4, 5, 6])('is never activated against while it beats (seed %i), and the agent says it judges by 38s', async (seed) => {
    const r = await runScenario(scenario({ duration: '15m' }), { seed });
    expect(r.invariantViolations).toEqual([]);
    expect(activations(r.logs)).toEqual([]);
    expect(r.logs.some((l) => l.key === 'app' && /Warning WindowBelowInterval: .*judging it by 38s/.test(l.text))).toBe(true);
  });

  it.each([1, 2, 3])('is activated against once its beats stop (a 2m hang, seed %i), after the widened window, not the policy one', async (seed) => {
    const r = await runScenario(scenario({ faults: [{ type: 'hang', at: '3m', key: 'app', node: 'm1', duration: '2m', scope: 'pod' }] }), { seed });
    expect(r.verdict).toBe('pass');
    const a = activations(r.logs).filter((l) => l.t >= HANG_AT);
    expect(a).toHaveLength(1);
    // The last beat came at most 19s before the hang, and the agent waits 38s of silence after it:
    // not before 19s into the hang (with the policy's 20s window it could be within 1s).
    expect(a[0]!.t - HANG_AT).toBeGreaterThanOrEqual(19_000);
    expect(a[0]!.t - HANG_AT).toBeLessThanOrEqual(38_000 + 5_000);
    expect(r.outcome.servedAt).not.toBeNull();
  });

  it('the same parent beating at the policy interval is covered sooner (the widening is what delays it)', async () => {
    const fast = scenario({
      parents: [apiserver, { ...slow, beatInterval: undefined }],
      faults: [{ type: 'hang', at: '3m', key: 'app', node: 'm1', duration: '2m', scope: 'pod' }],
    });
    const r = await runScenario(fast);
    const a = activations(r.logs).filter((l) => l.t >= HANG_AT);
    expect(a).toHaveLength(1);
    expect(a[0]!.t - HANG_AT).toBeLessThanOrEqual(20_000 + 5_000);
  });

  it.each([
    ['not a duration', 'soon', 'parents[1].beatInterval'],
    ['below the 100ms floor', '50ms', 'parents[1].beatInterval'],
  ])('a beatInterval %s is refused at %s', (_name, beatInterval, path) => {
    const r = parseScenario({ name: 'x', nodes: [{ name: 'm1', master: true }], parents: [apiserver, { ...slow, beatInterval }] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path)).toContain(path);
  });
});

describe('the invariant judges a slow beater by the widened window', () => {
  /** An activation 16s after a visible Ready beat: a violation for the 19s beater (judged by 38s), not for a 5s one (20s). */
  async function activateAfter(beatInterval: string | undefined, ms: number) {
    const w = new World(scenario({ parents: [apiserver, { ...slow, beatInterval }] }), 1, 'lastseen');
    const m1 = w.nodes.get('m1')!;
    w.invariants.parentBeat(m1, 'app', 'Ready', true);
    await w.q.runUntil(
      ms,
      () => true,
      () => null,
    );
    w.invariants.activating(m1, 'app', { code: 'SilenceConfirmed', message: 'test' });
    return w.invariants.violations.map((v) => v.invariant);
  }
  it('does not judge an activation by a beat written at that very moment (no agent has seen it yet), but does 100ms later', async () => {
    expect(await activateAfter(undefined, 0)).toEqual([]);
    expect(await activateAfter(undefined, 100)).toEqual(['activation-while-fresh']);
  });

  it('flags an activation 16s after a Ready beat of a parent declaring 19s, not of one beating every 5s', async () => {
    expect(await activateAfter('19s', 16_000)).toEqual(['activation-while-fresh']);
    expect(await activateAfter(undefined, 16_000)).toEqual([]);
    expect(await activateAfter('19s', 20_000)).toEqual([]);
  });
});

describe('the example scenario with slow beats', () => {
  it('passes under lastseen', async () => {
    const r = parseScenarioText(readFileSync('examples/scenarios/slow-beats.yaml', 'utf8'));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const run = await runScenario(r.scenario);
    expect(run.verdict).toBe('pass');
    expect(run.expectationFailures).toEqual([]);
  });
});
