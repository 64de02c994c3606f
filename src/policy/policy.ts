// Effective policy: built-in defaults, then the document's `defaults`, then each matching override
// in document order (later wins). Cross-field rules are checked on every combination a parent can
// end up with, so an override cannot smuggle in a window shorter than two intervals.
import { parseDocument } from 'yaml';
import { formatDuration } from './duration.js';
import {
  type Channel,
  MIN_INTERVAL_MS,
  type PartialParentPolicyRaw,
  POLICY_API_VERSION,
  POLICY_KIND,
  type PolicyDocumentOutput,
  policyDocument,
  type Selector,
  type WhenApiUnreachable,
} from './schema.js';

export interface ParentPolicy {
  intervalMs: number;
  windowMs: number;
  startupGraceMs: number;
  startTimeoutMs: number;
  handoverTimeoutMs: number;
  handoverBackoff: { initialMs: number; maxMs: number };
  gcGraceMs: number;
  whenApiUnreachable: WhenApiUnreachable;
  /**
   * How an active checkpoint gives the node back. `release`: retire it as soon as the parent is
   * starting, so the parent can bind its ports (the only choice for a parent that must never run
   * twice, such as etcd). `overlap`: keep it serving until the parent reports Ready, then retire it;
   * for parents that share their ports (SO_REUSEPORT, `--permit-port-sharing` on kube-apiserver,
   * kube-scheduler, kube-controller-manager), so there is no gap, and a parent that never gets
   * Ready (a bad rollout) never takes the node from the checkpoint.
   */
  handover: 'release' | 'overlap' | 'redirect';
  /**
   * `handover: redirect` (docs/decisions/0012-one-listener-per-port.md): the copy serves on `copyPort`, never on the parent's
   * `port`; while it is active and Ready and the parent is not proven Ready, the agent redirects new
   * connections to the node's `port` to `copyPort`, except those to `exceptAddress`, which always
   * reach the parent itself (its sidecar's and the kubelet's probes go there). No port sharing.
   */
  redirect?: RedirectPorts;
  channels: Channel[];
}

export interface RedirectPorts {
  port: number;
  copyPort: number;
  exceptAddress: string;
}

/** The loopback address the redirect leaves alone by default: the parent's probes go there. */
export const DEFAULT_REDIRECT_EXCEPT_ADDRESS = '127.0.0.2';

/**
 * Built-in defaults, and why.
 * - interval 5s: the kubelet renews its node Lease every 10s; a parent twice as chatty detects
 *   failure in well under half a minute while 100 parents cost only 20 writes/s cluster-wide.
 * - window 20s (4 x interval): three consecutive missed beats (a GC pause, an api-server blip with
 *   retries) are tolerated before a parent is called silent.
 * - startupGrace 30s: after the agent or the api-server (re)starts, every parent gets a window plus
 *   two intervals to be seen before it can be judged; a node's checkpointed api-server is
 *   therefore back within ~30s of the agent starting after a reboot.
 * - startTimeout 5m: an api-server replaying a large etcd, or a pod pulling its image, can sit in
 *   Starting for minutes; past five the parent is treated as down and covered.
 * - handoverTimeout 2m: after a checkpoint is retired the parent may be in the kubelet's crash-loop
 *   backoff (10s, 20s, 40s, ... from binding failures while the checkpoint held its ports); two
 *   minutes covers three such restarts plus its own start.
 * - handoverBackoff 30s doubling to 10m: a parent that cannot take over is not made to fight the
 *   checkpoint every few seconds, yet is retried at least every ten minutes.
 * - gcGrace 10m: deleting a checkpoint is the one irreversible action; ten minutes covers a
 *   delete-then-create rollout and a slow scheduler.
 * - whenApiUnreachable hold: losing the api-server is usually a network problem, not a dead parent;
 *   only the api-server itself (override to `activate`) should be covered because it is unreachable.
 * - handover release: overlap is only safe for a parent that can share its ports; the operator says so.
 * - channels lease + local: the Lease is visible with kubectl; the local file keeps working when no
 *   api-server does, which is exactly when a control-plane checkpoint matters.
 */
export const BUILTIN_DEFAULTS: Readonly<ParentPolicy> = Object.freeze({
  intervalMs: 5_000,
  windowMs: 20_000,
  startupGraceMs: 30_000,
  startTimeoutMs: 300_000,
  handoverTimeoutMs: 120_000,
  handoverBackoff: Object.freeze({ initialMs: 30_000, maxMs: 600_000 }),
  gcGraceMs: 600_000,
  whenApiUnreachable: 'hold' as const,
  handover: 'release' as const,
  channels: Object.freeze(['lease', 'local'] as Channel[]) as Channel[],
});

