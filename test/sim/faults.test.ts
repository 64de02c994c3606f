// The process faults: `kill` (the parent's main process dies with no last beat; node, sidecar and
// agent stay up) and `hang` (the process stays and holds its ports, but neither serves nor beats).
// Each test reads what lastseen did from the run's outcome and timeline.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseScenario, parseScenarioText, runScenario, type ScenarioInput, type StrategyName } from '../../src/sim/index.js';
import type { LogEntry } from '../../src/sim/world.js';

/** The api-server shares its port and hands over with overlap (deploy/base/policy.yaml). */
const apiserver = { key: 'kube-apiserver', kind: 'apiserver', portSharing: true, policy: { whenApiUnreachable: 'activate', handover: 'overlap' } } as const;
const app = { key: 'app', kind: 'app', policy: { window: '20s' } } as const;
const FAULT_AT = 180_000;

async function run(input: Partial<ScenarioInput>, strategy: StrategyName = 'lastseen') {
  const r = parseScenario({ name: 'fault', duration: '10m', nodes: [{ name: 'm1', master: true }], parents: [apiserver, app], ...input });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return runScenario(r.scenario, { strategy });
}

const sinceFault = (logs: LogEntry[], key: string) => logs.filter((l) => l.t >= FAULT_AT && l.key === key);
const activated = (logs: LogEntry[], key: string) => sinceFault(logs, key).some((l) => /CheckpointActivated/.test(l.text));

