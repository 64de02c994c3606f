// Observer of the agent's policy: a mounted file (`--policy-file`, polled) or the ConfigMap
// `lastseen-policy`, key `policy.yaml`, in the agent's namespace (watched with the informer).
//
// Promises:
// - Every text is validated with parsePolicyText. A valid one that changes the effective policy
//   is emitted with `onPolicy`; re-reading the same policy (same text, or only comments or
//   whitespace changed) emits nothing.
// - An invalid one is refused: `onInvalid(errors)` once per distinct bad text, `isValid()` false,
//   and the last good policy stays `current()`. The next good (or missing) observation always
//   emits `onPolicy`, even if it equals the last good one, so the agent can set valid back to 1.
// - No file, no ConfigMap (deleted, or never there): the LAST GOOD policy stays in force
//   (dropping to the built-in defaults would silently lose overrides such as the api-server's
//   `whenApiUnreachable: activate`); `onMissing` says so, once per disappearance, and `isMissing()`
//   is true until a policy text is seen again. Only with no last good policy at all (none read
//   since start and none given as `lastGood`, e.g. persisted by the agent) the built-in
//   defaultPolicy() applies. A missing policy is not a refused one: `isValid()` stays true.
//   The first policy text read after a disappearance always emits `onPolicy` with its text, even
//   when it is the very policy kept meanwhile: restoring the same file or ConfigMap is how an
//   operator clears "missing", and the agent clears it only on a policy read from a document.
//   A ConfigMap without the key, or a file that cannot be read, is refused, not defaulted: it is
//   most likely a mistake, and the last good policy is safer than the defaults.
// - Until the first observation, `current()` is the `lastGood` policy given, else defaultPolicy(),
//   and `isValid()` is true.
// - Callbacks never throw into the source; none run after `stop()` resolves.
//
// Assumes: a mounted ConfigMap is updated by the kubelet through a symlink swap; polling the
// path's content sees that, where fs.watch on the file would keep watching the old inode.
// With the ConfigMap source, nothing changes while the api-server is unreachable: the last policy
// seen stays in force (after a restart without an api-server, the `lastGood` the caller persisted).
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { every, type Periodic } from '../../core/time.js';
import { type InformerTransport, type KubeObject, makeInformer } from '../../kube/informer.js';
import { defaultPolicy, type Policy, type PolicyError, parsePolicyText } from '../../policy/policy.js';
import type { Clock, Timers } from '../agent.js';

export const POLICY_CONFIGMAP_NAME = 'lastseen-policy';
export const POLICY_CONFIGMAP_KEY = 'policy.yaml';
/**
 * Default file poll. Policy edits are rare and never urgent (they change windows of tens of
 * seconds); the kubelet itself takes up to a minute to refresh a mounted ConfigMap.
 */
export const POLICY_POLL_MS = 5_000;
/** A ConfigMap holds at most 1 MiB; a policy file larger than that is not a policy. */
export const MAX_POLICY_BYTES = 1024 * 1024;

export interface PolicyCallbacks {
  /**
   * A new effective policy (or validity regained). `origin` names where it came from; `text` is the
   * validated document when the policy was read from one (what to persist as the last good policy),
   * absent when it is the last good policy or the defaults kept because the source is missing.
   */
  onPolicy(policy: Policy, origin: string, text?: string): void;
  /** A refused policy; the previous one stays in force. */
  onInvalid(errors: PolicyError[], origin: string): void;
  /** No policy file or ConfigMap; `using` says what stays in force. Once per disappearance. */
  onMissing?(origin: string, using: 'last-good' | 'defaults'): void;
}

/** A policy known good before this source's first observation (the agent persists one). */
export interface LastGoodPolicy {
  policy: Policy;
  /** Where it came from, for logs and Events. */
  origin: string;
}

export interface PolicySource {
  start(): void;
  stop(): Promise<void>;
  /** The policy in force: the last valid one seen, else the built-in defaults. */
  current(): Policy;
  /** False while the latest observation is refused. */
  isValid(): boolean;
  /** True while the latest observation is "no policy file or ConfigMap". */
  isMissing(): boolean;
}

