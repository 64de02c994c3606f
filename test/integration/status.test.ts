/**
 * `lastseen status` as a person runs it (a child process: `tsx src/cli/main.ts status ...`, or
 * `kubectl lastseen status ...` through the plugin mechanism) against a real kube-apiserver
 * holding NodeCheckpoints and heartbeat Leases.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { microTime } from '../../src/heartbeat/beat.js';
import { type ParentStatus, summarize } from '../../src/kube/nodecheckpoint-types.js';
import { controlPlane, kubectl, USER_NAME, useNamespace, waitFor } from './harness.js';
import { type RunResult, runCommand } from './processes.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
/** tsx compiles on start; on a loaded 2-core box that takes a few seconds. */
const CLI_TIMEOUT_MS = 60_000;
const RUN = Math.random().toString(36).slice(2, 8);
const NODE_A = `st-${RUN}-a`;
const NODE_B = `st-${RUN}-b`;
/** A node whose NodeCheckpoint outlived its Node object. */
const NODE_GONE = `st-${RUN}-gone`;
const T = new Date(Date.now() - 60_000).toISOString();

let ns: string;
const cleanup: string[][] = [];

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<RunResult> {
  return runCommand(cmd, args, { env, timeoutMs: CLI_TIMEOUT_MS });
}

const status = (...args: string[]) => run(TSX, [MAIN, 'status', ...args]);
const admin = () => ['--kubeconfig', controlPlane().adminKubeconfig];

/** Table rows (header first) as cells; columns are separated by at least three spaces. */
function cells(table: string): string[][] {
  return table
    .trim()
    .split('\n')
    .map((l) => l.split(/ {3,}/));
}

function lease(name: string, node: string, parent: string, phase: string, renewedAgoMs: number, role = 'parent') {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace: ns,
      labels: { 'lastseen.dev/node': node, 'lastseen.dev/parent': parent, 'app.kubernetes.io/managed-by': 'lastseen' },
      annotations: { 'lastseen.dev/phase': phase, 'lastseen.dev/sequence': '42', 'lastseen.dev/role': role, 'lastseen.dev/holder-uid': 'uid-1' },
    },
    spec: { holderIdentity: `${parent}-${node}`, leaseDurationSeconds: 20, renewTime: microTime(Date.now() - renewedAgoMs) },
  };
}

const parent = (key: string, state: ParentStatus['state'], extra: Partial<ParentStatus> = {}): ParentStatus => ({
  namespace: ns,
  key,
  state,
  phase: 'Ready',
  lastSeen: T,
  checkpointStored: true,
  checkpointActive: false,
  reason: 'Ready',
  message: 'fresh',
  lastTransitionTime: T,
  ...extra,
});

async function setStatus(node: string, parents: ParentStatus[], observedAt = new Date()): Promise<void> {
  const body = JSON.stringify({ status: summarize(node, parents, [], observedAt.toISOString()) });
  const r = await kubectl(['patch', 'nodecheckpoint', node, '--subresource=status', '--type=merge', '-p', body]);
  expect(r.stderr).toBe('');
}

beforeAll(async () => {
  ns = await useNamespace('status');
  for (const node of [NODE_A, NODE_B, NODE_GONE]) {
    const r = await kubectl(['create', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'lastseen.dev/v1alpha1', kind: 'NodeCheckpoint', metadata: { name: node } }),
    });
    expect(r.stderr).toBe('');
  }
  cleanup.push(['delete', 'nodecheckpoint', NODE_A, NODE_B, NODE_GONE, '--ignore-not-found']);
  // NODE_A and NODE_B exist; only NODE_A runs a Ready agent pod (its kubelet would set Ready: here
  // the test writes the pod's status itself). NODE_GONE has no Node object.
  for (const node of [NODE_A, NODE_B]) {
    const r = await kubectl(['create', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: node } }) });
    expect(r.stderr).toBe('');
  }
  cleanup.push(['delete', 'node', NODE_A, NODE_B, '--ignore-not-found']);
  const agentPod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `agent-${NODE_A}`, namespace: ns, labels: { 'app.kubernetes.io/name': 'lastseen', 'app.kubernetes.io/component': 'agent' } },
    spec: { nodeName: NODE_A, automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'lastseen:test' }] },
  };
  expect((await kubectl(['create', '-f', '-'], { input: JSON.stringify(agentPod) })).stderr).toBe('');
  const ready = { status: { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }] } };
  expect((await kubectl(['-n', ns, 'patch', 'pod', `agent-${NODE_A}`, '--subresource=status', '--type=merge', '-p', JSON.stringify(ready)])).stderr).toBe('');
  await setStatus(NODE_GONE, [parent('apiserver', 'Healthy')]);
  await setStatus(NODE_A, [
    parent('apiserver', 'Active', {
      phase: '',
      checkpointActive: true,
      reason: 'SilenceConfirmed',
      message: 'no beat for 20s, confirmed live',
      policyOverrides: ['kube-apiserver'],
    }),
    parent('scheduler', 'Healthy'),
  ]);
  await setStatus(NODE_B, [parent('apiserver', 'Starting', { phase: 'Starting', checkpointStored: false, reason: 'BeatResumed', message: 'beats resumed' })]);
  const leases = [
    lease(`apiserver.${NODE_A}`, NODE_A, 'apiserver', 'Ready', 300_000),
    lease(`apiserver.${NODE_A}.checkpoint`, NODE_A, 'apiserver', 'Ready', 1_000, 'checkpoint'),
    lease(`scheduler.${NODE_A}`, NODE_A, 'scheduler', 'Ready', 3_000),
    lease(`apiserver.${NODE_B}`, NODE_B, 'apiserver', 'Starting', 1_000),
    lease(`cni.${NODE_B}`, NODE_B, 'cni', 'Ready', 2_000),
  ];
  const r = await kubectl(['create', '-f', '-'], { input: leases.map((l) => JSON.stringify(l)).join('\n') });
  expect(r.stderr).toBe('');
});