export interface Override {
  name: string;
  selector: Selector;
  patch: PartialParentPolicyRaw;
}

export interface Policy {
  defaults: ParentPolicy;
  overrides: Override[];
}

export interface PolicyError {
  /** Field path in the document, e.g. `overrides[0].policy.window`; `(document)` for the whole. */
  path: string;
  message: string;
}

/**
 * `warnings`: overrides whose merge onto the defaults breaks a cross-field rule. The document is
 * still in force: such an override is skipped for the parents it matches and named in their status
 * (policyFor's `skipped`), as deploy/base/policy.yaml says; one bad override must not refuse the
 * whole policy and leave every other parent on the last good one.
 */
export type PolicyResult = { ok: true; policy: Policy; warnings?: PolicyError[] } | { ok: false; errors: PolicyError[] };

export interface ParentRef {
  namespace: string;
  key: string;
  labels: Record<string, string>;
}

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out === '' ? '(document)' : out;
}

export function applyPatch(base: ParentPolicy, p: PartialParentPolicyRaw): ParentPolicy {
  return {
    intervalMs: p.interval ?? base.intervalMs,
    windowMs: p.window ?? base.windowMs,
    startupGraceMs: p.startupGrace ?? base.startupGraceMs,
    startTimeoutMs: p.startTimeout ?? base.startTimeoutMs,
    handoverTimeoutMs: p.handoverTimeout ?? base.handoverTimeoutMs,
    handoverBackoff: {
      initialMs: p.handoverBackoff?.initial ?? base.handoverBackoff.initialMs,
      maxMs: p.handoverBackoff?.max ?? base.handoverBackoff.maxMs,
    },
    gcGraceMs: p.gcGrace ?? base.gcGraceMs,
    whenApiUnreachable: p.whenApiUnreachable ?? base.whenApiUnreachable,
    handover: p.handover ?? base.handover,
    ...(p.redirect
      ? { redirect: { port: p.redirect.port, copyPort: p.redirect.copyPort, exceptAddress: p.redirect.exceptAddress ?? DEFAULT_REDIRECT_EXCEPT_ADDRESS } }
      : base.redirect
        ? { redirect: { ...base.redirect } }
        : {}),
    channels: p.channels ? [...p.channels] : [...base.channels],
  };
}

/**
 * The shortest gcGrace accepted. The agent's api-server probe needs up to three failures five
 * seconds apart (about 17 s with its timeout) to call an outage, and a collection must never fall
 * inside one; 30 s leaves room for that plus a live read. Watch errors stop the GC clock sooner.
 */
export const MIN_GC_GRACE_MS = 30_000;

/** Cross-field rules. `at` is the path prefix of the block the values came from. */
export function crossFieldErrors(p: ParentPolicy, at: string): PolicyError[] {
  const errs: PolicyError[] = [];
  const f = (field: string, message: string) => errs.push({ path: `${at}.${field}`, message });
  const d = formatDuration;
  if (p.intervalMs < MIN_INTERVAL_MS) f('interval', `${d(p.intervalMs)} is below the ${MIN_INTERVAL_MS}ms minimum`);
  if (p.windowMs < 2 * p.intervalMs)
    f('window', `${d(p.windowMs)} must be at least 2 x interval (${d(2 * p.intervalMs)}), or one late beat reads as a dead parent`);
  if (p.startupGraceMs < p.windowMs)
    f('startupGrace', `${d(p.startupGraceMs)} must be at least the window (${d(p.windowMs)}): a parent needs one window to be seen after a restart`);
  if (p.startTimeoutMs < p.windowMs) f('startTimeout', `${d(p.startTimeoutMs)} must be at least the window (${d(p.windowMs)})`);
  if (p.handoverTimeoutMs <= p.intervalMs)
    f('handoverTimeout', `${d(p.handoverTimeoutMs)} must be longer than the interval (${d(p.intervalMs)}): the parent needs at least one beat to report Ready`);
  if (p.gcGraceMs < Math.max(MIN_GC_GRACE_MS, p.startupGraceMs))
    f(
      'gcGrace',
      `${d(p.gcGraceMs)} must be at least ${d(Math.max(MIN_GC_GRACE_MS, p.startupGraceMs))} (the larger of ${d(MIN_GC_GRACE_MS)} and startupGrace): ` +
        'deleting a checkpoint is the one step that cannot be undone; the agent must be able to notice an api-server outage, and a parent back from one must get its grace, before its copy can go',
    );
  if (p.whenApiUnreachable === 'activate' && !p.channels.includes('local'))
    f(
      'whenApiUnreachable',
      `"activate" needs the "local" channel (channels are ${p.channels.join(', ')}): when the api-server is unreachable, Lease and annotation beats say nothing, ` +
        'so the agent would have no evidence on the node that the parent is dead and could start its checkpoint beside a healthy parent that holds its ports; ' +
        'add local to channels, or use "hold"',
    );
  if (p.handover === 'redirect' && !p.redirect)
    f('redirect', 'handover "redirect" needs redirect.port (the parent\'s port) and redirect.copyPort (where its copy serves instead)');
  if (p.redirect && p.redirect.port === p.redirect.copyPort)
    f('redirect.copyPort', `${p.redirect.copyPort} is the parent's own port: the copy needs a port of its own`);
  if (p.handoverBackoff.maxMs < p.handoverBackoff.initialMs)
    f('handoverBackoff.max', `${d(p.handoverBackoff.maxMs)} must be at least handoverBackoff.initial (${d(p.handoverBackoff.initialMs)})`);
  return errs;
}

