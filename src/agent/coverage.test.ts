// Failed actions are counted with their reason, a capture that keeps failing is said (Event,
// NodeCheckpoint reason, coverage), and a parent is covered only with a stored copy, tokens that
// last or can be minted, and the node lock.
import { describe, expect, it } from 'vitest';
import { StoreError } from '../checkpoint/errors.js';
import { memoryLogger } from '../core/fake-time.test-helpers.js';
import { POD, start } from '../core/fixtures.test-helpers.js';
import type { Action, Reason } from '../core/types.js';
import type { Actuators, ParentView } from './agent.js';
import { CAPTURE_FAILING_AFTER, CoverageWatch, failureReason, TOKEN_MARGIN_MS } from './coverage.js';
import { AgentMetrics } from './metrics.js';
import { buildStatus } from './status.js';

const R: Reason = { code: 'Test', message: 'test' };

function view(stored: boolean): ParentView {
  return {
    id: 'kube-system/kube-apiserver',
    namespace: 'kube-system',
    key: 'kube-apiserver',
    state: start(undefined, stored),
    pod: {},
    labels: {},
    overrides: [],
  };
}

function actuators(captureError: Error | null) {
  const events: Array<Extract<Action, { type: 'event' }>> = [];
  const a: Actuators = {
    capture: async () => {
      if (captureError) throw captureError;
      return { specHash: 'h1' };
    },
    activate: async () => {
      throw Object.assign(new Error('EROFS: read-only file system'), { code: 'EROFS' });
    },
    retire: async () => {},
    collect: async () => {},
    readLive: async () => ({ unavailable: 'connect ECONNREFUSED 127.0.0.1:6443' }),
    fence: async () => {
      throw Object.assign(new Error('EPERM: operation not permitted, kill'), { code: 'EPERM' });
    },
    event: async (_p, e) => {
      events.push(e);
    },
  };
  return { a, events };
}

async function setup(o: { lockHeld?: boolean; tokenExpiry?: number | null; wallNow?: number } = {}) {
  const metrics = new AgentMetrics(false);
  const { log } = await memoryLogger();
  let changes = 0;
  const watch = new CoverageWatch({
    metrics,
    log,
    onChange: () => changes++,
    lockHeld: () => o.lockHeld ?? true,
    loadTokenExpiry: async () => o.tokenExpiry ?? null,
    wallNow: () => o.wallNow ?? Date.parse('2026-01-01T00:00:00Z'),
  });
  return { metrics, watch, changes: () => changes };
}

const series = async (m: AgentMetrics, name: string) =>
  (await m.registry.metrics())
    .split('\n')
    .filter((l) => l.startsWith(name))
    .join('\n');

