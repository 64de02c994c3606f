// The outcome figures per fault (each fault's recovery, counted in its window: from its `at` to the
// next fault's) and over the whole run (unserved time, activations, hand-over attempts).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { manifestFile } from '../../src/core/names.js';
import { scheduleFaults } from '../../src/sim/faults.js';
import { formatTimeline, namedScenario, parseScenario, parseScenarioText, runScenario, timelineEvents } from '../../src/sim/index.js';
import { AGENT_MANIFEST } from '../../src/sim/model.js';
import { specFor, World } from '../../src/sim/world.js';

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
    expect(text).toMatch(
      /\nwhole run: unserved [\d.]+s after the key first served; 1 activation\(s\), 0 hand-over attempt\(s\); checkpoint served generation 1, 0s beside a live parent\n/,
    );
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
    // The checkpoint served (generation 1) during the hang only, never beside a live parent.
    expect([kill!.checkpointGenerations, hang!.checkpointGenerations]).toEqual([[], [1]]);
    expect([kill!.checkpointWhileParentAliveSeconds, hang!.checkpointWhileParentAliveSeconds]).toEqual([0, 0]);
    expect(o.totals).toEqual({
      unservedSeconds: o.unservedSeconds,
      activations: 1,
      handoverAttempts: 0,
      checkpointGenerations: [1],
      checkpointWhileParentAliveSeconds: 0,
    });
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
    expect(quiet.totals).toEqual({ unservedSeconds: 0, activations: 0, handoverAttempts: 0, checkpointGenerations: [], checkpointWhileParentAliveSeconds: 0 });
  });

  it('the checkpoint generation that served: the old spec covers a rollout under lastseen; runtime-poll serves the new one too, in order', async () => {
    for (const name of ['bad-rollout', 'rollout-delete-first']) {
      const o = (await runScenario(namedScenario(name)!)).outcome;
      expect([name, o.perFault[0]!.checkpointGenerations, o.totals.checkpointGenerations]).toEqual([name, [1], [1]]);
    }
    // An api-server that binds 1 s after its start (not 1 s before Ready): the new spec's first binds
    // fail on the copy's port, runtime-poll's copy retires, and its next activation serves generation
    // 2. Seed 15: with the kubelet's relist on its reflector's back-off that comes in 1 seed of 20.
    const early = namedScenario('rollout-delete-first')!;
    const poll = (await runScenario({ ...early, parents: early.parents.map((p) => ({ ...p, bindMs: 1_000 })) }, { strategy: 'runtime-poll', seed: 15 }))
      .outcome;
    expect(poll.totals.checkpointGenerations).toEqual([1, 2]);
    // A reboot with overlap: the parent starts beside its active checkpoint (a hand-over, not counted).
    const overlap = (await runScenario(namedScenario('master-reboot-overlap')!)).outcome;
    expect(overlap.totals).toMatchObject({ checkpointGenerations: [1], checkpointWhileParentAliveSeconds: 0 });
  });

  it('the time a checkpoint served beside a parent alive since before its activation is counted; beside a parent that came back, it is not', async () => {
    // No agent on the node: the test activates the checkpoint of an app without ports (nothing
    // keeps the copy from running beside its parent) by hand, once while the parent serves (3m..5m)
    // and once while it hangs (6m30s, retired 9m; the parent resumes at 8m, beside it).
    const r = parseScenario({
      name: 'beside',
      duration: '10m',
      nodes: [{ name: 'm1', master: true }],
      parents: [
        { key: 'kube-apiserver', kind: 'apiserver' },
        { key: 'cni', kind: 'app', startTime: '5s' },
      ],
      faults: [
        { type: 'clock-step', at: '3m', node: 'm1', step: '0s' },
        { type: 'hang', at: '6m', node: 'm1', key: 'cni', duration: '2m', scope: 'pod' },
      ],
      focus: { node: 'm1', key: 'cni' },
    });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const w = new World(r.scenario, 1, 'runtime-poll');
    const disk = w.nodes.get('m1')!.disk.manifests;
    disk.delete(AGENT_MANIFEST);
    w.bootstrap();
    scheduleFaults(w);
    const file = manifestFile('kube-system', 'cni');
    const activate = () => disk.set(file, { role: 'checkpoint', spec: specFor(w.parentDef('cni'), 1, true) });
    w.q.at(180_000, activate);
    w.q.at(300_000, () => disk.delete(file));
    w.q.at(390_000, activate);
    w.q.at(540_000, () => disk.delete(file));
    await w.q.runUntil(
      600_000,
      () => w.afterEvent(),
      () => w.settle(),
    );
    const o = w.outcome.figures(w.q.now);
    const [first, hang] = o.perFault;
    // The copy starts within a few seconds of the manifest (the kubelet notices, then 5 s to Ready)
    // and serves until its manifest is removed at 5m: beside the parent the whole time, which keeps
    // serving the key (so no checkpoint generation "served" it).
    expect(first!.checkpointWhileParentAliveSeconds).toBeGreaterThan(110);
    expect(first!.checkpointWhileParentAliveSeconds).toBeLessThanOrEqual(115);
    expect(first!.checkpointGenerations).toEqual([]);
    // During the hang the copy serves alone; once the parent resumes it serves beside it, uncounted.
    expect(hang!.checkpointGenerations).toEqual([1]);
    expect(hang!.checkpointWhileParentAliveSeconds).toBe(0);
    expect(o.totals.checkpointWhileParentAliveSeconds).toBe(first!.checkpointWhileParentAliveSeconds);
    expect(o.totals.activations).toBe(2);
  });
});

describe('one measure of service', () => {
  // A process that holds a share of the port without serving fails that share: the outcome counts
  // the key unserved, and the node's "api-server reachable" line (probes, the kubelet, the lanes of
  // the picture) says unreachable for exactly the same stretches. One master, so nothing else serves.
  it.each(['apiserver-hang', 'apiserver-hang-release', 'bad-rollout-overlap', 'stumbling-rollout'])(
    '%s: unreachable stretches on the master add up to the outcome unserved time (seeds 1..4)',
    async (name) => {
      for (let seed = 1; seed <= 4; seed++) {
        const r = await runScenario(namedScenario(name)!, { seed, keepLogs: true });
        const from = r.outcome.perFault[0]!.at;
        let down: number | null = null;
        let total = 0;
        for (const e of timelineEvents(r)) {
          if (e.node !== 'm1' || e.kind !== 'api') continue;
          if (e.text === 'api-server unreachable from this node') down ??= Math.max(e.t, from);
          if (e.text === 'api-server reachable from this node' && down !== null) {
            if (e.t > from) total += e.t - down;
            down = null;
          }
        }
        if (down !== null) total += r.endedAt - down;
        expect(Math.abs(total - r.outcome.unservedSeconds), `${name} seed ${seed}: lanes ${total}, outcome ${r.outcome.unservedSeconds}`).toBeLessThanOrEqual(
          0.2,
        );
      }
    },
  );
});
