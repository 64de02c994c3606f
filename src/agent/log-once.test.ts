// One info line per event: "policy applied" once per policy the agent takes, "api-server
// reachability changed" once per verdict change. The pieces that each used to log the same event
// (the policy source and the agent's policy wiring; the api-server probe and the loop) write to one
// pino stream here, as in the agent, and the lines are counted.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { monotonicClock as realClock, realTimers } from '../core/time.js';
import { type Actuators, Agent } from './agent.js';
import { AgentMetrics } from './metrics.js';
import { probeApiServer } from './observe/api-probe.js';
import type { FilePolicySource } from './observe/policy-source.js';
import { type PodStatusLike, v1PodInfo } from './parents.js';
import { observerFeed } from './run-observers.js';
import { startPolicy } from './run-policy.js';

/** Every line the agent would write at info (its default level), parsed. */
function infoLog() {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, count: (msg: string) => lines.filter((l) => l.msg === msg).length, lines };
}

function agentWith(log: pino.Logger): Agent {
  const noop = async () => {};
  const actuators: Actuators = {
    capture: async (_p, pod) => ({ specHash: pod.specHash }),
    activate: noop,
    retire: noop,
    collect: noop,
    readLive: async () => ({ beats: [] }),
    event: noop,
    fence: async () => ({ killed: 0, detail: 'not reached' }),
  };
  return new Agent({ node: 'n1', clock: realClock, timers: realTimers, logger: log, actuators, podInfo: (pod: PodStatusLike) => v1PodInfo(pod, 'h1') });
}

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('one log line per event', () => {
  it('"policy applied": once at start, once per changed policy file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lastseen-logonce-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'policy.yaml');
    const doc = (interval: string) => `apiVersion: lastseen.dev/v1alpha1\nkind: Policy\ndefaults: { interval: ${interval}, window: 20s }\n`;
    await writeFile(file, doc('5s'));
    const { log, count, lines } = infoLog();
    // The file route: startPolicy's source is the file source.
    const source = (await startPolicy({
      agent: agentWith(log),
      metrics: new AgentMetrics(false),
      pokeStatus: () => {},
      nodeEvent: async () => {},
      kubeConfig: new KubeConfig(),
      stateDir: dir,
      policyFile: file,
      namespace: 'lastseen-system',
      podName: 'agent-n1',
      log,
      clock: realClock,
      timers: realTimers,
    })) as FilePolicySource;
    cleanup.push(() => source.stop());
    expect(count('policy applied')).toBe(1);
    await writeFile(file, doc('4s'));
    await source.checkNow();
    expect(count('policy applied')).toBe(2);
    // A refused policy: one warning line, with its errors.
    await writeFile(file, doc('nonsense'));
    await source.checkNow();
    expect(count('policy refused; keeping the last valid one')).toBe(1);
    expect(lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('policy refused')).length).toBe(1);
  });

  it('"api-server reachability changed": once per verdict change, the probe feeding the loop as in the agent', async () => {
    let ok = true;
    const server: Server = createServer((_req, res) => {
      res.writeHead(ok ? 200 : 500).end(ok ? 'ok' : 'readyz check failed');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => server.close(r)));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const { log, count } = infoLog();
    const feed = observerFeed({ agent: agentWith(log), node: 'n1', parents: () => new Map(), badInput: () => {} });
    const probe = probeApiServer({ kubeConfig: kc, log, timers: realTimers, intervalMs: 60_000, timeoutMs: 5_000, onReachable: (r) => feed.reachable(r) });
    cleanup.push(() => probe.stop());
    await probe.probeNow(); // reachable
    expect(count('api-server reachability changed')).toBe(1);
    ok = false;
    for (let i = 0; i < 4; i++) await probe.probeNow(); // unreachable at the third failure
    expect(count('api-server reachability changed')).toBe(2);
    ok = true;
    await probe.probeNow(); // reachable again
    await probe.probeNow(); // no change
    expect(count('api-server reachability changed')).toBe(3);
  });
});