afterAll(async () => {
  for (const args of cleanup) await kubectl(args);
});

describe('lastseen status', () => {
  it('prints one row per parent and node: phase from the Lease, last seen, state and checkpoint from the agent', async () => {
    const r = await status(...admin());
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [header, ...rows] = cells(r.stdout);
    expect(header).toEqual(['NODE', 'NAMESPACE', 'PARENT', 'PHASE', 'LAST SEEN', 'STATE', 'CHECKPOINT', 'REASON', 'MESSAGE']);
    const mine = rows.filter((row) => row[0] === NODE_A || row[0] === NODE_B);
    // LAST SEEN is the last beat the agent saw (a minute before its report), on whatever channel:
    // not the Lease's renew time, which is only one channel's word and the writer's clock.
    const aboutAMinute = expect.stringMatching(/^([6-9]\d|1[01]\d)s$/);
    expect(mine).toEqual([
      // The Lease's phase (Ready) wins over the agent's last report (none): it is the parent's own latest word.
      [NODE_A, ns, 'apiserver', 'Ready', aboutAMinute, 'Active', 'active', 'SilenceConfirmed', 'no beat for 20s, confirmed live'],
      [NODE_A, ns, 'scheduler', 'Ready', aboutAMinute, 'Healthy', 'stored', 'Ready', 'fresh'],
      // NODE_B runs no Ready agent: its last report is shown, marked stale.
      [NODE_B, ns, 'apiserver', 'Starting', aboutAMinute, 'Starting (stale: no Ready agent)', '-', 'BeatResumed', 'beats resumed'],
      // A heartbeat no agent has reported on, whose pod does not exist: a Lease left behind. Its
      // LAST SEEN is the Lease's renew time (2 s ago): no agent has seen it.
      [NODE_B, ns, 'cni', 'Ready', expect.stringMatching(/^\d+s$/), `<no report> (no pod cni-${NODE_B}: Lease left behind)`, '-', '-', '-'],
    ]);
    // A NodeCheckpoint whose Node is gone.
    expect(rows.filter((row) => row[0] === NODE_GONE)).toEqual([
      [NODE_GONE, ns, 'apiserver', 'Ready', expect.any(String), 'Healthy (node gone)', 'stored', 'Ready', 'fresh'],
    ]);
  });

  it('--node limits the table to one node; -o wide adds holder, sequence, Lease, transition and overrides', async () => {
    const r = await status(...admin(), '--node', NODE_A, '-o', 'wide');
    expect(r.code).toBe(0);
    const [header, ...rows] = cells(r.stdout);
    expect(header?.slice(8)).toEqual(['HOLDER', 'SEQUENCE', 'LEASE', 'TRANSITION', 'OVERRIDES', 'AGENT', 'COVERED', 'MESSAGE']);
    expect(rows.map((row) => row[0])).toEqual([NODE_A, NODE_A]);
    expect(rows[0]?.slice(8)).toEqual([
      `apiserver-${NODE_A}`,
      '42',
      `apiserver.${NODE_A}`,
      expect.stringMatching(/^\d+s$/),
      'kube-apiserver',
      'Ready',
      // This report says nothing about coverage (an agent older than the covered field).
      '-',
      'no beat for 20s, confirmed live',
    ]);
  });

  it('-o json and -o yaml carry the same rows for programs', async () => {
    const json = await status(...admin(), '--node', NODE_B, '-o', 'json');
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout);
    expect(doc.kind).toBe('ParentStatusList');
    expect(doc.items).toHaveLength(2);
    expect(doc.items[0]).toMatchObject({
      node: NODE_B,
      namespace: ns,
      parent: 'apiserver',
      phase: 'Starting',
      state: 'Starting',
      checkpoint: '-',
      sequence: 42,
    });
    expect(doc.items[0].lastSeen).toBe(T);
    expect(doc.items[0].lastSeenSeconds).toBeGreaterThanOrEqual(59);
    expect(doc.items[1]).toMatchObject({ parent: 'cni', state: null });
    const yaml = await status(...admin(), '--node', NODE_B, '-o', 'yaml');
    expect(yaml.code).toBe(0);
    const ydoc = parseYaml(yaml.stdout);
    expect(ydoc.items.map((i: { parent: string }) => i.parent)).toEqual(['apiserver', 'cni']);
  });

  it('--watch prints again when an agent reports a transition or a parent changes phase', async () => {
    let out = '';
    const child: ChildProcess = spawn(TSX, [MAIN, 'status', ...admin(), '--node', NODE_A, '--watch'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.setEncoding('utf8').on('data', (s: string) => (out += s));
    let err = '';
    child.stderr?.setEncoding('utf8').on('data', (s: string) => (err += s));
    try {
      await waitFor(() => out.includes('scheduler'), { what: 'the first table', timeoutMs: CLI_TIMEOUT_MS });
      expect(out.match(/^NODE /gm)).toHaveLength(1);

      await setStatus(NODE_A, [
        parent('apiserver', 'Active', { phase: '', checkpointActive: true, reason: 'SilenceConfirmed', message: 'no beat for 20s, confirmed live' }),
        parent('scheduler', 'Silent', { reason: 'WindowExpired', message: 'no beat for 20s; confirming' }),
      ]);
      const second = await waitFor(
        () => {
          const tables = out.split(/\n(?=NODE )/);
          return tables.length >= 2 ? cells(tables[tables.length - 1]!) : undefined;
        },
        { what: 'a second table after the NodeCheckpoint changed', timeoutMs: 30_000 },
      );
      expect(second.find((row) => row[2] === 'scheduler')?.slice(5)).toEqual(['Silent', 'stored', 'WindowExpired', 'no beat for 20s; confirming']);

      const stopping = lease(`scheduler.${NODE_A}`, NODE_A, 'scheduler', 'Stopping', 0);
      expect((await kubectl(['apply', '-f', '-'], { input: JSON.stringify(stopping) })).code).toBe(0);
      await waitFor(() => /scheduler {3,}Stopping/.test(out.split(/\n(?=NODE )/).at(-1) ?? ''), {
        what: 'a table showing the Lease phase Stopping',
        timeoutMs: 30_000,
      });
      expect(err).toBe('');
    } finally {
      child.kill('SIGTERM');
    }
  });

  it('runs as the kubectl plugin `kubectl lastseen status`', async () => {
    const bin = await mkdtemp(join(tmpdir(), 'lastseen-plugin-'));
    try {
      await writeFile(join(bin, 'kubectl-lastseen'), `#!/bin/sh\nexec "${TSX}" "${MAIN}" "$@"\n`);
      await chmod(join(bin, 'kubectl-lastseen'), 0o755);
      const r = await run(controlPlane().kubectl, ['lastseen', 'status', '--node', NODE_B, ...admin()], { ...process.env, PATH: `${bin}:${process.env.PATH}` });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(cells(r.stdout).map((row) => row[2])).toEqual(['PARENT', 'apiserver', 'cni']);
    } finally {
      await rm(bin, { recursive: true, force: true });
    }
  });

  it('tells a user without permission which verb on which resource was refused, and how to get it', async () => {
    const r = await status('--kubeconfig', controlPlane().userKubeconfig);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('permission denied: you may not list nodecheckpoints.lastseen.dev at cluster scope');
    expect(r.stderr).toContain(`User "${USER_NAME}"`);
    expect(r.stderr).toContain('lastseen-viewer');
  });

  it('works for that user once the lastseen-viewer ClusterRole is bound', async () => {
    expect((await kubectl(['apply', '-f', join(ROOT, 'deploy/base/rbac-viewer.yaml')])).code).toBe(0);
    const binding = `lastseen-viewer-${RUN}`;
    cleanup.push(['delete', 'clusterrolebinding', binding, '--ignore-not-found']);
    expect((await kubectl(['create', 'clusterrolebinding', binding, '--clusterrole=lastseen-viewer', `--user=${USER_NAME}`])).code).toBe(0);
    try {
      const r = await waitFor(
        async () => {
          const x = await status('--kubeconfig', controlPlane().userKubeconfig, '--node', NODE_B);
          return x.code === 0 ? x : undefined;
        },
        { what: 'the binding to take effect', timeoutMs: CLI_TIMEOUT_MS },
      );
      expect(cells(r.stdout)).toHaveLength(3);
      // The role lets the viewer list nodes and agent pods too, so the stale mark is there.
      expect(cells(r.stdout)[1]?.[5]).toBe('Starting (stale: no Ready agent)');
    } finally {
      // Other files expect the user identity to be refused everywhere.
      await kubectl(['delete', 'clusterrolebinding', binding, '--ignore-not-found']);
    }
  });

  it('says how to install the CRD when the api-server does not know NodeCheckpoints (404)', async () => {
    // The shared control plane has the CRD installed for every file; an api-server stand-in that
    // answers 404 as kube-apiserver does for an unknown resource plays one without it.
    const server: Server = createServer((_req, res) => {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          message: 'the server could not find the requested resource',
          reason: 'NotFound',
          code: 404,
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-nocrd-'));
    try {
      const port = (server.address() as AddressInfo).port;
      const kubeconfig = join(dir, 'kubeconfig');
      await writeFile(
        kubeconfig,
        `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
      );
      const r = await status('--kubeconfig', kubeconfig);
      expect(r.code).toBe(3);
      expect(r.stderr.trim()).toBe('lastseen: the NodeCheckpoint CRD is not installed: kubectl apply -f crds/');
    } finally {
      server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('--covered exits 0 only when every parent on the node is covered by a current report, else names each and why (1)', async () => {
    const covered = { covered: true, coverageReason: 'Covered', coverageMessage: 'a checkpoint from a Ready pod is stored and can run now' };
    await setStatus(NODE_A, [parent('apiserver', 'Healthy', covered), parent('scheduler', 'Healthy', covered)]);
    const ok = await status(...admin(), '--node', NODE_A, '--covered');
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toContain(`every parent on ${NODE_A} is covered (2)`);

    await setStatus(NODE_A, [
      parent('apiserver', 'Healthy', covered),
      parent('scheduler', 'Healthy', {
        covered: false,
        coverageReason: 'CaptureFailing',
        coverageMessage: 'no checkpoint stored: 3 captures failed in a row, the latest: ENOSPC',
        checkpointStored: false,
        reason: 'CaptureFailing',
        message: 'ENOSPC: 3 captures failed in a row',
      }),
    ]);
    const one = await status(...admin(), '--node', NODE_A, '--covered');
    expect(one.code).toBe(1);
    expect(one.stderr).toContain(`${NODE_A} ${ns}/scheduler: CaptureFailing: no checkpoint stored: 3 captures failed in a row, the latest: ENOSPC`);
    expect(one.stderr).not.toContain(`${ns}/apiserver`);
    expect(
      cells(one.stdout)
        .find((row) => row[2] === 'scheduler')
        ?.slice(5, 8),
    ).toEqual(['Healthy', '-', 'CaptureFailing']);

    // No Ready agent on NODE_B, and a Lease whose pod is gone: neither is covered.
    const b = await status(...admin(), '--node', NODE_B, '--covered');
    expect(b.code).toBe(1);
    expect(b.stderr).toContain(`${NODE_B} ${ns}/apiserver: no Ready lastseen agent runs on the node`);
    expect(b.stderr).toContain(`${NODE_B} ${ns}/cni: a Lease of pod cni-${NODE_B}, which does not exist`);
    // A node no agent has reported on at all.
    const none = await status(...admin(), '--node', `st-${RUN}-never`, '--covered');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no NodeCheckpoint');
  });

  it('marks a report older than three status periods stale, although a Ready agent pod runs on the node', async () => {
    const covered = { covered: true, coverageReason: 'Covered', coverageMessage: 'ok' };
    await setStatus(NODE_A, [parent('apiserver', 'Healthy', covered), parent('scheduler', 'Healthy', covered)], new Date(Date.now() - 10 * 60_000));
    const r = await status(...admin(), '--node', NODE_A);
    expect(r.code).toBe(0);
    expect(
      cells(r.stdout)
        .slice(1)
        .map((row) => row[5]),
    ).toEqual(['Healthy (stale: report 10m old)', 'Healthy (stale: report 10m old)']);
    const c = await status(...admin(), '--node', NODE_A, '--covered');
    expect(c.code).toBe(1);
    expect(c.stderr).toContain("the agent's report is 10m old (stale)");
  });
});
