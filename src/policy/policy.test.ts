import { describe, expect, it } from 'vitest';
import { BUILTIN_DEFAULTS, parsePolicy, parsePolicyText, policyFor } from './policy.js';

const head = 'apiVersion: lastseen.dev/v1alpha1\nkind: Policy\n';

function errorsOf(text: string) {
  const r = parsePolicyText(head + text);
  if (r.ok) throw new Error('expected the policy to be refused');
  return r.errors;
}

describe('parsePolicy', () => {
  it('an empty document gives the built-in defaults', () => {
    const r = parsePolicyText(head);
    expect(r.ok && r.policy.defaults).toEqual(BUILTIN_DEFAULTS);
  });

  it('reads every field, in every duration form', () => {
    const r = parsePolicyText(
      head +
        `defaults:
  interval: 2s
  window: PT10S
  startupGrace: 1m
  startTimeout: 1m30s
  handoverTimeout: 45s
  handoverBackoff: { initial: 5s, max: 5m }
  gcGrace: 1h
  whenApiUnreachable: activate
  handover: overlap
  channels: [local]
`,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.policy.defaults).toEqual({
      intervalMs: 2000,
      windowMs: 10_000,
      startupGraceMs: 60_000,
      startTimeoutMs: 90_000,
      handoverTimeoutMs: 45_000,
      handoverBackoff: { initialMs: 5000, maxMs: 300_000 },
      gcGraceMs: 3_600_000,
      whenApiUnreachable: 'activate',
      handover: 'overlap',
      channels: ['local'],
    });
  });

  it.each([
    ['wrong apiVersion', 'defaults: {}', 'apiVersion', (t: string) => t.replace('v1alpha1', 'v9')],
    ['bad duration', 'defaults: { interval: 5 minutes }', 'defaults.interval', (t: string) => t],
    ['number as duration', 'defaults: { window: 20 }', 'defaults.window', (t: string) => t],
    ['unknown field', 'defaults: { windw: 20s }', 'defaults', (t: string) => t],
    ['bad enum', 'defaults: { whenApiUnreachable: panic }', 'defaults.whenApiUnreachable', (t: string) => t],
    ['bad hand-over mode', 'defaults: { handover: swap }', 'defaults.handover', (t: string) => t],
    ['redirect without its ports', 'defaults: { handover: redirect }', 'defaults.redirect', (t: string) => t],
    ['redirect to the same port', 'defaults: { handover: redirect, redirect: { port: 6443, copyPort: 6443 } }', 'defaults.redirect.copyPort', (t: string) => t],
    [
      'redirect port out of range',
      'defaults: { handover: redirect, redirect: { port: 6443, copyPort: 70000 } }',
      'defaults.redirect.copyPort',
      (t: string) => t,
    ],
    [
      'redirect except address not loopback',
      'defaults: { handover: redirect, redirect: { port: 6443, copyPort: 16443, exceptAddress: 10.0.0.2 } }',
      'defaults.redirect.exceptAddress',
      (t: string) => t,
    ],
    ['bad channel', 'defaults: { channels: [lease, carrier-pigeon] }', 'defaults.channels[1]', (t: string) => t],
    ['repeated channel', 'defaults: { channels: [lease, lease] }', 'defaults.channels', (t: string) => t],
    ['no channel', 'defaults: { channels: [] }', 'defaults.channels', (t: string) => t],
    ['window < 2 x interval', 'defaults: { interval: 10s, window: 15s }', 'defaults.window', (t: string) => t],
    ['grace < window', 'defaults: { startupGrace: 10s }', 'defaults.startupGrace', (t: string) => t],
    ['handover <= interval', 'defaults: { handoverTimeout: 5s }', 'defaults.handoverTimeout', (t: string) => t],
    ['backoff max < initial', 'defaults: { handoverBackoff: { initial: 1m, max: 30s } }', 'defaults.handoverBackoff.max', (t: string) => t],
    ['interval too small', 'defaults: { interval: 10ms, window: 20ms, startupGrace: 1s }', 'defaults.interval', (t: string) => t],
    ['zero duration', 'defaults: { gcGrace: 0s }', 'defaults.gcGrace', (t: string) => t],
    ['over a day', 'defaults: { gcGrace: 25h }', 'defaults.gcGrace', (t: string) => t],
    [
      'override bad operator',
      'overrides: [{ name: a, selector: { matchExpressions: [{ key: k, operator: Is }] }, policy: {} }]',
      'overrides[0].selector.matchExpressions[0].operator',
      (t: string) => t,
    ],
  ])('%s is refused with path %s', (_name, body, path, edit) => {
    const r = parsePolicyText(edit(head + body));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toContain(path);
    for (const e of r.errors) expect(e.message.length).toBeGreaterThan(5);
  });

  it('handover redirect with its ports: the except address defaults to 127.0.0.2, and an override inherits the ports', () => {
    const r = parsePolicyText(
      `${head}defaults: { handover: redirect, redirect: { port: 6443, copyPort: 16443 } }\noverrides: [{ name: a, selector: { parentKeys: [x] }, policy: { window: 30s } }]\n`,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.policy.defaults.redirect).toEqual({ port: 6443, copyPort: 16443, exceptAddress: '127.0.0.2' });
    expect(policyFor(r.policy, { namespace: 'kube-system', key: 'x', labels: {} }).policy.redirect).toEqual({
      port: 6443,
      copyPort: 16443,
      exceptAddress: '127.0.0.2',
    });
  });

  describe('whenApiUnreachable: activate needs the local channel', () => {
    it.each([
      ['in the defaults', 'defaults: { whenApiUnreachable: activate, channels: [lease] }', 'defaults.whenApiUnreachable'],
      ['with annotation only', 'defaults: { whenApiUnreachable: activate, channels: [annotation, lease] }', 'defaults.whenApiUnreachable'],
      [
        'in an override (the override only: skipped, the rest in force)',
        'defaults: { channels: [lease] }\noverrides: [{ name: apiserver, selector: {}, policy: { whenApiUnreachable: activate } }]',
        'overrides[0].policy.whenApiUnreachable',
      ],
      [
        'an override dropping local (the override only)',
        'defaults: { whenApiUnreachable: activate }\noverrides: [{ name: lease-only, selector: {}, policy: { channels: [lease] } }]',
        'overrides[0].policy.whenApiUnreachable',
      ],
    ])('refused %s, naming the field and why', (_name, body, path) => {
      const r = parsePolicyText(head + body);
      const errs = r.ok ? (r.warnings ?? []) : r.errors;
      expect(r.ok).toBe(path.startsWith('overrides'));
      const e = errs.find((x) => x.path === path);
      expect(e, JSON.stringify(errs)).toBeDefined();
      expect(e!.message).toContain('local');
      expect(e!.message).toMatch(/api-server is unreachable/);
      expect(e!.message).toMatch(/no evidence on the node/);
    });

    it('accepted with the local channel, and hold needs none', () => {
      expect(parsePolicyText(head + 'defaults: { whenApiUnreachable: activate, channels: [lease, local] }').ok).toBe(true);
      expect(parsePolicyText(head + 'defaults: { whenApiUnreachable: activate, channels: [local] }').ok).toBe(true);
      expect(parsePolicyText(head + 'defaults: { whenApiUnreachable: hold, channels: [lease] }').ok).toBe(true);
    });

    it('policyFor skips an override that would combine activate with a lease-only parent', () => {
      const r = parsePolicyText(
        head +
          'overrides:\n  - { name: apiserver, selector: { parentKeys: [a] }, policy: { whenApiUnreachable: activate } }\n  - { name: lease-only, selector: { parentKeys: [a] }, policy: { channels: [lease] } }\n',
      );
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      const eff = policyFor(r.policy, { namespace: 'n', key: 'a', labels: {} });
      expect(eff.skipped).toEqual(['lease-only']);
      expect(eff.policy.whenApiUnreachable).toBe('activate');
      expect(eff.policy.channels).toEqual(['lease', 'local']);
    });
  });

  it('an override whose merge breaks a cross-field rule is skipped for its parents and named; the rest of the policy applies', () => {
    const r = parsePolicyText(head + 'overrides: [{ name: a, selector: {}, policy: { window: 6s } }]');
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.warnings?.map((w) => w.path)).toEqual(['overrides[0].policy.window']);
    expect(r.warnings?.[0]?.message).toContain('override "a" is skipped');
    const eff = policyFor(r.policy, { namespace: 'n', key: 'k', labels: {} });
    expect(eff).toMatchObject({ applied: [], skipped: ['a'] });
    expect(eff.policy.windowMs).toBe(BUILTIN_DEFAULTS.windowMs);
  });

  it('500 overrides, 10 of them broken (startupGrace below a larger window): 490 applied, 10 skipped and named', () => {
    const broken = new Set([3, 50, 99, 150, 222, 301, 333, 404, 450, 499]);
    const lines = Array.from({ length: 500 }, (_, i) =>
      broken.has(i)
        ? `  - { name: o${i}, selector: { parentKeys: [p${i}] }, policy: { window: 40s, startupGrace: 30s } }`
        : `  - { name: o${i}, selector: { parentKeys: [p${i}] }, policy: { window: 40s, startupGrace: 45s } }`,
    );
    const r = parsePolicyText(`${head}overrides:\n${lines.join('\n')}\n`);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.warnings?.map((w) => w.path)).toEqual([...broken].map((i) => `overrides[${i}].policy.startupGrace`));
    const applied: string[] = [];
    const skipped: string[] = [];
    for (let i = 0; i < 500; i++) {
      const eff = policyFor(r.policy, { namespace: 'n', key: `p${i}`, labels: {} });
      applied.push(...eff.applied);
      skipped.push(...eff.skipped);
      expect(eff.policy.windowMs).toBe(broken.has(i) ? BUILTIN_DEFAULTS.windowMs : 40_000);
    }
    expect(applied).toHaveLength(490);
    expect(skipped).toEqual([...broken].map((i) => `o${i}`));
  });

  it('reports every error at once', () => {
    const errs = errorsOf(
      'defaults: { interval: nope, whenApiUnreachable: maybe, channels: [x] }\noverrides: [{ name: o, selector: {}, policy: { window: 1s } }]',
    );
    // The override's cross-field error too, in the same pass (checked with the built-in interval standing in for the bad one).
    expect(errs.map((e) => e.path).sort()).toEqual(
      ['defaults.channels[0]', 'defaults.interval', 'defaults.whenApiUnreachable', 'overrides[0].policy.window'].sort(),
    );
  });

  it('reports YAML syntax errors with a line', () => {
    const r = parsePolicyText(head + 'defaults: [unclosed\n');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]!.path).toMatch(/^line \d+/);
  });

  it('refuses non-objects', () => {
    for (const doc of [null, 42, 'x', []]) expect(parsePolicy(doc).ok).toBe(false);
  });
});