describe('failed actions', () => {
  it('are counted by action and reason (errno, api answer), and the wrapped actuators still reject', async () => {
    const { metrics, watch } = await setup();
    const enospc = StoreError.from(Object.assign(new Error('no space left on device'), { code: 'ENOSPC' }), 'write', '/var/lib/lastseen/x');
    const { a } = actuators(enospc);
    const w = watch.wrap(a);
    const v = view(false);
    for (let i = 0; i < 4; i++) await expect(w.capture(v, POD, R)).rejects.toBe(enospc);
    await expect(w.activate(v, R)).rejects.toThrow('EROFS');
    await expect(w.fence(v, 'uid-1', R)).rejects.toThrow('EPERM');
    expect(await w.readLive(v, ['lease'])).toEqual({ unavailable: expect.any(String) });
    const text = await series(metrics, 'lastseen_action_failures_total{');
    expect(text).toContain('lastseen_action_failures_total{action="capture",reason="ENOSPC"} 4');
    expect(text).toContain('lastseen_action_failures_total{action="activate",reason="EROFS"} 1');
    expect(text).toContain('lastseen_action_failures_total{action="confirm",reason="Unreachable"} 1');
    expect(text).toContain('lastseen_action_failures_total{action="fence",reason="EPERM"} 1');
  });

  it('reasons are bounded codes: errno on the cause chain, else the kind of api answer', () => {
    expect(failureReason(Object.assign(new Error('x'), { code: 'ENOSPC' }))).toBe('ENOSPC');
    expect(failureReason(new Error('wrapped', { cause: Object.assign(new Error('y'), { code: 'EACCES' }) }))).toBe('EACCES');
    expect(failureReason({ code: 403, body: '{"reason":"Forbidden"}' })).toBe('Forbidden');
    expect(failureReason({ code: 503 })).toBe('Unreachable');
    expect(failureReason(Object.assign(new Error('t'), { name: 'TimeoutError' }))).toBe('Timeout');
    expect(failureReason(new Error('something else'))).toBe('Other');
    expect(failureReason(Object.assign(new Error('secret ns/x does not exist and is not optional'), { name: 'CaptureError' }))).toBe('PodSource');
  });

  it(`a capture failing ${CAPTURE_FAILING_AFTER} times in a row is a Warning Event (once), the status reason, and uncovered; a success ends it`, async () => {
    const { watch, changes } = await setup();
    const enospc = StoreError.from(Object.assign(new Error('no space left on device'), { code: 'ENOSPC' }), 'write', '/var/lib/lastseen/x');
    const { a, events } = actuators(enospc);
    const w = watch.wrap(a);
    const v = view(false);
    for (let i = 0; i < CAPTURE_FAILING_AFTER - 1; i++) await w.capture(v, POD, R).catch(() => {});
    expect(watch.captureFailing(v.id)).toBeUndefined();
    for (let i = 0; i < 3; i++) await w.capture(v, POD, R).catch(() => {});
    expect(events).toEqual([expect.objectContaining({ eventType: 'Warning', reason: 'CaptureFailing', message: expect.stringContaining('ENOSPC') })]);
    expect(changes()).toBe(1);
    const status = buildStatus('n1', [v], 0, Date.parse('2026-01-01T00:00:00Z'), [], undefined, watch);
    expect(status.parents?.[0]).toMatchObject({
      state: 'Pending',
      reason: 'CaptureFailing',
      message: expect.stringMatching(/^ENOSPC: 5 captures failed in a row/),
      covered: false,
      coverageReason: 'CaptureFailing',
    });
    // The next capture works: the streak ends, the status is poked again.
    const ok = actuators(null);
    await watch.wrap(ok.a).capture(v, POD, R);
    expect(watch.captureFailing(v.id)).toBeUndefined();
    expect(changes()).toBe(2);
  });
});

describe('coverage', () => {
  it('covered with a stored copy and the lock; not without a copy, nor without the lock', async () => {
    expect((await setup()).watch.coverage(view(true))).toMatchObject({ covered: true, reason: 'Covered' });
    expect((await setup()).watch.coverage(view(false))).toMatchObject({ covered: false, reason: 'NoCheckpoint' });
    expect((await setup({ lockHeld: false })).watch.coverage(view(true))).toMatchObject({ covered: false, reason: 'NoNodeLock' });
  });

  it('tokens expiring within the margin leave it uncovered only when no api-server can mint new ones', async () => {
    const wallNow = Date.parse('2026-01-01T00:00:00Z');
    const { watch, metrics } = await setup({ wallNow, tokenExpiry: wallNow + TOKEN_MARGIN_MS / 2 });
    const v = view(true);
    watch.coverage(v); // reads the stored copy's tokens
    await new Promise((r) => setImmediate(r));
    expect(watch.coverage(v)).toMatchObject({ covered: true });
    v.state = { ...v.state, apiReachable: false };
    expect(watch.coverage(v)).toMatchObject({ covered: false, reason: 'TokensExpiring' });
    watch.observe([v]);
    expect(await series(metrics, 'lastseen_parent_covered{')).toBe('lastseen_parent_covered{namespace="kube-system",parent="kube-apiserver"} 0');
  });

  it('activations are exported at 0 from the start; the histograms exist', async () => {
    const { metrics } = await setup();
    const text = await metrics.registry.metrics();
    expect(text).toContain('lastseen_activations_total{reason="SilenceConfirmed"} 0');
    expect(text).toContain('lastseen_handover_duration_seconds_count{result="succeeded"} 0');
    expect(text).toContain('# TYPE lastseen_activation_delay_seconds histogram');
  });
});
