// `lastseen agent`: the node agent. Flags fall back to the downward-API environment; every path is
// a flag with the DESIGN default so it can run unprivileged in tests. JSON logs (pino) on stdout.
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { pino } from 'pino';
import { API_FAILURE_THRESHOLD, API_PROBE_CALM_FACTOR, API_PROBE_INTERVAL_MS } from '../agent/observe/api-probe.js';
import { DEFAULT_HEALTH_PORT, DEFAULT_MANIFEST_DIR, DEFAULT_STATE_DIR, runAgent } from '../agent/run.js';
import { DEFAULT_HEARTBEAT_DIR } from '../channels/local.js';
import { parseDuration } from '../policy/duration.js';
import { CliError, describeCause, EXIT, exitCodesHelp, usageError } from './errors.js';

interface Flags {
  node?: string;
  podName?: string;
  namespace?: string;
  kubeconfig?: string;
  manifestDir: string;
  stateDir: string;
  heartbeatDir: string;
  bootIdFile?: string;
  policyFile?: string;
  healthPort: string;
  healthHost: string;
  watchdog?: string;
  localPoll?: string;
  apiProbe?: string;
  apiProbeCalm?: string;
  logLevel: string;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function ms(text: string | undefined, flag: string, problems: string[]): number | undefined {
  if (text === undefined) return undefined;
  const r = parseDuration(text);
  if (!r.ok) {
    problems.push(`${flag}: ${r.error}`);
    return undefined;
  }
  return r.ms;
}

export function register(program: Command): void {
  program
    .command('agent')
    .description('run the node agent: watch parents on this node, keep their checkpoints, cover silent ones')
    .option('--node <name>', 'this node (env NODE_NAME)')
    .option('--pod-name <name>', 'this agent pod (env POD_NAME)')
    .option(
      '--namespace <ns>',
      "the agent's namespace, which holds the lastseen-policy ConfigMap and receives the policy Events (env POD_NAMESPACE; default lastseen-system)",
    )
    .option('--kubeconfig <file>', 'kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)')
    .option('--manifest-dir <dir>', "the kubelet's static-pod folder", DEFAULT_MANIFEST_DIR)
    .option('--state-dir <dir>', 'checkpoints and the node lock', DEFAULT_STATE_DIR)
    .option('--heartbeat-dir <dir>', 'local heartbeat files', DEFAULT_HEARTBEAT_DIR)
    .option('--policy-file <file>', 'read the policy from this file instead of the ConfigMap')
    .option(
      '--boot-id-file <file>',
      "the node's boot id; a changed id means a reboot, and the file's modification time is when the boot began (default /proc/sys/kernel/random/boot_id, with the kernel's uptime)",
    )
    .option('--health-port <port>', '/healthz /readyz /metrics port (0: any free port)', String(DEFAULT_HEALTH_PORT))
    .option('--health-host <host>', 'address for the health endpoints', '0.0.0.0')
    .option('--watchdog <duration>', 're-open a watch silent for this long (default 90s)')
    .option('--local-poll <duration>', 'scan the heartbeat folder this often (default 1s)')
    .option(
      '--api-probe <duration>',
      `probe the api-server's /readyz this often (default ${API_PROBE_INTERVAL_MS / 1000}s; unreachable after ${API_FAILURE_THRESHOLD} failures in a row, reachable after one success)`,
    )
    .option(
      '--api-probe-calm <duration>',
      `probe this often instead while the pod and Lease watches are open and the api-server answers; a broken watch probes at once (default ${API_PROBE_CALM_FACTOR} x --api-probe; 0s: always --api-probe)`,
    )
    .option('--log-level <level>', `log level: ${LOG_LEVELS.join(', ')}`, 'info')
    .addHelpText(
      'after',
      exitCodesHelp({ 0: 'stopped by SIGTERM or SIGINT', 1: 'the node lock was lost to another agent, or the agent could not start (logged)' }),
    )
    .action(async (flags: Flags) => {
      const env = process.env;
      // Every problem with the flags at once, before anything starts.
      const problems: string[] = [];
      const node = flags.node ?? env.NODE_NAME;
      if (!node) problems.push('--node (or env NODE_NAME) is required');
      const port = Number(flags.healthPort);
      if (!Number.isInteger(port) || port < 0 || port > 65535) problems.push(`--health-port: ${flags.healthPort} is not a port`);
      if (!LOG_LEVELS.includes(flags.logLevel)) problems.push(`--log-level: "${flags.logLevel}" is not one of ${LOG_LEVELS.join(', ')}`);
      if (flags.kubeconfig !== undefined && !existsSync(flags.kubeconfig)) problems.push(`--kubeconfig ${flags.kubeconfig}: no such file`);
      const watchdogMs = ms(flags.watchdog, '--watchdog', problems);
      const localPollMs = ms(flags.localPoll, '--local-poll', problems);
      const apiProbeMs = ms(flags.apiProbe, '--api-probe', problems);
      const apiProbeCalmMs = ms(flags.apiProbeCalm, '--api-probe-calm', problems);
      if (apiProbeCalmMs && apiProbeCalmMs < (apiProbeMs || API_PROBE_INTERVAL_MS))
        problems.push('--api-probe-calm: shorter than --api-probe; use 0s to turn calm periods off');
      if (problems.length > 0 || !node) throw usageError(problems);
      const logger = pino({ level: flags.logLevel, base: { component: 'lastseen-agent', node } });
      // SIGTERM/SIGINT at any time, also while standing by for the lock or waiting for the first
      // policy: the agent undoes what it started and the process exits 0.
      const ac = new AbortController();
      const onSignal = (signal: string) => {
        logger.info({ signal }, 'signal received');
        ac.abort(new Error(`stopped by ${signal}`));
      };
      process.once('SIGTERM', () => onSignal('SIGTERM'));
      process.once('SIGINT', () => onSignal('SIGINT'));
      let running: Awaited<ReturnType<typeof runAgent>>;
      try {
        running = await runAgent({
          node,
          podName: flags.podName ?? env.POD_NAME ?? `lastseen-agent-${node}`,
          namespace: flags.namespace ?? env.POD_NAMESPACE ?? 'lastseen-system',
          manifestDir: flags.manifestDir,
          stateDir: flags.stateDir,
          heartbeatDir: flags.heartbeatDir,
          healthPort: port,
          healthHost: flags.healthHost,
          logger,
          ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
          ...(flags.policyFile ? { policyFile: flags.policyFile } : {}),
          ...(flags.bootIdFile ? { bootIdFile: flags.bootIdFile } : {}),
          ...(watchdogMs ? { watchdogMs } : {}),
          ...(localPollMs ? { localPollMs } : {}),
          ...(apiProbeMs ? { apiProbeMs } : {}),
          ...(apiProbeCalmMs !== undefined ? { apiProbeCalmMs } : {}),
          signal: ac.signal,
        });
      } catch (e) {
        if (!ac.signal.aborted) {
          logger.error({ err: describeCause(e) }, 'the agent could not start');
          throw new CliError(`the agent could not start: ${describeCause(e)}`, 'ESTART', EXIT.failed);
        }
        logger.info('stopped while starting');
        return;
      }
      const agent = running;
      await new Promise<void>((resolve) => {
        const shutdown = () => void agent.stop().then(resolve, resolve);
        if (ac.signal.aborted) shutdown();
        else ac.signal.addEventListener('abort', shutdown, { once: true });
        agent.lost.then(() => {
          agent.stop().finally(() => {
            process.exitCode = 1;
            resolve();
          });
        });
      });
    });
}