describe('policyFor', () => {
  const r = parsePolicyText(
    head +
      `overrides:
  - name: apiserver
    selector: { namespaces: [kube-system], matchLabels: { component: kube-apiserver } }
    policy: { whenApiUnreachable: activate, window: 15s }
  - name: fast
    selector: { matchExpressions: [{ key: tier, operator: In, values: [control-plane] }] }
    policy: { interval: 2s, window: 8s }
  - name: not-cni
    selector: { matchExpressions: [{ key: cni, operator: DoesNotExist }] }
    policy: { gcGrace: 20m }
`,
  );
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const policy = r.policy;

  it.each([
    [{ namespace: 'kube-system', key: 'kube-apiserver', labels: { component: 'kube-apiserver' } }, ['apiserver', 'not-cni'], 'activate', 15_000],
    [{ namespace: 'default', key: 'kube-apiserver', labels: { component: 'kube-apiserver' } }, ['not-cni'], 'hold', 20_000],
    [{ namespace: 'kube-system', key: 'x', labels: { tier: 'control-plane', cni: 'y' } }, ['fast'], 'hold', 8000],
    [
      { namespace: 'kube-system', key: 'both', labels: { component: 'kube-apiserver', tier: 'control-plane' } },
      ['apiserver', 'fast', 'not-cni'],
      'activate',
      8000,
    ],
  ])('%o gets %o', (parent, applied, when, windowMs) => {
    const eff = policyFor(policy, parent);
    expect(eff.applied).toEqual(applied);
    expect(eff.policy.whenApiUnreachable).toBe(when);
    expect(eff.policy.windowMs).toBe(windowMs);
    expect(eff.skipped).toEqual([]);
  });

  it('skips an override whose combination with an earlier one breaks a rule', () => {
    const r2 = parsePolicyText(
      head +
        `overrides:
  - { name: slow, selector: {}, policy: { interval: 15s, window: 30s } }
  - { name: short, selector: {}, policy: { window: 25s } }
`,
    );
    if (!r2.ok) throw new Error(JSON.stringify(r2.errors));
    const eff = policyFor(r2.policy, { namespace: 'a', key: 'b', labels: {} });
    expect(eff.applied).toEqual(['slow']);
    expect(eff.skipped).toEqual(['short']);
    expect(eff.policy.windowMs).toBe(30_000);
  });
});
