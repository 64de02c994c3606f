// End to end on one machine against the real kube-apiserver: a parent pod object bound to a node
// name (no kubelet runs it), `lastseen agent` with temporary folders, `lastseen heartbeat` for that
// parent as a separate process. Short windows: interval 250ms, window 1s.
import { execFileSync } from 'node:child_process';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { appears, captured, exists, type FaultSetup, faultSetup, KEY } from './fault-helpers.js';
import { kubeConfigFor, startApiserver, stopApiserver, waitFor } from './harness.js';
import { healthPort, writePolicy } from './processes.js';

const POLICY =
  '{ interval: 250ms, window: 1s, startupGrace: 2s, startTimeout: 30s, handoverTimeout: 2s, handoverBackoff: { initial: 1s, max: 4s }, channels: [lease] }';

function setup(name: string, policy = POLICY, bundle?: string): Promise<FaultSetup> {
  return faultSetup(name, { policy, ...(bundle ? { bundle } : {}) });
}

async function disappears(path: string, timeoutMs = 30_000): Promise<number> {
  const t0 = Date.now();
  await waitFor(async () => !(await exists(path)), { timeoutMs, intervalMs: 25, what: `${path} to disappear` });
  return Date.now() - t0;
}

async function events(ns: string): Promise<string[]> {
  const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
  const list = await core.listNamespacedEvent({ namespace: ns });
  return list.items.map((e) => e.reason ?? '');
}

