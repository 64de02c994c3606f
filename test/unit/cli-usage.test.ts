// The CLI behaves the same everywhere: every subcommand given invalid input exits 2 with a message
// naming what was wrong, never a stack trace, and refuses bad flags before any request (the
// kubeconfig points at a local server that counts connections: it must see none). And every
// problem comes in one run: a command line with several mistakes names them all.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, MAIN, runCli } from '../../src/cli/cli-process.test-helpers.js';

function lastseen(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCli(MAIN, args, { NODE_NAME: '', POD_NAME: '', POD_NAMESPACE: '', ...env });
}

/** A stack trace line as Node prints one. */
const STACK = /^\s+at .+(\(|:\d+)/m;

let server: Server;
let connections = 0;
let dir: string;
let kubeconfig: string;

beforeAll(async () => {
  server = createServer((c) => {
    connections++;
    c.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  dir = await mkdtemp(join(tmpdir(), 'lastseen-cli-'));
  kubeconfig = join(dir, 'kubeconfig');
  await writeFile(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{ name: c, cluster: { server: "https://127.0.0.1:' + port + '", insecure-skip-tls-verify: true } }]',
      'users: [{ name: u, user: { token: t } }]',
      'contexts: [{ name: x, context: { cluster: c, user: u } }]',
      'current-context: x',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

const BAD_POLICY = [
  'apiVersion: lastseen.dev/v1alpha1',
  'kind: Policy',
  'defaults:',
  '  interval: 10s',
  '  window: 15s',
  '  startupGrace: soon',
  '  channels: [lease, carrier-pigeon]',
  'overrides:',
  '  - name: a',
  '    selector: { namespaces: [kube-system] }',
  '    policy: { handoverTimeout: 5s }',
  '',
].join('\n');

describe('every subcommand: invalid input exits 2, names the problem, no stack trace, no request', () => {
  const cases: Array<{ name: string; args: () => string[]; says: RegExp; env?: NodeJS.ProcessEnv }> = [
    { name: 'an unknown subcommand', args: () => ['reboot'], says: /unknown command 'reboot'/ },
    { name: 'agent: an unknown option', args: () => ['agent', '--no-such-flag'], says: /unknown option '--no-such-flag'/ },
    {
      name: 'agent: a bad log level and a bad duration',
      args: () => ['agent', '--node', 'n1', '--kubeconfig', kubeconfig, '--log-level', 'verbose', '--watchdog', 'often'],
      says: /--log-level: "verbose" is not one of[\s\S]*--watchdog/,
    },
    {
      name: 'heartbeat: a probe that is not a URL scheme it knows',
      args: () => ['heartbeat', '--node', 'n1', '--pod-name', 'p', '--namespace', 'ns', '--kubeconfig', kubeconfig, '--probe', 'htp://x'],
      says: /--probe: probe "htp:\/\/x": protocol htp: is not one of http, https, tcp/,
    },
    {
      name: 'heartbeat: missing identity and a bad channel, all named',
      args: () => ['heartbeat', '--kubeconfig', kubeconfig, '--channels', 'lease,smoke'],
      says: /--node \(or env NODE_NAME\) is required[\s\S]*--pod-name[\s\S]*--namespace[\s\S]*"smoke" is not a channel/,
    },
    {
      name: 'status: a bad node name',
      args: () => ['status', '--kubeconfig', kubeconfig, '--node', 'Not_A_Node'],
      says: /--node "Not_A_Node": not a node name/,
    },
    { name: 'status: a bad output format', args: () => ['status', '--kubeconfig', kubeconfig, '-o', 'xml'], says: /argument 'xml' is invalid/ },
    {
      name: 'status: --covered with --watch',
      args: () => ['status', '--kubeconfig', kubeconfig, '--covered', '--watch'],
      says: /--covered is a one-time check/,
    },
    { name: 'status: a kubeconfig that does not exist', args: () => ['status', '--kubeconfig', join(dir, 'nope')], says: /nope/ },
    {
      name: 'agent: a kubeconfig that does not exist',
      args: () => ['agent', '--node', 'n1', '--kubeconfig', join(dir, 'nope')],
      says: /--kubeconfig .*nope: no such file/,
    },
    { name: 'policy validate: a file that does not exist', args: () => ['policy', 'validate', join(dir, 'missing.yaml')], says: /cannot read .*missing\.yaml/ },
    { name: 'policy validate: an invalid policy', args: () => ['policy', 'validate', join(dir, 'bad-policy.yaml')], says: /defaults\.window/ },
    { name: 'policy: no subcommand given a file', args: () => ['policy', 'check', 'x'], says: /unknown command 'check'/ },
    { name: 'simulate: an unknown strategy', args: () => ['simulate', 'master-reboot', '--strategy', 'hope'], says: /unknown strategy "hope"/ },
    {
      name: 'simulate: a chart in a folder that does not exist (refused before the run)',
      args: () => ['simulate', 'master-reboot', '--svg', '/nonexistent/dir/x.svg'],
      says: /--svg \/nonexistent\/dir\/x\.svg: the folder \/nonexistent\/dir does not exist/,
    },
  ];

  beforeAll(async () => {
    await writeFile(join(dir, 'bad-policy.yaml'), BAD_POLICY);
  });

  for (const c of cases) {
    it(c.name, async () => {
      const before = connections;
      const r = await lastseen(c.args(), c.env);
      expect(r.code, `stdout: ${r.stdout}\nstderr: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(c.says);
      expect(r.stderr + r.stdout).not.toMatch(STACK);
      // No verdict printed before the refusal (the chart case used to print "verdict: PASS" first).
      expect(r.stdout).not.toMatch(/verdict/);
      expect(connections - before).toBe(0);
    });
  }

  for (const sub of [['agent'], ['heartbeat'], ['status'], ['policy', 'validate'], ['simulate']]) {
    it(`${sub.join(' ')} --help lists its exit codes`, async () => {
      const r = await lastseen([...sub, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/Exit (codes|status):[\s\S]*\b2\b/);
    });
  }
});

describe('every problem in one run', () => {
  it('policy validate names the schema errors and the cross-field errors together', async () => {
    const r = await lastseen(['policy', 'validate', join(dir, 'bad-policy.yaml')]);
    expect(r.code).toBe(2);
    // Schema: a duration that is not one, a channel that does not exist.
    expect(r.stderr).toMatch(/defaults\.startupGrace/);
    expect(r.stderr).toMatch(/defaults\.channels/);
    // Cross-field, in the same run: window < 2 x interval; the override's handoverTimeout <= interval.
    expect(r.stderr).toMatch(/defaults\.window/);
    expect(r.stderr).toMatch(/overrides\[0\]\.policy/);
  });

  it('policy validate reads the ConfigMap form and checks its policy.yaml key', async () => {
    const good = join(dir, 'cm.yaml');
    await writeFile(
      good,
      `apiVersion: v1\nkind: ConfigMap\nmetadata: { name: lastseen-policy, namespace: lastseen-system }\ndata:\n  policy.yaml: |\n    apiVersion: lastseen.dev/v1alpha1\n    kind: Policy\n    defaults: { interval: 2s, window: 8s }\n`,
    );
    const ok = await lastseen(['policy', 'validate', good]);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/interval: 2s/);
    const bad = join(dir, 'cm-bad.yaml');
    await writeFile(bad, `apiVersion: v1\nkind: ConfigMap\nmetadata: { name: lastseen-policy }\ndata:\n  policy.yml: "x"\n`);
    const r = await lastseen(['policy', 'validate', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/data\.policy\.yaml: ConfigMap lastseen-policy has no key "policy\.yaml"/);
  });

  it('simulate names every problem of its command line at once', async () => {
    const r = await lastseen(['simulate', 'no-such-scenario', '--strategy', 'hope', '--kubelet', 'v0', '--seed', 'x', '--events']);
    expect(r.code).toBe(2);
    for (const m of [
      /unknown strategy "hope"/,
      /unknown kubelet model "v0"/,
      /--seed must be a non-negative integer/,
      /--events adds the timeline/,
      /no scenario named/,
    ])
      expect(r.stderr).toMatch(m);
  });
});
