// What an on-call engineer asks of a node before a reboot or a rollout: is every parent covered
// right now, and if not, why? And when the agent's actions fail, where does that show?
//
// Promises:
// - `wrap(actuators)` counts every failed action in `lastseen_action_failures_total{action,reason}`
//   (a rejection, a fence included, or a live read that found no api-server), `reason` a bounded code: the errno
//   (ENOSPC, EROFS, ECONNREFUSED), else the api-server's answer (Forbidden, NotFound, Unreachable,
//   Invalid, ...). The wrapped actuators behave exactly as the given ones (same results, same
//   rejections).
// - A capture that fails CAPTURE_FAILING_AFTER times in a row is said where an operator looks: a
//   Warning Event `CaptureFailing` on the parent (once per streak), `captureFailing(id)` (the
//   NodeCheckpoint reason and `lastseen status`), and it ends with the next successful capture.
// - `coverage(view)`: covered when a checkpoint captured from a Ready pod is stored, its copied
//   tokens are valid for at least TOKEN_MARGIN_MS or can be minted again (an api-server answers),
//   and this agent holds the node lock. The margin is not an hour: a token lives an hour by
//   default and the agent renews copies well before they expire, so an hour's margin would call
//   every parent with tokens uncovered whenever the api-server is away, which is the very outage
//   the copies are for. Derived from the state the agent already has; the core
//   decides nothing here.
//
// Assumes: captures are only asked for by the core from a pod whose own beat said Ready (or that
// the api-server reports Ready), so "stored" means "from a Ready pod".
import type { Logger } from 'pino';
import type { Action, Reason } from '../core/types.js';
import { classifyKubeError } from '../kube/errors.js';
import type { Actuators, ParentView } from './agent.js';
import type { AgentMetrics } from './metrics.js';

/** Failures in a row after which a capture is said to be failing: with the core's 5 s doubling back-off, about 35 s. */
export const CAPTURE_FAILING_AFTER = 3;
/**
 * Copied tokens must stay valid at least this long while no api-server can mint new ones. Copies are
 * renewed at 80% of a token's lifetime (12 min before the default hour ends: checkpoint/tokens.ts),
 * so a token closer than 10 min to its end means renewal has stopped.
 */
export const TOKEN_MARGIN_MS = 10 * 60_000;

/** Failures of lastseen's own making, by error class: what the pod mounts cannot be copied (a Secret gone, a field not supported). */
const ERROR_REASONS: Record<string, string> = { CaptureError: 'PodSource', CollectRefusedError: 'CollectRefused' };

/** A bounded label value for a failure: the errno, else what lastseen refused, else the kind of answer the api-server gave. */
export function failureReason(err: unknown): string {
  let e: unknown = err;
  for (let depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z0-9_]{2,}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  const named = ERROR_REASONS[(err as { name?: unknown } | null)?.name as string];
  if (named) return named;
  const k = classifyKubeError(err, '');
  if (k.reason === 'Timeout') return 'Timeout';
  if (k.status === null && k.kind === 'invalid') return 'Other';
  return k.kind.charAt(0).toUpperCase() + k.kind.slice(1);
}

type Transition = Extract<Action, { type: 'transition' }>;

export interface CaptureFailing {
  failures: number;
  /** failureReason of the latest failure. */
  reason: string;
  /** The latest failure, for a person. */
  message: string;
}

export interface Coverage {
  covered: boolean;
  /** CamelCase: Covered, NoCheckpoint, CaptureFailing, TokensExpiring, NoNodeLock. */
  reason: string;
  message: string;
}

export interface CoverageOptions {
  metrics: AgentMetrics;
  log: Logger;
  /** Something a status shows changed (a capture began or stopped failing). */
  onChange(): void;
  /** Earliest expiry (ms since the epoch) of the stored copy's tokens, null without tokens. */
  loadTokenExpiry?(id: string): Promise<number | null>;
  /** Whether this agent holds the node lock (default: always; the loop only runs while it does). */
  lockHeld?(): boolean;
  /** Wall clock (tokens expire on it). */
  wallNow?(): number;
}

export class CoverageWatch {
  private readonly captures = new Map<string, CaptureFailing>();
  /** Earliest token expiry of the stored copy; null: no tokens; absent: not read yet. */
  private readonly tokens = new Map<string, number | null>();
  private readonly loading = new Set<string>();
  /** Monotonic time each parent's hand-over began (for the duration histogram). */
  private readonly handoverStart = new Map<string, number>();

  constructor(private readonly o: CoverageOptions) {}

  /** The same actuators, with their failures counted and captures' streaks followed. */
  wrap<T extends Actuators>(a: T): T {
    const fail = (action: string, p: ParentView, err: unknown): never => {
      this.o.metrics.actionFailures.inc({ action, reason: failureReason(err) });
      if (action === 'capture') this.captureFailed(p, err, a);
      throw err;
    };
    return {
      ...a,
      capture: (p, pod, reason) =>
        a.capture(p, pod, reason).then(
          (r) => {
            this.captureSucceeded(p.id);
            return r;
          },
          (e: unknown) => fail('capture', p, e),
        ),
      activate: (p, reason, exclusive) => a.activate(p, reason, exclusive).catch((e: unknown) => fail('activate', p, e)),
      retire: (p, reason) => a.retire(p, reason).catch((e: unknown) => fail('retire', p, e)),
      collect: (p, reason) => a.collect(p, reason).catch((e: unknown) => fail('collect', p, e)),
      readLive: (p, channels) =>
        a.readLive(p, channels).then(
          (r) => {
            if ('unavailable' in r) this.o.metrics.actionFailures.inc({ action: 'confirm', reason: 'Unreachable' });
            return r;
          },
          (e: unknown) => fail('confirm', p, e),
        ),
      event: (p, e) => a.event(p, e).catch((err: unknown) => fail('event', p, err)),
      fence: (p, podUid, reason, evenIfStarved) => a.fence(p, podUid, reason, evenIfStarved).catch((e: unknown) => fail('fence', p, e)),
      // Without it a redirect parent's copy serves nobody: its failures must show like any other.
      ...(a.redirect
        ? {
            redirect: (p: ParentView, on: boolean, reason: Reason) => a.redirect!(p, on, reason).catch((e: unknown) => fail('redirect', p, e)),
          }
        : {}),
    };
  }

