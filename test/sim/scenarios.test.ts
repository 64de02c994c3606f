import { describe, expect, it } from 'vitest';
import { formatTimeline, namedScenario, renderSvg, runScenario, SCENARIO_NAMES } from '../../src/sim/index.js';

describe('named scenarios under lastseen', () => {
  it.each(SCENARIO_NAMES)('%s passes its invariants and expectations', (name) => {
    const r = runScenario(namedScenario(name)!);
    expect(r.invariantViolations).toEqual([]);
    expect(r.expectationFailures).toEqual([]);
    expect(r.verdict).toBe('pass');
  });

  it.each([1, 2, 3, 42, 1000])('master-reboot recovers the parent itself with seed %i', (seed) => {
    const r = runScenario(namedScenario('master-reboot')!, { seed });
    expect(r.outcome.servedAt).not.toBeNull();
    expect(r.outcome.parentServedAt).not.toBeNull();
    expect(r.outcome.finalServedBy).toBe('parent');
  });

  it('a seed replays a run exactly', () => {
    const a = runScenario(namedScenario('full-cluster-reboot')!, { seed: 7 });
    const b = runScenario(namedScenario('full-cluster-reboot')!, { seed: 7 });
    const c = runScenario(namedScenario('full-cluster-reboot')!, { seed: 8 });
    expect(formatTimeline(a)).toBe(formatTimeline(b));
    expect(formatTimeline(a)).not.toBe(formatTimeline(c));
  });

  it('the timeline shows core transitions with reasons, and the chart has a lane per node and key', () => {
    const r = runScenario(namedScenario('master-reboot')!);
    const text = formatTimeline(r);
    expect(text).toMatch(/Silent -> Active: ApiUnreachable/);
    expect(text).toMatch(/Active -> HandingOver: HandoverStarted/);
    expect(text).toMatch(/verdict: PASS/);
    const svg = renderSvg(r);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('m1 kube-apiserver served by');
    expect(svg).toContain('m1 api-server reachable');
  });

  it('bad-rollout keeps the last good spec on disk and never captures the bad one', () => {
    const r = runScenario(namedScenario('bad-rollout')!);
    expect(r.logs.some((l) => /captured .* generation 2/.test(l.text))).toBe(false);
  });

  it('api-partition: a hold parent is not covered while its node cannot reach the api-server', () => {
    const r = runScenario(namedScenario('api-partition')!);
    expect(r.logs.some((l) => l.node === 'w1' && l.key === 'kube-flannel' && / -> Active/.test(l.text))).toBe(false);
    // Its local beats keep it fresh the whole time: not even a transition.
    expect(r.logs.filter((l) => l.node === 'w1' && l.key === 'kube-flannel' && l.kind === 'core' && l.t > 180_000)).toEqual([]);
    expect(r.logs.some((l) => l.node === 'w1' && /api-server unreachable/.test(l.text))).toBe(true);
  });
});

describe('the old kubelet-pods checkpointer, for comparison (outcomes recorded, not enforced)', () => {
  it('copies a bad rollout over the good checkpoint and then leaves the key unserved', () => {
    const r = runScenario(namedScenario('bad-rollout')!, { strategy: 'kubelet-pods' });
    expect(r.invariantViolations.map((v) => v.invariant)).toContain('not-served');
    expect(r.outcome.finalServedBy).toBeNull();
  });

  it('never hands the node back after the last api-server is deleted', () => {
    const r = runScenario(namedScenario('delete-last-apiserver')!, { strategy: 'kubelet-pods' });
    expect(r.outcome.parentServedAt).toBeNull();
    expect(r.outcome.finalServedBy).toBe('checkpoint');
  });
});
