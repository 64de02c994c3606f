// Jitter: a latency fault's added latency may be a range ({min, max}, uniform per message) and may
// differ per direction (toApi: writes and requests; fromApi: responses and watch events). Draws come
// from the node's own seeded stream, so a seed replays them exactly.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Beat } from '../../src/core/types.js';
import { parseScenario, parseScenarioText, runScenario, runWorld, type ScenarioInput, startWorld } from '../../src/sim/index.js';
import { T } from '../../src/sim/model.js';

type LatencyFault = Extract<NonNullable<ScenarioInput['faults']>[number], { type: 'latency' }>;

const FAULT_AT = 120_000;
const FAULT_MS = 60_000;

function scenario(latency: Partial<LatencyFault>) {
  const r = parseScenario({
    name: 'jitter',
    duration: '5m',
    nodes: [
      { name: 'm1', master: true },
      { name: 'w1', master: false },
    ],
    parents: [
      { key: 'kube-apiserver', kind: 'apiserver' },
      { key: 'app', kind: 'app', nodes: ['w1'], policy: { interval: '1s', window: '10s' } },
    ],
    faults: [{ type: 'latency', at: FAULT_AT, node: 'w1', duration: FAULT_MS, ...latency }],
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.scenario;
}

/** Run to the end, recording how long after its round each of w1's app Lease writes landed, and the agent's probe verdicts. */
async function delays(latency: Partial<LatencyFault>, seed = 1) {
  const w = startWorld(scenario(latency), seed);
  const w1 = w.nodes.get('w1')!;
  const rounds = new Map<number, number>();
  const setFile = w1.files.set.bind(w1.files);
  w1.files.set = (file: string, beat: Beat) => {
    if (beat.role === 'parent' && file.includes('app')) rounds.set(beat.sequence, w.q.now);
    return setFile(file, beat);
  };
  const writes: Array<{ t: number; delayMs: number; sequence: number }> = [];
  const write = w.api.writeBeat.bind(w.api);
  w.api.writeBeat = (channel, name, sb) => {
    const round = rounds.get(sb.beat.sequence);
    if (sb.node === 'w1' && sb.key === 'app' && sb.beat.role === 'parent' && round !== undefined)
      writes.push({ t: round, delayMs: w.q.now - round, sequence: sb.beat.sequence });
    write(channel, name, sb);
  };
  await runWorld(w, 300_000);
  const during = writes.filter((x) => x.t >= FAULT_AT && x.t < FAULT_AT + FAULT_MS).map((x) => x.delayMs);
  const after = writes.filter((x) => x.t >= FAULT_AT + FAULT_MS + 1_000).map((x) => x.delayMs);
  const probe = w.logs
    .filter((l) => l.node === 'w1' && l.kind === 'agent' && /^api-server (un)?reachable$/.test(l.text))
    .map((l) => ({ t: l.t, text: l.text }));
  return { during, after, probe, sequences: writes.map((x) => x.sequence), violations: w.invariants.violations };
}

describe('latency as a range, per direction', () => {
  it('toApi {min, max}: each write lands a half round trip plus a uniform draw late, the draws spread, none after the fault', async () => {
    const r = await delays({ toApi: { min: '100ms', max: '400ms' } });
    expect(r.violations).toEqual([]);
    expect(r.during.length).toBeGreaterThan(50);
    for (const d of r.during) {
      expect(d).toBeGreaterThanOrEqual(T.apiRttMs / 2 + 100);
      expect(d).toBeLessThanOrEqual(T.apiRttMs / 2 + 400);
    }
    // Uniform over 300ms: the draws cover most of the range, not one value.
    expect(Math.max(...r.during) - Math.min(...r.during)).toBeGreaterThan(200);
    expect(new Set(r.after)).toEqual(new Set([T.apiRttMs / 2]));
  });

  it('writes of one sidecar land in the order sent, even when the jitter is wider than the interval (one connection)', async () => {
    // Interval 1s, 0-3s to the api-server: drawn alone, a later beat would often overtake an earlier one.
    const r = await delays({ toApi: { min: '0ms', max: '3s' } });
    expect(r.violations).toEqual([]);
    expect(r.sequences.length).toBeGreaterThan(200);
    for (let i = 1; i < r.sequences.length; i++) expect(r.sequences[i]!).toBeGreaterThan(r.sequences[i - 1]!);
    // Queued behind a slow one, a write may wait past its own draw; and production's Lease writer
    // gives a request up at its timeout (half the interval) and tries again within its round, never
    // past the round's deadline (one interval). So a round lands at most an interval plus the range
    // plus a half round trip after it was written locally.
    expect(Math.max(...r.during)).toBeLessThanOrEqual(1_000 + T.apiRttMs / 2 + 3_000);
  });

  it('a seed replays its draws exactly; another seed draws others', async () => {
    const a = await delays({ latency: { min: '50ms', max: '300ms' } }, 7);
    const b = await delays({ latency: { min: '50ms', max: '300ms' } }, 7);
    const c = await delays({ latency: { min: '50ms', max: '300ms' } }, 8);
    expect(a.during).toEqual(b.during);
    expect(a.during).not.toEqual(c.during);
  });

  it('fromApi only: writes land on time while the agent, whose probe is a round trip over its 1s timeout, finds the api-server unreachable', async () => {
    const r = await delays({ fromApi: '1500ms' });
    expect(r.violations).toEqual([]);
    expect(new Set(r.during)).toEqual(new Set([T.apiRttMs / 2]));
    const lost = r.probe.find((p) => p.text === 'api-server unreachable' && p.t >= FAULT_AT);
    expect(lost!.t).toBeLessThan(FAULT_AT + 2 * T.agentProbeMs + 2_000);
    expect(r.probe.some((p) => p.text === 'api-server reachable' && p.t >= FAULT_AT + FAULT_MS)).toBe(true);
    // toApi only, the same size: the writes are late instead.
    const slowWrites = await delays({ toApi: '1500ms' });
    expect(new Set(slowWrites.during)).toEqual(new Set([T.apiRttMs / 2 + 1500]));
  });

  it('the fixed form still means both directions', async () => {
    const r = await delays({ latency: '200ms' });
    expect(new Set(r.during)).toEqual(new Set([T.apiRttMs / 2 + 200]));
    const s = scenario({ latency: '200ms' });
    expect(s.spec.faults[0]).toMatchObject({ latency: { minMs: 200, maxMs: 200 } });
  });
});

describe('schema of the latency fault', () => {
  const base = { name: 'x', nodes: [{ name: 'm1', master: true }], parents: [{ key: 'kube-apiserver', kind: 'apiserver' }] } as const;
  it.each([
    ['max below min', { latency: { min: '2s', max: '1s' } }, 'faults[0].latency.max'],
    ['no latency at all', {}, 'faults[0].latency'],
    ['a bad toApi', { toApi: 'fast' }, 'faults[0].toApi'],
    ['an unknown field in a range', { fromApi: { min: '1s', max: '2s', p99: '3s' } }, 'faults[0].fromApi'],
  ])('%s is refused (%o) at %s', (_name, latency, path) => {
    const r = parseScenario({ ...base, faults: [{ type: 'latency', at: '1m', node: 'm1', duration: '1m', ...latency }] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path)).toContain(path);
  });
});

describe('the example scenario with jitter', () => {
  it('passes under lastseen', async () => {
    const r = parseScenarioText(readFileSync('examples/scenarios/jitter.yaml', 'utf8'));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const run = await runScenario(r.scenario);
    expect(run.verdict).toBe('pass');
    expect(run.expectationFailures).toEqual([]);
  });
});