export function parsePolicyText(text: string): PolicyResult {
  // Warnings (an unknown tag, say) are refused like errors: a policy should mean exactly one thing.
  const parsed = parseDocument(text, { prettyErrors: true, uniqueKeys: true, logLevel: 'silent' });
  const problems = [...parsed.errors, ...parsed.warnings];
  if (problems.length > 0) {
    return {
      ok: false,
      errors: problems.map((e) => ({
        path: e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '(document)',
        message: `not valid YAML: ${e.message.split('\n')[0]}`,
      })),
    };
  }
  let doc: unknown;
  try {
    doc = parsed.toJS({ maxAliasCount: 100 });
  } catch (e) {
    return { ok: false, errors: [{ path: '(document)', message: `not valid YAML: ${(e as Error).message.split('\n')[0]}` }] };
  }
  return parsePolicy(doc);
}

export function parsePolicy(doc: unknown): PolicyResult {
  const r = policyDocument.safeParse(doc);
  if (!r.success) {
    const errors = r.error.issues.map((i) => ({ path: formatPath(i.path), message: i.message }));
    return {
      ok: false,
      errors: [
        ...errors,
        ...crossFieldOfTheRest(
          doc,
          r.error.issues.map((i) => ({ path: i.path, code: i.code, ...('keys' in i ? { keys: i.keys } : {}) })),
        ),
      ],
    };
  }
  return checkParsed(r.data);
}

/**
 * Every error in one pass: with schema errors, the cross-field rules are still checked on the rest
 * of the document, and what they find is reported too, except for the fields already named. The
 * rest is the document with each schema error taken out: a bad field left out (its default stands
 * in), unknown keys dropped, a wrong apiVersion or kind set right, a bad override's name or selector
 * replaced by a placeholder (only its policy block matters to the rules). Nothing when the shape
 * itself is broken (the document, `defaults` or `overrides` not a map or a list).
 */