  /** The capture streak of `id`, once it counts as failing (CAPTURE_FAILING_AFTER in a row). */
  captureFailing(id: string): CaptureFailing | undefined {
    const c = this.captures.get(id);
    return c && c.failures >= CAPTURE_FAILING_AFTER ? c : undefined;
  }

  coverage(v: ParentView): Coverage {
    if (this.o.lockHeld && !this.o.lockHeld()) return { covered: false, reason: 'NoNodeLock', message: 'this agent does not hold the node lock' };
    const failing = this.captureFailing(v.id);
    if (!v.state.checkpoint.stored) {
      if (failing)
        return {
          covered: false,
          reason: 'CaptureFailing',
          message: `no checkpoint stored: ${failing.failures} captures failed in a row, the latest: ${failing.message}`,
        };
      return {
        covered: false,
        reason: 'NoCheckpoint',
        message: 'no checkpoint stored yet: one is captured only once the parent reports Ready',
      };
    }
    const expiry = this.tokens.get(v.id);
    if (expiry === undefined) this.readTokens(v.id);
    const now = (this.o.wallNow ?? Date.now)();
    if (typeof expiry === 'number' && expiry < now + TOKEN_MARGIN_MS && !v.state.apiReachable) {
      return {
        covered: false,
        reason: 'TokensExpiring',
        message: `the copied service-account tokens expire at ${new Date(expiry).toISOString()} and no api-server answers to mint new ones`,
      };
    }
    if (failing)
      return {
        covered: true,
        reason: 'CaptureFailing',
        message: `an older checkpoint is stored, but ${failing.failures} captures failed in a row: ${failing.message}`,
      };
    return { covered: true, reason: 'Covered', message: 'a checkpoint from a Ready pod is stored and can run now' };
  }

  /** Set `lastseen_parent_covered` for every parent (Orphaned ones are not parents here any more). */
  observe(views: ParentView[]): void {
    for (const v of views) {
      const labels = { namespace: v.namespace, parent: v.key };
      if (v.state.state === 'Orphaned') this.o.metrics.parentCovered.remove(labels);
      else this.o.metrics.parentCovered.set(labels, this.coverage(v).covered ? 1 : 0);
    }
  }

  /** Histograms of the transitions a person asks "how long" about. `now` is monotonic. */
  onTransition(p: ParentView, a: Transition, now: number): void {
    if (a.to === 'Active' && a.from !== 'Active' && a.from !== 'HandingOver' && p.state.lastChangeAt !== null) {
      // Silence beyond the window before the copy was started: the live read, the grace, the actuator.
      const judged = Math.max(p.state.policy.windowMs, 2 * (p.state.declaredIntervalMs ?? 0));
      this.o.metrics.activationDelay.observe(Math.max(0, now - p.state.lastChangeAt - judged) / 1000);
    }
    if (a.to === 'HandingOver' && a.from !== 'HandingOver') this.handoverStart.set(p.id, now);
    if (a.from === 'HandingOver' && a.to !== 'HandingOver') {
      const start = this.handoverStart.get(p.id);
      this.handoverStart.delete(p.id);
      if (start !== undefined) this.o.metrics.handoverDuration.observe({ result: a.to === 'Healthy' ? 'succeeded' : 'failed' }, (now - start) / 1000);
    }
  }

  forget(id: string, namespace: string, key: string): void {
    this.captures.delete(id);
    this.tokens.delete(id);
    this.handoverStart.delete(id);
    this.o.metrics.parentCovered.remove({ namespace, parent: key });
  }

  private captureSucceeded(id: string): void {
    const was = this.captureFailing(id);
    this.captures.delete(id);
    this.tokens.delete(id);
    this.readTokens(id);
    if (was) {
      this.o.log.info({ parent: id, failures: was.failures }, 'capture succeeded again');
      this.o.onChange();
    }
  }

  private captureFailed(p: ParentView, err: unknown, a: Actuators): void {
    const message = err instanceof Error ? err.message : String(err);
    const failures = (this.captures.get(p.id)?.failures ?? 0) + 1;
    this.captures.set(p.id, { failures, reason: failureReason(err), message });
    if (failures !== CAPTURE_FAILING_AFTER) return;
    this.o.log.warn({ parent: p.id, failures, err: message }, 'capture keeps failing');
    const e: Extract<Action, { type: 'event' }> = {
      type: 'event',
      eventType: 'Warning',
      reason: 'CaptureFailing',
      message: `${failures} captures of ${p.id} failed in a row (${failureReason(err)}): ${message}`.slice(0, 1000),
    };
    a.event(p, e).catch((x: unknown) => this.o.log.warn({ parent: p.id, err: (x as Error)?.message }, 'CaptureFailing Event not recorded'));
    this.o.onChange();
  }

  private readTokens(id: string): void {
    const load = this.o.loadTokenExpiry;
    if (!load || this.loading.has(id)) return;
    this.loading.add(id);
    load(id)
      .then((t) => this.tokens.set(id, t))
      .catch(() => this.tokens.set(id, null))
      .finally(() => this.loading.delete(id));
  }
}
