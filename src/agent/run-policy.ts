// The agent's policy (a piece of `runAgent`): a mounted file, or the `lastseen-policy` ConfigMap.
// The last good policy is kept in the state folder, so a missing policy (or a restart without an
// api-server) keeps it instead of the built-in defaults. Refused and missing policies are said
// loudly: a Warning Event where an operator looks for the policy (the ConfigMap it came from, or
// the agent's own pod when it reads a file), the metrics, the NodeCheckpoint condition.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type Clock, sleep, type Timers } from '../core/time.js';
import type { Action } from '../core/types.js';
import type { EventTarget } from './actuators.js';
import type { Agent } from './agent.js';
import { LastGoodPolicyFile } from './last-good-policy.js';
import type { AgentMetrics } from './metrics.js';
import { configMapPolicySource, filePolicySource, POLICY_CONFIGMAP_NAME, type PolicySource } from './observe/policy-source.js';

/** Longest wait for the first policy read before starting with what is known (built-in defaults). */
export const FIRST_POLICY_WAIT_MS = 5_000;

export interface PolicyWiring {
  agent: Agent;
  metrics: AgentMetrics;
  /** Ask for a NodeCheckpoint status write (its PolicyValid condition changed). */
  pokeStatus(): void;
  nodeEvent(e: Extract<Action, { type: 'event' }>, about: EventTarget): Promise<void>;
  kubeConfig: KubeConfig;
  stateDir: string;
  policyFile?: string;
  namespace: string;
  podName: string;
  watchdogMs?: number;
  log: Logger;
  clock: Clock;
  timers: Timers;
  signal?: AbortSignal;
}

/**
 * Start the policy source and wait (briefly) for its first read, so parents are judged with the
 * policy they will live under, not given the built-in grace because the ConfigMap answered late.
 */
export async function startPolicy(w: PolicyWiring): Promise<PolicySource> {
  const { log, metrics, agent } = w;
  const lastGoodFile = new LastGoodPolicyFile(w.stateDir);
  const persisted = await lastGoodFile.load();
  if (persisted && !persisted.ok) log.warn({ file: lastGoodFile.path, reason: persisted.reason }, 'persisted last good policy not usable; ignoring it');
  else if (persisted) log.info({ file: lastGoodFile.path }, 'read the persisted last good policy');
  const lastGood = persisted?.ok ? { policy: persisted.policy, origin: `persisted ${lastGoodFile.path}` } : null;
  const eventTarget: EventTarget = w.policyFile
    ? { apiVersion: 'v1', kind: 'Pod', name: w.podName, namespace: w.namespace }
    : { apiVersion: 'v1', kind: 'ConfigMap', name: POLICY_CONFIGMAP_NAME, namespace: w.namespace };
  const first = new AbortController();
  const onPolicy = (policy: Parameters<Agent['setPolicy']>[0], _origin: string, text?: string) => {
    first.abort();
    metrics.policyValid.set(1);
    // The source has logged "policy applied" (with its overrides); once per policy is enough.
    agent.setPolicy(policy);
    if (text === undefined) return;
    metrics.policyMissing.set(0);
    w.pokeStatus();
    lastGoodFile
      .save(text)
      .catch((e: Error) =>
        log.warn(
          { file: lastGoodFile.path, err: e.message },
          'could not persist the last good policy; a restart while the policy is missing would use an older one',
        ),
      );
  };
  const onMissing = (origin: string, using: 'last-good' | 'defaults') => {
    first.abort();
    metrics.policyMissing.set(1);
    const message =
      using === 'last-good'
        ? `no policy at ${origin}: keeping the last good policy (persisted in ${lastGoodFile.path}), not the built-in defaults; restore the policy to change it`
        : `no policy at ${origin} and no last good one: using the built-in defaults; create the policy to change them`;
    void w.nodeEvent({ type: 'event', eventType: 'Warning', reason: 'PolicyMissing', message }, eventTarget);
    w.pokeStatus();
  };
  const onInvalid = (errors: Array<{ path: string; message: string }>, origin: string) => {
    first.abort();
    metrics.policyValid.set(0);
    // The source has logged "policy refused" (with the errors); once per refusal is enough.
    const message = `policy from ${origin} refused (${errors.length} error(s)): ${errors
      .slice(0, 5)
      .map((e) => `${e.path}: ${e.message}`)
      .join('; ')}`;
    void w.nodeEvent({ type: 'event', eventType: 'Warning', reason: 'PolicyRefused', message }, eventTarget);
    w.pokeStatus();
  };
  const source = w.policyFile
    ? filePolicySource({ path: w.policyFile, log, timers: w.timers, onPolicy, onInvalid, onMissing, lastGood })
    : configMapPolicySource({
        kubeConfig: w.kubeConfig,
        namespace: w.namespace,
        log,
        clock: w.clock,
        timers: w.timers,
        onPolicy,
        onInvalid,
        onMissing,
        lastGood,
        ...(w.watchdogMs ? { watchdogMs: w.watchdogMs } : {}),
      });
  source.start();
  // The first read (policy, refusal or absence) ends the wait; so does a SIGTERM (w.signal).
  const either = AbortSignal.any([first.signal, ...(w.signal ? [w.signal] : [])]);
  try {
    await sleep(w.timers, FIRST_POLICY_WAIT_MS, either);
  } catch (e) {
    if (w.signal?.aborted) {
      await source.stop();
      throw e;
    }
  }
  agent.setPolicy(source.current());
  // Stopping the source also waits for a last good policy still being written, so nothing
  // touches the state folder once stop() has resolved (a shutdown, a test removing the folder).
  const stopSource = source.stop.bind(source);
  source.stop = async () => {
    await stopSource();
    await lastGoodFile.settled();
  };
  return source;
}