function crossFieldOfTheRest(doc: unknown, issues: ReadonlyArray<{ path: readonly PropertyKey[]; code?: string; keys?: readonly string[] }>): PolicyError[] {
  let rest: unknown;
  try {
    rest = structuredClone(doc);
  } catch {
    return [];
  }
  if (!isMap(rest)) return [];
  const named = new Set<string>();
  const at = (path: readonly PropertyKey[]): unknown => path.reduce<unknown>((o, k) => (o as Record<PropertyKey, unknown> | undefined)?.[k], rest);
  for (const { path: p, code, keys } of issues) {
    if (code === 'unrecognized_keys') {
      const o = at(p);
      if (isMap(o)) for (const k of keys ?? []) delete o[k];
      continue;
    }
    if (p[0] === 'apiVersion' && p.length === 1) rest.apiVersion = POLICY_API_VERSION;
    else if (p[0] === 'kind' && p.length === 1) rest.kind = POLICY_KIND;
    else if (p[0] === 'defaults' && p.length >= 2 && isMap(rest.defaults)) {
      delete rest.defaults[p[1] as string];
      named.add(formatPath(p.slice(0, 2)));
    } else if (p[0] === 'overrides' && typeof p[1] === 'number' && Array.isArray(rest.overrides)) {
      const i = p[1];
      const o = rest.overrides[i];
      if (!isMap(o)) rest.overrides[i] = { name: `overrides[${i}]`, selector: {}, policy: {} };
      else if (p[2] === 'name') o.name = `overrides[${i}]`;
      else if (p[2] === 'selector') o.selector = {};
      else if (p[2] === 'policy' && p.length >= 4 && isMap(o.policy)) {
        delete o.policy[p[3] as string];
        named.add(formatPath(p.slice(0, 4)));
      } else if (p[2] === 'policy') o.policy = {};
      else return [];
    } else return [];
  }
  const r = policyDocument.safeParse(rest);
  if (!r.success) return [];
  const checked = checkParsed(r.data);
  // The document is refused anyway: a broken override is named with the rest.
  return (checked.ok ? (checked.warnings ?? []) : checked.errors).filter((e) => !named.has(e.path));
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function checkParsed(data: PolicyDocumentOutput): PolicyResult {
  const r = { data };
  const defaults = applyPatch(BUILTIN_DEFAULTS, r.data.defaults ?? {});
  const errors = crossFieldErrors(defaults, 'defaults');
  const warnings: PolicyError[] = [];
  const overrides: Override[] = (r.data.overrides ?? []).map((o) => ({ name: o.name, selector: o.selector, patch: o.policy }));
  const seen = new Set<string>();
  overrides.forEach((o, i) => {
    // An override is checked merged onto the defaults: that is a combination a parent can receive.
    // Broken, it is skipped for the parents it matches (policyFor), not a reason to refuse the rest.
    // A rule the defaults already break is named once, at the defaults, unless the override sets that field too.
    const at = `overrides[${i}].policy`;
    const own = (w: PolicyError) => {
      const field = w.path.slice(at.length + 1).split('.')[0]!;
      return Object.hasOwn(o.patch, field) || !errors.some((e) => e.path === `defaults.${w.path.slice(at.length + 1)}`);
    };
    warnings.push(
      ...crossFieldErrors(applyPatch(defaults, o.patch), at)
        .filter(own)
        .map((w) => ({
          ...w,
          message: `${w.message} (override "${o.name}" is skipped)`,
        })),
    );
    if (seen.has(o.name)) errors.push({ path: `overrides[${i}].name`, message: `"${o.name}" is used by an earlier override` });
    seen.add(o.name);
  });
  if (errors.length > 0) return { ok: false, errors: [...errors, ...warnings] };
  return { ok: true, policy: { defaults, overrides }, ...(warnings.length > 0 ? { warnings } : {}) };
}

export function defaultPolicy(): Policy {
  return { defaults: applyPatch(BUILTIN_DEFAULTS, {}), overrides: [] };
}

export function selectorMatches(s: Selector, p: ParentRef): boolean {
  if (s.namespaces && !s.namespaces.includes(p.namespace)) return false;
  if (s.parentKeys && !s.parentKeys.includes(p.key)) return false;
  for (const [k, v] of Object.entries(s.matchLabels ?? {})) if (p.labels[k] !== v) return false;
  for (const e of s.matchExpressions ?? []) {
    const has = Object.hasOwn(p.labels, e.key);
    const v = p.labels[e.key];
    const values = e.values ?? [];
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
    if (e.operator === 'In' && !(has && values.includes(v!))) return false;
    if (e.operator === 'NotIn' && has && values.includes(v!)) return false;
  }
  return true;
}

/**
 * The effective policy for one parent, and the overrides that shaped it (for status and logs).
 * Each override is validated merged onto the defaults; two overrides that are each valid can still
 * combine badly (one sets interval, another window), so an override whose merge would break a
 * cross-field rule is skipped for that parent and named in `skipped`.
 */
export function policyFor(policy: Policy, parent: ParentRef): { policy: ParentPolicy; applied: string[]; skipped: string[] } {
  let eff = policy.defaults;
  const applied: string[] = [];
  const skipped: string[] = [];
  for (const o of policy.overrides) {
    if (!selectorMatches(o.selector, parent)) continue;
    const next = applyPatch(eff, o.patch);
    if (crossFieldErrors(next, '').length > 0) {
      skipped.push(o.name);
      continue;
    }
    eff = next;
    applied.push(o.name);
  }
  return { policy: eff, applied, skipped };
}

/** The document form of a policy, as `policy validate` prints it and the ConfigMap holds it. */
export function toDocument(p: Policy): Record<string, unknown> {
  const block = (x: ParentPolicy) => ({
    interval: formatDuration(x.intervalMs),
    window: formatDuration(x.windowMs),
    startupGrace: formatDuration(x.startupGraceMs),
    startTimeout: formatDuration(x.startTimeoutMs),
    handoverTimeout: formatDuration(x.handoverTimeoutMs),
    handoverBackoff: { initial: formatDuration(x.handoverBackoff.initialMs), max: formatDuration(x.handoverBackoff.maxMs) },
    gcGrace: formatDuration(x.gcGraceMs),
    whenApiUnreachable: x.whenApiUnreachable,
    handover: x.handover,
    ...(x.redirect ? { redirect: { ...x.redirect } } : {}),
    channels: x.channels,
  });
  return {
    apiVersion: POLICY_API_VERSION,
    kind: POLICY_KIND,
    defaults: block(p.defaults),
    overrides: p.overrides.map((o) => ({ name: o.name, selector: o.selector, effective: block(applyPatch(p.defaults, o.patch)) })),
  };
}
