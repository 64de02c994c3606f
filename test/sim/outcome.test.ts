// The outcome figures per fault (each fault's recovery, counted in its window: from its `at` to the
// next fault's) and over the whole run (unserved time, activations, hand-over attempts).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formatTimeline, namedScenario, parseScenario, parseScenarioText, runScenario } from '../../src/sim/index.js';

const sum = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) * 10) / 10;

describe('outcome per fault and totals', () => {
  it('the example with kill then hang: each fault its own recovery; the first-fault figures unchanged', async () => {
    const r = parseScenarioText(readFileSync('examples/scenarios/process-faults.yaml', 'utf8'));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const run = await runScenario(r.scenario);
    const o = run.outcome;
    // The text verdict prints a line per fault (when there are several) and the whole run's.
    const text = formatTimeline(run);
    expect(text).toMatch(
      /\n {2}fault 0 \(kill at 120s, until 300s\): served again after 6s; parent itself after 6s; unserved 6s; 0 activation\(s\), 0 hand-over attempt\(s\)\n/,
    );
    expect(text).toMatch(/\n {2}fault 1 \(hang at 300s, until 600s\): served again after 2\d(\.\d)?s; parent itself after 12\d(\.\d)?s; .* 1 activation\(s\)/);
    expect(text).toMatch(/\nwhole run: unserved [\d.]+s after the key first served; 1 activation\(s\), 0 hand-over attempt\(s\)\n/);
    expect(o.perFault.map((f) => [f.index, f.type, f.at, f.until])).toEqual([
      [0, 'kill', 120, 300],
      [1, 'hang', 300, 600],
    ]);
    const [kill, hang] = o.perFault;
    expect(kill).toMatchObject({ servedAt: 6, parentServedAt: 6, unservedSeconds: 6, activations: 0, handoverAttempts: 0 });
    expect(hang!.servedAt!).toBeGreaterThan(20);
    expect(hang!.servedAt!).toBeLessThan(30);
    expect(hang!.parentServedAt!).toBeGreaterThanOrEqual(120);
    expect(hang!.parentServedAt!).toBeLessThan(130);
    expect(hang!.activations).toBe(1);
    // The old figures count from the first fault only: they are the kill's.
    expect([o.servedAt, o.parentServedAt]).toEqual([kill!.servedAt, kill!.parentServedAt]);
    // Unserved time splits exactly between the windows; the whole run adds nothing after the cold start.
    expect(sum(o.perFault.map((f) => f.unservedSeconds))).toBe(o.unservedSeconds);
    expect(o.totals).toEqual({ unservedSeconds: o.unservedSeconds, activations: 1, handoverAttempts: 0 });
  });

  it.each(['master-reboot', 'bad-rollout', 'agent-restart-mid-handover'])('%s: activations and hand-over attempts match the timeline', async (name) => {
    const run = await runScenario(namedScenario(name)!);
    const { node, key } = namedScenario(name)!.focus;
    const mine = run.logs.filter((l) => l.node === node && l.key === key);
    const handovers = mine.filter((l) => l.kind === 'core' && / Active -> HandingOver:/.test(l.text)).length;
    const added = mine.filter((l) => l.kind === 'kubelet' && new RegExp(`pod ${key}-checkpoint-${node} \\(static`).test(l.text)).length;
    const o = run.outcome;
    expect(o.totals.handoverAttempts).toBe(handovers);
    expect(o.totals.handoverAttempts).toBeGreaterThan(0);
    expect(o.totals.activations).toBeGreaterThan(0);
    // Every activation writes the manifest and the kubelet starts a copy (a retire removes it).
    expect(o.totals.activations).toBe(added);
    expect(sum(o.perFault.map((f) => f.activations))).toBe(o.totals.activations);
    expect(sum(o.perFault.map((f) => f.handoverAttempts))).toBe(o.totals.handoverAttempts);
    // Each window's figure is rounded to 0.1 s on its own.
    expect(Math.abs(sum(o.perFault.map((f) => f.unservedSeconds)) - o.unservedSeconds)).toBeLessThanOrEqual(0.1 * o.perFault.length + 1e-9);
  });

  it('agent-restart-mid-handover: the restart has its own recovery, and the reboot no parentServedAt inside its window', async () => {
    const o = (await runScenario(namedScenario('agent-restart-mid-handover')!)).outcome;
    const [reboot, restart] = o.perFault;
    expect(reboot!.type).toBe('reboot');
    expect(reboot!.parentServedAt).toBeNull();
    expect(o.parentServedAt).not.toBeNull();
    expect(restart!.type).toBe('agent-restart');
    expect(restart!.at).toBe(reboot!.until);
    // The parent served again during the restart's window, counted from the restart's own `at`.
    expect(restart!.parentServedAt!).toBeGreaterThan(0);
    expect(restart!.parentServedAt!).toBeCloseTo(o.parentServedAt! - (restart!.at - reboot!.at), 1);
  });

  it('faults at the same moment share one window; a fault that costs nothing reports 0; no fault, no figures', async () => {
    const base = {
      name: 'x',
      duration: '8m',
      nodes: [{ name: 'm1', master: true }],
      parents: [{ key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } }],
    };
    const twin = parseScenario({
      ...base,
      faults: [
        { type: 'clock-step', at: '2m', node: 'm1', step: '30s' },
        { type: 'kill', at: '3m', node: 'm1', key: 'kube-apiserver' },
        { type: 'latency', at: '3m', node: 'm1', latency: '50ms', duration: '10s' },
      ],
    });
    if (!twin.ok) throw new Error(JSON.stringify(twin.errors));
    const o = (await runScenario(twin.scenario)).outcome;
    expect(o.perFault[0]).toMatchObject({ type: 'clock-step', at: 120, until: 180, servedAt: 0, parentServedAt: 0, unservedSeconds: 0 });
    const [, kill, latency] = o.perFault;
    expect(kill!.unservedSeconds).toBeGreaterThan(0);
    expect({ ...latency, index: 1, type: 'kill' }).toEqual(kill);
    // The old figures count from the clock step, the first fault: the kill's stretch is 60 s later.
    expect(o.servedAt).toBeCloseTo(60 + kill!.servedAt!, 1);
    const none = parseScenario(base);
    if (!none.ok) throw new Error(JSON.stringify(none.errors));
    const quiet = (await runScenario(none.scenario)).outcome;
    expect(quiet.perFault).toEqual([]);
    expect(quiet.totals).toEqual({ unservedSeconds: 0, activations: 0, handoverAttempts: 0 });
  });
});
