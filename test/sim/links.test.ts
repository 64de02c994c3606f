// Links: a `link` fault cuts the packets between a node and another node, or the api-server's
// address, in one direction or both (src/sim/network.ts). What crosses a link in the model: a
// client's requests to an api-server instance and that instance's answers and watch events.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseScenario, parseScenarioText, runScenario, runWorld, type ScenarioInput, startWorld } from '../../src/sim/index.js';

const CUT_AT = 180_000;
const CUT_MS = 120_000;
const apiserver = { key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } } as const;
const app = { key: 'kube-flannel', kind: 'app' } as const;

type Fault = NonNullable<ScenarioInput['faults']>[number];

function scenario(nodes: ScenarioInput['nodes'], faults: Fault[], duration = '10m') {
  const r = parseScenario({ name: 'links', duration, nodes, parents: [apiserver, app], faults });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

/** Run to the end; record when w1's parent Lease was written into the api-server, and the world's reachability lines. */
async function run(nodes: ScenarioInput['nodes'], faults: Fault[], seed = 1) {
  const w = startWorld(scenario(nodes, faults), seed);
  const leaseWrites: number[] = [];
  const write = w.api.writeBeat.bind(w.api);
  w.api.writeBeat = (channel, name, sb) => {
    if (sb.node === 'w1' && sb.key === 'kube-flannel' && sb.beat.role === 'parent' && channel === 'lease') leaseWrites.push(w.q.now);
    write(channel, name, sb);
  };
  await runWorld(w, 600_000);
  const during = (t: number) => t > CUT_AT + 5_000 && t < CUT_AT + CUT_MS;
  const reach = (node: string) =>
    w.logs.filter((l) => l.node === node && l.kind === 'api').map((l) => ({ t: l.t, up: /reachable from/.test(l.text) && !/unreachable/.test(l.text) }));
  const agentSaw = (node: string) =>
    w.logs.filter((l) => l.node === node && l.kind === 'agent' && /^api-server (un)?reachable$/.test(l.text)).map((l) => ({ t: l.t, text: l.text }));
  const activated = w.logs.some((l) => l.node === 'w1' && l.t >= CUT_AT && /CheckpointActivated/.test(l.text));
  const after = (t: number) => t > CUT_AT + CUT_MS + 5_000 && t < CUT_AT + 2 * CUT_MS;
  return {
    w,
    leaseWritesDuring: leaseWrites.filter(during).length,
    leaseWritesAfter: leaseWrites.filter(after).length,
    reach,
    agentSaw,
    activated,
    violations: w.invariants.violations,
  };
}

const oneMaster = [{ name: 'm1', master: true }, { name: 'w1' }];

describe('a link to the api-server cut in one direction is not a partition', () => {
  it("in (answers and watch events to w1 lost): w1's requests arrive but are never answered, and its agent finds the api-server unreachable", async () => {
    const r = await run(oneMaster, [{ type: 'link', at: CUT_AT, from: 'w1', to: 'api-server', direction: 'in', duration: CUT_MS }]);
    expect(r.violations).toEqual([]);
    // Production's Lease writer replaces the copy it last got back: its first request of the cut may
    // land, unanswered, and every later one carries a resourceVersion that one replaced (a 409 it
    // never hears). So at most one round lands during the cut, and the rounds land again after it.
    expect(r.leaseWritesDuring).toBeLessThanOrEqual(1);
    expect(r.leaseWritesAfter).toBeGreaterThanOrEqual(20);
    const lost = r.agentSaw('w1').find((a) => a.t >= CUT_AT && a.text === 'api-server unreachable');
    expect(lost!.t).toBeLessThan(CUT_AT + 3_000);
    expect(r.agentSaw('w1').some((a) => a.t >= CUT_AT + CUT_MS && a.text === 'api-server reachable')).toBe(true);
    // The local channel keeps the parent Healthy: nothing is activated.
    expect(r.activated).toBe(false);
  });

  it('out (w1 requests lost): no Lease of w1 lands, as in a partition; both leave m1 untouched', async () => {
    for (const f of [
      { type: 'link', at: CUT_AT, from: 'w1', to: 'api-server', direction: 'out', duration: CUT_MS },
      { type: 'partition', at: CUT_AT, node: 'w1', duration: CUT_MS },
    ] as Fault[]) {
      const r = await run(oneMaster, [f]);
      expect(r.violations).toEqual([]);
      expect(r.leaseWritesDuring).toBe(0);
      expect(r.agentSaw('w1').some((a) => a.t >= CUT_AT && a.t < CUT_AT + 3_000 && a.text === 'api-server unreachable')).toBe(true);
      expect(r.reach('m1').filter((x) => x.t >= CUT_AT)).toEqual([]);
      expect(r.activated).toBe(false);
    }
  });

  it('both ways between w1 and the master is the same cut as w1 to the api-server when the master is the only instance', async () => {
    const a = await run(oneMaster, [{ type: 'link', at: CUT_AT, from: 'w1', to: 'm1', duration: CUT_MS }]);
    const b = await run(oneMaster, [{ type: 'link', at: CUT_AT, from: 'w1', to: 'api-server', duration: CUT_MS }]);
    expect(a.reach('w1')).toEqual(b.reach('w1'));
    expect(a.reach('w1').filter((x) => x.t >= CUT_AT)).toEqual([
      { t: CUT_AT, up: false },
      { t: CUT_AT + CUT_MS, up: true },
    ]);
  });
});

describe('a master cut from the api-server address is not partitioned', () => {
  it('m1 -> api-server out: m1 loses the api-server, its instance keeps serving w1; a partition of m1 takes it from w1 too', async () => {
    const cut = await run(oneMaster, [{ type: 'link', at: CUT_AT, from: 'm1', to: 'api-server', direction: 'out', duration: CUT_MS }]);
    expect(cut.violations).toEqual([]);
    expect(cut.reach('m1').filter((x) => x.t >= CUT_AT)).toEqual([
      { t: CUT_AT, up: false },
      { t: CUT_AT + CUT_MS, up: true },
    ]);
    expect(cut.reach('w1').filter((x) => x.t >= CUT_AT)).toEqual([]);
    expect(cut.leaseWritesDuring).toBeGreaterThanOrEqual(20);
    const partition = await run(oneMaster, [{ type: 'partition', at: CUT_AT, node: 'm1', duration: CUT_MS }]);
    expect(partition.violations).toEqual([]);
    expect(partition.reach('w1').filter((x) => x.t >= CUT_AT)[0]).toEqual({ t: CUT_AT, up: false });
    expect(partition.leaseWritesDuring).toBe(0);
  });
});

describe('a node that reaches the api-server only through one master', () => {
  const three = [{ name: 'm1', master: true }, { name: 'm2', master: true }, { name: 'm3', master: true }, { name: 'w1' }];
  const onlyThroughM3: Fault[] = [
    { type: 'link', at: '1m', from: 'w1', to: 'm1', duration: '8m' },
    { type: 'link', at: '1m', from: 'w1', to: 'm2', duration: '8m' },
  ];
  const rebootM3: Fault = { type: 'reboot', at: CUT_AT, node: 'm3', down: '60s' };

  it('keeps the api-server while m3 serves, loses it while m3 is down though m1 and m2 serve', async () => {
    const r = await run(three, [...onlyThroughM3, rebootM3]);
    expect(r.violations).toEqual([]);
    // Cutting two of three instances changes nothing for w1.
    expect(r.reach('w1').filter((x) => x.t >= 60_000 && x.t < CUT_AT)).toEqual([]);
    const w1 = r.reach('w1').filter((x) => x.t >= CUT_AT);
    expect(w1[0]).toEqual({ t: CUT_AT, up: false });
    // m3's api-server is back (power, kubelet, its start): w1 with it.
    expect(w1[1]!.up).toBe(true);
    expect(w1[1]!.t).toBeGreaterThan(CUT_AT + 60_000);
    expect(r.reach('m1').filter((x) => x.t >= CUT_AT)).toEqual([]);
    expect(r.activated).toBe(false);
  });

  it('without the cuts, the reboot of m3 goes unnoticed on w1', async () => {
    const r = await run(three, [rebootM3]);
    expect(r.violations).toEqual([]);
    expect(r.reach('w1').filter((x) => x.t >= CUT_AT)).toEqual([]);
  });
});

describe('lastseen keeps its invariants across links', () => {
  const two = [{ name: 'm1', master: true }, { name: 'm2', master: true }, { name: 'w1' }];
  const cases: Array<[string, Fault[]]> = [];
  for (const direction of ['both', 'out', 'in'] as const) {
    cases.push([`w1 -> api-server ${direction}`, [{ type: 'link', at: CUT_AT, from: 'w1', to: 'api-server', direction, duration: CUT_MS }]]);
    cases.push([`m1 -> api-server ${direction}`, [{ type: 'link', at: CUT_AT, from: 'm1', to: 'api-server', direction, duration: CUT_MS }]]);
    cases.push([
      `m1 -> m2 ${direction} + reboot m2`,
      [
        { type: 'link', at: CUT_AT, from: 'm1', to: 'm2', direction, duration: CUT_MS },
        { type: 'reboot', at: CUT_AT + 30_000, node: 'm2' },
      ],
    ]);
  }
  it.each(cases)('%s, seeds 1..4', async (_name, faults) => {
    for (let seed = 1; seed <= 4; seed++) {
      const r = await runScenario(scenario(two, faults), { seed, keepLogs: false });
      expect(r.invariantViolations).toEqual([]);
      expect(r.verdict).toBe('pass');
    }
  });
});

describe('schema of the link fault', () => {
  const base = { name: 'x', nodes: [{ name: 'm1', master: true }, { name: 'w1' }], parents: [apiserver] };
  it.each([
    ['an unknown from', { from: 'w9', to: 'm1' }, 'faults[0].from'],
    ['an unknown to', { from: 'w1', to: 'm9' }, 'faults[0].to'],
    ['a link to itself', { from: 'w1', to: 'w1' }, 'faults[0].to'],
    ['a bad direction', { from: 'w1', to: 'm1', direction: 'sideways' }, 'faults[0].direction'],
    ['no duration', { from: 'w1', to: 'm1', duration: undefined }, 'faults[0].duration'],
  ])('%s is refused (%o) at %s', (_name, link, path) => {
    const r = parseScenario({ ...base, faults: [{ type: 'link', at: '1m', duration: '1m', ...link }] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path)).toContain(path);
  });

  it('refuses `to: api-server` when a node has that name', () => {
    const r = parseScenario({
      ...base,
      nodes: [...base.nodes, { name: 'api-server' }],
      faults: [{ type: 'link', at: '1m', from: 'w1', to: 'api-server', duration: '1m' }],
    });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors).toContainEqual({ path: 'faults[0].to', message: expect.stringMatching(/ambiguous/) });
  });

  it("defaults the direction to both, the focus to the link's from and the first parent running there (not the masters' api-server)", () => {
    const s = scenario(oneMaster, [{ type: 'link', at: '1m', from: 'w1', to: 'api-server', duration: '1m' }]);
    expect(s.spec.faults[0]).toMatchObject({ direction: 'both' });
    expect(s.focus).toEqual({ node: 'w1', key: 'kube-flannel' });
  });
});

describe('the example scenario with links', () => {
  it('passes under lastseen', async () => {
    const r = parseScenarioText(readFileSync('examples/scenarios/links.yaml', 'utf8'));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const run = await runScenario(r.scenario);
    expect(run.verdict).toBe('pass');
    expect(run.expectationFailures).toEqual([]);
  });
});