export interface FilePolicySource extends PolicySource {
  /** Read the file now (the timer's reads and this one never overlap). */
  checkNow(): Promise<void>;
}

export interface FilePolicyOptions extends PolicyCallbacks {
  path: string;
  /** In force until the first read, and kept if the file is missing. */
  lastGood?: LastGoodPolicy | null;
  /** Default POLICY_POLL_MS. */
  pollMs?: number;
  log: Logger;
  timers: Timers;
}

export interface ConfigMapPolicyOptions extends PolicyCallbacks {
  kubeConfig: KubeConfig;
  /** The agent's namespace. */
  namespace: string;
  /** Default POLICY_CONFIGMAP_NAME. */
  name?: string;
  /** In force until the first sync (or for as long as the api-server is away), and kept if the ConfigMap is missing. */
  lastGood?: LastGoodPolicy | null;
  /** Default POLICY_CONFIGMAP_KEY. */
  key?: string;
  log: Logger;
  clock: Clock;
  timers: Timers;
  /** Passed to the informer (defaults there). */
  watchdogMs?: number;
  requestTimeoutMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  onHealth?(ok: boolean, reason: string): void;
  /** Replaces HTTP (tests). */
  transport?: InformerTransport;
}

/** What was observed: the text, nothing, or a reason it could not be had. */
type Observation = { text: string } | { missing: true } | { refused: PolicyError[]; key: string };

/** The validation and change detection both sources share. */
export class PolicyTracker {
  private policy: Policy;
  private valid = true;
  private missing = false;
  private lastGood: LastGoodPolicy | null;
  private lastKey: string | null = null;
  private lastEmitted: string | null = null;
  stopped = false;

  constructor(
    private readonly log: Logger,
    private readonly cb: PolicyCallbacks,
    lastGood: LastGoodPolicy | null = null,
  ) {
    this.lastGood = lastGood;
    this.policy = lastGood?.policy ?? defaultPolicy();
  }

  current(): Policy {
    return this.policy;
  }

  isValid(): boolean {
    return this.valid;
  }

  isMissing(): boolean {
    return this.missing;
  }

  observe(o: Observation, origin: string): void {
    if (this.stopped) return;
    const key = 'text' in o ? `text:${o.text}` : 'missing' in o ? 'missing' : `refused:${o.key}`;
    if (key === this.lastKey) return;
    this.lastKey = key;
    let errors: PolicyError[];
    const returned = this.missing && 'text' in o;
    this.missing = 'missing' in o;
    if ('refused' in o) {
      errors = o.refused;
    } else if ('missing' in o) {
      const kept = this.lastGood;
      if (kept) {
        this.log.warn({ origin, keeping: kept.origin }, 'no policy found; keeping the last good policy');
        this.accept(kept.policy, `last good policy (${kept.origin})`);
      } else {
        this.log.warn({ origin }, 'no policy found and no last good one; using the built-in defaults');
        this.accept(defaultPolicy(), 'built-in defaults');
      }
      this.call('onMissing', () => this.cb.onMissing?.(origin, kept ? 'last-good' : 'defaults'));
      return;
    } else {
      const r = parsePolicyText(o.text);
      if (r.ok) {
        this.lastGood = { policy: r.policy, origin };
        this.accept(r.policy, origin, o.text, returned);
        return;
      }
      errors = r.errors;
    }
    this.valid = false;
    this.log.warn({ origin, errors }, 'policy refused; keeping the last valid one');
    this.call('onInvalid', () => this.cb.onInvalid(errors, origin));
  }

  /** `returned`: a policy text is read again after the source was missing (emitted even if unchanged). */
  private accept(p: Policy, origin: string, text?: string, returned = false): void {
    const json = JSON.stringify(p);
    const regained = !this.valid;
    this.valid = true;
    this.policy = p;
    if (json === this.lastEmitted && !regained && !returned) return;
    this.lastEmitted = json;
    this.log.info({ origin, overrides: p.overrides.map((o) => o.name), regained, returned }, 'policy applied');
    this.call('onPolicy', () => (text === undefined ? this.cb.onPolicy(p, origin) : this.cb.onPolicy(p, origin, text)));
  }