describe('fault kill', () => {
  it('the kubelet restarts the killed process at once (v1.36, no exit on record); Starting beats keep lastseen from activating', async () => {
    const r = await run({ faults: [{ type: 'kill', at: '3m', key: 'app', node: 'm1' }] });
    expect(r.verdict).toBe('pass');
    const logs = sinceFault(r.logs, 'app');
    expect(logs.find((l) => /app-2 exited/.test(l.text))?.text).toMatch(/killed .*restart in 1\.0s \(first exit on record/);
    // No last beat: the sidecar goes on beating Starting (never Stopping) and the core follows it.
    expect(logs.filter((l) => l.kind === 'core').map((l) => l.text.split(':')[0])).toEqual([
      'kube-system/app Healthy -> Starting',
      'kube-system/app Starting -> Healthy',
    ]);
    expect(activated(r.logs, 'app')).toBe(false);
    // Restart after 1 s, then the app's 5 s start: unserved 6 s, served by the parent itself.
    expect(r.outcome.servedAt).toBe(6);
    expect(r.outcome.parentServedAt).toBe(6);
    expect(r.outcome.unservedSeconds).toBe(6);
    expect(r.outcome.finalServedBy).toBe('parent');
  });

  it('a second kill waits the crash-loop back-off (10 s, up to one pod-worker sync late)', async () => {
    const r = await run({
      faults: [
        { type: 'kill', at: '3m', key: 'app', node: 'm1' },
        { type: 'kill', at: '3m30s', key: 'app', node: 'm1' },
      ],
    });
    expect(r.verdict).toBe('pass');
    const exits = sinceFault(r.logs, 'app').filter((l) => /app-2 exited/.test(l.text));
    expect(exits.map((l) => l.t)).toEqual([180_000, 210_000]);
    expect(exits[1]!.text).toMatch(/back-off 10s/);
    const restartS = Number(/restart in ([\d.]+)s/.exec(exits[1]!.text)![1]);
    expect(restartS).toBeGreaterThanOrEqual(10);
    expect(restartS).toBeLessThanOrEqual(15);
    // Unserved: 6 s after the first kill, restart + 5 s start after the second.
    expect(r.outcome.unservedSeconds).toBeCloseTo(6 + restartS + 5, 1);
  });

  it('killing a process that is waiting for its restart changes nothing', async () => {
    const r = await run({
      faults: [
        { type: 'kill', at: '3m', key: 'app', node: 'm1' },
        { type: 'kill', at: '180.5s', key: 'app', node: 'm1' },
      ],
    });
    expect(r.logs.filter((l) => l.text === 'no running app process to kill').map((l) => l.t)).toEqual([180_500]);
    expect(r.logs.filter((l) => /app-2 exited/.test(l.text))).toHaveLength(1);
    expect(r.outcome.unservedSeconds).toBe(6);
  });
});

describe('fault hang', () => {
  it('a hang shorter than the window: no activation, no restart, unserved exactly the hang', async () => {
    const r = await run({ faults: [{ type: 'hang', at: '3m', key: 'app', node: 'm1', duration: '10s', scope: 'pod' }] });
    expect(r.verdict).toBe('pass');
    expect(activated(r.logs, 'app')).toBe(false);
    expect(sinceFault(r.logs, 'app').some((l) => /exited|removed/.test(l.text))).toBe(false);
    expect(r.outcome.servedAt).toBe(10);
    expect(r.outcome.parentServedAt).toBe(10);
    expect(r.outcome.unservedSeconds).toBe(10);
  });

  it('a long hang: lastseen covers it after the window; the checkpoint retires once the process resumes', async () => {
    const r = await run({ faults: [{ type: 'hang', at: '3m', key: 'app', node: 'm1', duration: '2m', scope: 'pod' }] });
    expect(r.verdict).toBe('pass');
    expect(sinceFault(r.logs, 'app').find((l) => /CheckpointActivated/.test(l.text))?.text).toMatch(
      /no beat changed within the window, confirmed by a live read/,
    );
    // Window (20 s) + the live read + the copy's start (5 s): served within 30 s, not after 120.
    expect(r.outcome.servedAt!).toBeGreaterThan(20);
    expect(r.outcome.servedAt!).toBeLessThan(30);
    expect(r.outcome.unservedSeconds).toBe(r.outcome.servedAt);
    // The parent serves alone again shortly after its hang ends (at 120 s).
    expect(r.outcome.parentServedAt!).toBeGreaterThanOrEqual(120);
    expect(r.outcome.parentServedAt!).toBeLessThan(130);
    expect(sinceFault(r.logs, 'app').some((l) => /CheckpointRetired/.test(l.text))).toBe(true);
    // The runtime still lists the hung process as running: runtime-poll never covers it.
    const poll = await run({ faults: [{ type: 'hang', at: '3m', key: 'app', node: 'm1', duration: '2m', scope: 'pod' }] }, 'runtime-poll');
    expect(poll.outcome.servedAt).toBe(120);
    expect(poll.outcome.unservedSeconds).toBe(120);
  });

  it('a hung api-server holds its port: a port-sharing checkpoint runs beside it but cannot win its share back; an exclusive one cannot bind', async () => {
    const fault = { type: 'hang', at: '3m', key: 'kube-apiserver', node: 'm1', duration: '2m', scope: 'pod' } as const;
    const shared = await run({ parents: [apiserver], faults: [fault] });
    expect(shared.verdict).toBe('pass');
    // The checkpoint is activated and serves beside it, but the hung process keeps taking its share
    // of the connections (SO_REUSEPORT), so clients still fail: unserved until the hang ends.
    expect(activated(shared.logs, 'kube-apiserver')).toBe(true);
    expect(shared.outcome.servedAt).toBe(120);
    const exclusive = await run({ parents: [{ ...apiserver, portSharing: false, policy: { whenApiUnreachable: 'activate' } }], faults: [fault] });
    expect(exclusive.verdict).toBe('pass');
    expect(activated(exclusive.logs, 'kube-apiserver')).toBe(true);
    expect(sinceFault(exclusive.logs, 'kube-apiserver').some((l) => /checkpoint-m1 exited: bind :6443: address already in use/.test(l.text))).toBe(true);
    expect(exclusive.outcome.servedAt).toBe(120);
  });
});

describe('schema of the process faults', () => {
  const base = { name: 'x', nodes: [{ name: 'm1', master: true }], parents: [apiserver] };
  it.each([
    ['kill without a key', { type: 'kill', at: '1m', node: 'm1' }, 'faults[0].key'],
    ['kill of an unknown key', { type: 'kill', at: '1m', node: 'm1', key: 'nope' }, 'faults[0].key'],
    ['hang without a duration', { type: 'hang', at: '1m', node: 'm1', key: 'kube-apiserver' }, 'faults[0].duration'],
    ['hang with a bad duration', { type: 'hang', at: '1m', node: 'm1', key: 'kube-apiserver', duration: 'long', scope: 'pod' }, 'faults[0].duration'],
  ])('%s is refused at %s', (_name, fault, path) => {
    const r = parseScenario({ ...base, faults: [fault] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path)).toContain(path);
  });
});

describe('the example scenario with kill and hang', () => {
  it('passes under lastseen, and fails its unserved budget under runtime-poll', async () => {
    const r = parseScenarioText(readFileSync('examples/scenarios/process-faults.yaml', 'utf8'));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const ok = await runScenario(r.scenario);
    expect(ok.verdict).toBe('pass');
    expect(ok.expectationFailures).toEqual([]);
    expect(ok.outcome.unservedSeconds).toBeGreaterThan(20);
    expect(ok.outcome.unservedSeconds).toBeLessThanOrEqual(40);
    const poll = await runScenario(r.scenario, { strategy: 'runtime-poll' });
    expect(poll.outcome.unservedSeconds).toBeGreaterThan(120);
  });
});