describe('lastseen agent, end to end', () => {
  it('covers a killed parent after the window, hands back on Ready, covers a SIGTERM at once, re-activates after a failed hand-over', async () => {
    const s = await setup('e2e');
    let hb = s.heartbeat();
    await captured(s);
    // The copied secret is there, with the mode its own Secret volume gives it (0644, the API's
    // defaultMode) behind folders only the agent's user can enter, and the manifest points at it.
    const files = await readdir(join(s.dirs.state, 'checkpoints', `${s.ns}_${KEY}`, 'secrets'), { recursive: true });
    const keyFile = files.find((f) => f.endsWith('tls.key'));
    expect(keyFile).toBeDefined();
    const st = await stat(join(s.dirs.state, 'checkpoints', `${s.ns}_${KEY}`, 'secrets', keyFile!));
    expect(st.mode & 0o777).toBe(0o644);
    for (const up of ['', 'secrets']) expect((await stat(join(s.dirs.state, 'checkpoints', `${s.ns}_${KEY}`, up))).mode & 0o777).toBe(0o700);
    expect(await exists(s.manifest)).toBe(false);

    // 1. SIGKILL: no Stopping beat. The manifest must not appear before the window has passed.
    await hb.stop('SIGKILL');
    const activationMs = await appears(s.manifest);
    expect(activationMs).toBeGreaterThanOrEqual(1000 - 250);
    expect(activationMs).toBeLessThan(10_000);
    const manifest = JSON.parse(await readFile(s.manifest, 'utf8'));
    expect(manifest.metadata.annotations['lastseen.dev/checkpoint-of']).toBe(s.pod.name);

    // 2. The parent returns Ready: the checkpoint is retired.
    hb = s.heartbeat();
    const retireMs = await disappears(s.manifest);
    expect(retireMs).toBeLessThan(10_000);

    // 3. SIGTERM: the Stopping beat gets immediate cover (well inside one window).
    await waitFor(() => s.agent.logs.some((l) => l.msg === 'transition' && l.to === 'Healthy'), { what: 'Healthy again' });
    await new Promise((r) => setTimeout(r, 600));
    const t0 = Date.now();
    await hb.stop('SIGTERM');
    await appears(s.manifest);
    const coverMs = Date.now() - t0;
    expect(coverMs).toBeLessThan(1000);

    // 4. The parent comes back Starting and never Ready: hand-over, then re-activation after the deadline.
    await s.main.down();
    hb = s.heartbeat();
    await disappears(s.manifest);
    const handedAt = Date.now();
    await appears(s.manifest);
    expect(Date.now() - handedAt).toBeGreaterThanOrEqual(2000 - 300);
    await hb.stop('SIGKILL');

    const reasons = await waitFor(
      async () => {
        const r = await events(s.ns);
        return ['CheckpointActivated', 'HandoverStarted', 'HandoverFailed'].every((x) => r.includes(x)) ? r : undefined;
      },
      { what: 'events for every step' },
    );
    expect(reasons).toContain('HandoverFailed');
    // Step 2's return: a first beat Ready retires at once (CheckpointRetired); a first beat Starting
    // (the restarted sidecar's Ready proof not done yet) goes through a hand-over (HandedOver).
    const direct = reasons.includes('CheckpointRetired');
    const handedOver = s.agent.logs.some((l) => l.msg === 'transition' && l.reason === 'HandedOver');
    expect(direct || handedOver).toBe(true);

    // The NodeCheckpoint shows this parent, active.
    const co = kubeConfigFor('admin').makeApiClient(CustomObjectsApi);
    const nc = await waitFor(
      async () => {
        const o = (await co
          .getClusterCustomObject({ group: 'lastseen.dev', version: 'v1alpha1', plural: 'nodecheckpoints', name: s.node })
          .catch(() => null)) as {
          status?: { parents?: Array<{ key: string; checkpointActive?: boolean; state: string }> };
        } | null;
        const p = o?.status?.parents?.find((x) => x.key === KEY);
        // The last beat before the kill may be fresh in Active: one more hand-over can start (and
        // fail, with no beats) before the status settles, so a HandingOver snapshot is not the end.
        return p?.checkpointActive && p.state === 'Active' ? p : undefined;
      },
      { what: 'NodeCheckpoint status with the active checkpoint, state Active' },
    );
    expect(nc.key).toBe(KEY);
    // A condition's lastTransitionTime moves only when its status does: the policy was valid all
    // along, so its time is the first status write's, seconds before the latest one.
    const latest = (await co.getClusterCustomObject({ group: 'lastseen.dev', version: 'v1alpha1', plural: 'nodecheckpoints', name: s.node })) as {
      status: { observedAt: string; conditions: Array<{ type: string; status: string; lastTransitionTime: string }> };
    };
    const policyValid = latest.status.conditions.find((c) => c.type === 'PolicyValid');
    expect(policyValid?.status).toBe('True');
    expect(Date.parse(latest.status.observedAt) - Date.parse(policyValid!.lastTransitionTime)).toBeGreaterThan(2000);

    process.stdout.write(
      `[measured] activation after SIGKILL ${activationMs} ms (window 1000 ms, interval 250 ms); retire after Ready ${retireMs} ms; cover after SIGTERM ${coverMs} ms\n`,
    );
    await s.agent.stop();
    // A graceful stop leaves the active checkpoint in place.
    expect(await exists(s.manifest)).toBe(true);
  });

  it('keeps its last good policy when the file turns invalid, and says so in /metrics', async () => {
    const s = await setup('policy');
    const port = await healthPort(s.agent);
    const metric = async () => {
      const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return /^lastseen_policy_valid (\d)/m.exec(body)?.[1];
    };
    await waitFor(async () => ((await metric()) === '1' ? true : undefined), { what: 'policy valid' });
    await writePolicy(s.dirs.policy, '{ interval: 1s, window: 1s }');
    await waitFor(async () => ((await metric()) === '0' ? true : undefined), { timeoutMs: 30_000, what: 'policy refused' });
    expect(s.agent.logs.some((l) => l.msg === 'policy refused; keeping the last valid one')).toBe(true);
    await writePolicy(s.dirs.policy, '{ interval: 300ms, window: 1s, startupGrace: 2s }');
    await waitFor(async () => ((await metric()) === '1' ? true : undefined), { timeoutMs: 30_000, what: 'policy valid again' });
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    await s.agent.stop();
  });

  // A deleted policy used to drop the agent to the built-in defaults (5s interval,
  // 20s window, no overrides), silently; and a restart forgot the last good policy altogether.
  it('keeps its last good policy when the file disappears, says so, and still has it after a restart', async () => {
    const s = await setup('policy-missing');
    const port = await healthPort(s.agent);
    const missing = async (p: number) => /^lastseen_policy_missing (\d)/m.exec(await (await fetch(`http://127.0.0.1:${p}/metrics`)).text())?.[1];
    await waitFor(() => s.agent.logs.find((l) => l.msg === 'agent started'), { what: 'the agent to start' });
    expect(await missing(port)).toBe('0');
    await rm(s.dirs.policy);
    await waitFor(async () => ((await missing(port)) === '1' ? true : undefined), { timeoutMs: 30_000, what: 'the policy reported missing' });
    expect(s.agent.logs.some((l) => l.msg === 'no policy found; keeping the last good policy')).toBe(true);
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    await waitFor(
      // On the agent's own pod (it reads a file), in its namespace: where an operator looks.
      async () =>
        (await core.listNamespacedEvent({ namespace: s.ns })).items.some(
          (e) => e.involvedObject.kind === 'Pod' && e.involvedObject.name === `agent-${s.node}` && e.reason === 'PolicyMissing' && e.type === 'Warning',
        )
          ? true
          : undefined,
      { timeoutMs: 30_000, what: "a PolicyMissing Warning Event on the agent's pod" },
    );
    await s.agent.stop();
    s.agent = s.startAgent();
    const started = await waitFor(() => s.agent.logs.find((l) => l.msg === 'agent started'), { what: 'the agent to restart' });
    // The persisted policy's interval, not the built-in 5s.
    expect(started.interval).toBe('250ms');
    expect(s.agent.logs.some((l) => l.msg === 'read the persisted last good policy')).toBe(true);
    expect(await missing(await healthPort(s.agent))).toBe('1');
    await s.agent.stop();
  });

  it('a SIGKILLed agent restarts with the same decisions: the active checkpoint stays, no torn files, then it hands back', async () => {
    const s = await setup('crash');
    let hb = s.heartbeat();
    await captured(s);
    await hb.stop('SIGKILL');
    await appears(s.manifest);
    const before = await readFile(s.manifest, 'utf8');
    const recovers = (p: typeof s.agent) =>
      waitFor(() => p.logs.find((l) => l.msg === 'tracking parent' && l.state === 'Active'), {
        intervalMs: 25,
        what: 'the agent to re-cover the active parent',
      });

    // A second agent (the static-pod copy next to the DaemonSet pod: hostNetwork, same flags, so
    // the same health port) stands by behind the lock ...
    const port = await healthPort(s.agent);
    const standby = s.startAgent(['--health-port', String(port)]);
    await waitFor(() => standby.logs.find((l) => l.msg === 'another agent holds the node lock; standing by'), { what: 'the second agent to stand by' });
    await new Promise((r) => setTimeout(r, 1000));
    expect(standby.logs.some((l) => l.msg === 'agent started')).toBe(false);
    expect(standby.child.exitCode).toBeNull();
    // ... and takes over when the holder is SIGKILLed: no lease to wait out.
    let t0 = Date.now();
    await s.agent.stop('SIGKILL');
    s.agent = standby;
    await recovers(s.agent);
    const takeoverMs = Date.now() - t0;
    // ... and then serves the node's health port.
    expect(await healthPort(s.agent)).toBe(port);
    await waitFor(async () => ((await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200 ? true : undefined), { what: 'readyz from the new holder' });

    // A crashed agent restarted from scratch (the kubelet's restart) re-covers at once too.
    t0 = Date.now();
    await s.agent.stop('SIGKILL');
    s.agent = s.startAgent();
    await recovers(s.agent);
    const restartMs = Date.now() - t0;
    process.stdout.write(
      `[measured] active parent re-covered ${takeoverMs} ms after SIGKILL of the lock holder (standby already running); ${restartMs} ms after SIGKILL + restart of the agent process\n`,
    );
    // The figures are printed above; the bounds only separate the kernel-freed lock from the old
    // file lock, which a successor could take only after 10 s (a loaded CI box took 3.3 s to start
    // an agent process, so a tighter bound would test the machine, not the lock).
    expect(takeoverMs).toBeLessThan(8000);
    // The restart includes a process start (6 s at load 12 here): judged by the new process's own
    // log clock, from its first line to the re-cover.
    const first = s.agent.logs[0]?.time as number;
    const recovered = s.agent.logs.find((l) => l.msg === 'tracking parent' && l.state === 'Active')?.time as number;
    process.stdout.write(`[measured] restarted agent: re-covered ${recovered - first} ms after its first log line\n`);
    expect(recovered - first).toBeLessThan(5000);
    expect(s.agent.logs.some((l) => l.msg === 'another agent holds the node lock; standing by')).toBe(false);
    expect(s.agent.logs.some((l) => l.msg === 'another agent holds the node lock; standing by')).toBe(false);
    await new Promise((r) => setTimeout(r, 3000));
    expect(await readFile(s.manifest, 'utf8')).toBe(before);
    const leftovers = (await readdir(s.dirs.manifests)).filter((f) => f.startsWith('.'));
    expect(leftovers).toEqual([]);
    expect(s.agent.logs.filter((l) => l.msg === 'activating checkpoint')).toHaveLength(0);
    hb = s.heartbeat();
    await disappears(s.manifest);
    await hb.stop();
    await s.agent.stop();
  });
});

describe('an agent and its parent SIGKILLed together', () => {
  it('the restarted agent takes the lock at once and covers the parent after startupGrace, not after a stale lock', async () => {
    const s = await setup('crashboth');
    const hb = s.heartbeat();
    await captured(s);
    await waitFor(() => s.agent.logs.find((l) => l.msg === 'transition' && l.to === 'Healthy'), { what: 'Healthy' });
    await s.agent.stop('SIGKILL');
    await hb.stop('SIGKILL');
    const t0 = Date.now();
    s.agent = s.startAgent();
    const coverMs = await appears(s.manifest);
    // The startupGrace of POLICY (2s) is the own-clock rule's price (docs/decisions/0001-own-clock.md): a new
    // process has seen no beat change yet. The lock adds nothing: the agent never stood by.
    process.stdout.write(`[measured] parent covered ${Date.now() - t0} ms after the agent restarted (startupGrace 2000 ms, window 1000 ms)\n`);
    expect(s.agent.logs.some((l) => l.msg === 'another agent holds the node lock; standing by')).toBe(false);
    expect(coverMs).toBeGreaterThanOrEqual(2000);
    // startupGrace (2 s) after the agent started, by its own log clock (a process start on a loaded
    // machine is not the agent's doing); a stale lock alone held it 10 s.
    await waitFor(() => s.agent.logs.find((l) => l.msg === 'activating checkpoint'), { what: 'the activation logged' });
    const started = s.agent.logs.find((l) => l.msg === 'agent started')?.time as number;
    const activated = s.agent.logs.find((l) => l.msg === 'activating checkpoint')?.time as number;
    process.stdout.write(`[measured] activation ${activated - started} ms after 'agent started'\n`);
    expect(activated - started).toBeLessThan(8000);
    await s.agent.stop();
  });
});

describe('an agent restarted in the middle of a hand-over', () => {
  it('keeps the hand-over deadline: the checkpoint comes back after handoverTimeout, not startTimeout', async () => {
    const s = await setup('midhandover');
    let hb = s.heartbeat();
    await captured(s);
    await hb.stop('SIGKILL');
    await appears(s.manifest);
    await s.main.down();
    hb = s.heartbeat(); // Starting, never Ready
    await disappears(s.manifest);
    await s.agent.stop('SIGKILL');
    const t0 = Date.now();
    s.agent = s.startAgent();
    await appears(s.manifest, 25_000); // startTimeout is 30s: only the kept deadline brings it back sooner
    expect(Date.now() - t0).toBeLessThan(25_000);
    expect(s.agent.logs.some((l) => l.msg === 'tracking parent' && l.state === 'HandingOver')).toBe(true);
    await hb.stop('SIGKILL');
    await s.agent.stop();
  });
});

describe("the agent's own checkpoint", () => {
  it('is captured from its own pod, kept active, and left alone by a restarted agent', async () => {
    const s = await setup('self');
    const core = kubeConfigFor('admin').makeApiClient(CoreV1Api);
    const name = `agent-${s.node}`;
    await core.createNamespacedPod({
      namespace: s.ns,
      body: {
        metadata: { name, labels: { 'app.kubernetes.io/name': 'lastseen', 'app.kubernetes.io/component': 'agent' } },
        spec: { nodeName: s.node, containers: [{ name: 'agent', image: 'ghcr.io/lastseen/lastseen:0.1.0', args: ['agent'] }] },
      },
    });
    const own = join(s.dirs.manifests, `lastseen-${s.ns}-${name}.json`);
    await appears(own, 60_000);
    const before = await readFile(own, 'utf8');
    expect(JSON.parse(before).metadata.labels['app.kubernetes.io/component']).toBe('agent');
    await s.agent.stop('SIGKILL');
    s.agent = s.startAgent();
    await waitFor(() => s.agent.logs.find((l) => l.msg === 'agent started'), { what: 'the agent to restart' });
    await new Promise((r) => setTimeout(r, 4000));
    expect(await readFile(own, 'utf8')).toBe(before);
    expect(s.agent.logs.some((l) => l.msg === 'tracking parent' && String(l.parent).endsWith(name))).toBe(false);
    await s.agent.stop();
  });
});

describe('lastseen agent without an api-server', () => {
  it('hold: the local channel stays fresh, so nothing is activated while the api-server is down', async () => {
    const s = await setup('hold', '{ interval: 250ms, window: 1s, startupGrace: 2s, handoverTimeout: 2s, channels: [lease, local], whenApiUnreachable: hold }');
    const hb = s.heartbeat('lease,local');
    await captured(s);
    await stopApiserver();
    try {
      await waitFor(() => s.agent.logs.find((l) => l.msg === 'api-server reachability changed' && l.reachable === false), { what: 'the agent to notice' });
      await new Promise((r) => setTimeout(r, 4000));
      expect(await exists(s.manifest)).toBe(false);
    } finally {
      await startApiserver();
    }
    await hb.stop();
    await s.agent.stop();
  });

  // `activate` without the local channel is refused by the policy validator (the
  // agent would cover a healthy parent on the api-server's silence alone), so the api-server parent
  // is covered on local evidence: its local beats stop.
  it('activate: the api-server parent is covered when the api-server goes away and its local beats stop', async () => {
    const s = await setup(
      'activate',
      '{ interval: 250ms, window: 1s, startupGrace: 2s, handoverTimeout: 2s, channels: [lease, local], whenApiUnreachable: activate }',
    );
    const hb = s.heartbeat('lease,local');
    await captured(s);
    await stopApiserver();
    try {
      await waitFor(() => s.agent.logs.find((l) => l.msg === 'api-server reachability changed' && l.reachable === false), { what: 'the agent to notice' });
      // The local beats still change: the parent is alive, whatever the api-server's silence says.
      await new Promise((r) => setTimeout(r, 2000));
      expect(await exists(s.manifest)).toBe(false);
      await hb.stop('SIGKILL');
      const t0 = Date.now();
      await appears(s.manifest, 30_000);
      // Not before the window has passed since the last beat the agent could see.
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1000 - 250);
    } finally {
      await startApiserver();
    }
    await s.agent.stop();
  });
});

describe('lastseen agent from the bundle', () => {
  it('the bundled agent and heartbeat cover a killed parent and hand back on Ready', async () => {
    const out = join(tmpdir(), `lastseen-bundle-${process.pid}.mjs`);
    execFileSync(process.execPath, ['scripts/bundle.mjs', '--outfile', out], { cwd: fileURLToPath(new URL('../../', import.meta.url)), stdio: 'pipe' });
    const s = await setup('bundle', POLICY, out);
    let hb = s.heartbeat();
    await captured(s);
    await hb.stop('SIGKILL');
    const activationMs = await appears(s.manifest);
    expect(activationMs).toBeGreaterThanOrEqual(1000 - 250);
    hb = s.heartbeat();
    await disappears(s.manifest);
    await hb.stop();
    await s.agent.stop();
    expect(await s.agent.exited).toBe(0);
  });
});