  private call(what: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.log.error({ callback: what, error: (e as Error)?.message ?? String(e) }, 'policy callback threw; carrying on');
    }
  }
}

export function filePolicySource(opts: FilePolicyOptions): FilePolicySource {
  const pollMs = opts.pollMs ?? POLICY_POLL_MS;
  if (!(pollMs > 0)) throw new Error(`policy file: pollMs must be positive, got ${pollMs}`);
  const log = opts.log.child({ observer: 'policy', file: opts.path });
  const tracker = new PolicyTracker(log, opts, opts.lastGood ?? null);
  const origin = `file ${opts.path}`;
  let started = false;
  let poll: Periodic | null = null;
  let running: Promise<void> | null = null;

  async function read(): Promise<Observation> {
    try {
      const bytes = await readFile(opts.path);
      if (bytes.length > MAX_POLICY_BYTES) {
        return {
          refused: [{ path: '(document)', message: `${opts.path} is ${bytes.length} bytes, more than a policy can be (${MAX_POLICY_BYTES})` }],
          key: `size:${bytes.length}`,
        };
      }
      return { text: bytes.toString('utf8') };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return { missing: true };
      const message = `cannot read ${opts.path}: ${(e as Error).message}`;
      return { refused: [{ path: '(document)', message }], key: message };
    }
  }

  const checkNow = (): Promise<void> => {
    running ??= read()
      .then((o) => tracker.observe(o, origin))
      .catch((e) => log.error({ error: (e as Error).message }, 'policy file check failed unexpectedly'))
      .finally(() => {
        running = null;
      });
    return running;
  };

  return {
    start() {
      if (started || tracker.stopped) return;
      started = true;
      void checkNow();
      poll = every(opts.timers, pollMs, checkNow);
    },
    async stop() {
      tracker.stopped = true;
      await poll?.stop();
      await running;
    },
    current: () => tracker.current(),
    isValid: () => tracker.isValid(),
    isMissing: () => tracker.isMissing(),
    checkNow,
  };
}

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

export function configMapPolicySource(opts: ConfigMapPolicyOptions): PolicySource {
  const name = opts.name ?? POLICY_CONFIGMAP_NAME;
  const key = opts.key ?? POLICY_CONFIGMAP_KEY;
  const origin = `configmap ${opts.namespace}/${name}`;
  const log = opts.log.child({ observer: 'policy', configMap: `${opts.namespace}/${name}` });
  const tracker = new PolicyTracker(log, opts, opts.lastGood ?? null);

  const fromObject = (cm: ConfigMap) => {
    const text = cm.data?.[key];
    if (typeof text === 'string') tracker.observe({ text }, origin);
    else
      tracker.observe(
        {
          refused: [{ path: `data.${key}`, message: `ConfigMap ${opts.namespace}/${name} has no key "${key}"; put the policy document there` }],
          key: 'no-key',
        },
        origin,
      );
  };

  const informer = makeInformer<ConfigMap>({
    name: origin,
    kubeConfig: opts.kubeConfig,
    path: `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/configmaps`,
    fieldSelector: `metadata.name=${name}`,
    log: opts.log,
    clock: opts.clock,
    timers: opts.timers,
    ...(opts.watchdogMs !== undefined ? { watchdogMs: opts.watchdogMs } : {}),
    ...(opts.requestTimeoutMs !== undefined ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
    ...(opts.backoff ? { backoff: opts.backoff } : {}),
    ...(opts.transport ? { transport: opts.transport } : {}),
    onAdd: fromObject,
    onUpdate: fromObject,
    onDelete: () => tracker.observe({ missing: true }, origin),
    onSynced: () => {
      if (informer.list().length === 0) tracker.observe({ missing: true }, origin);
    },
    ...(opts.onHealth ? { onHealth: opts.onHealth } : {}),
  });

  return {
    start: () => informer.start(),
    async stop() {
      tracker.stopped = true;
      await informer.stop();
    },
    current: () => tracker.current(),
    isValid: () => tracker.isValid(),
    isMissing: () => tracker.isMissing(),
  };
}
