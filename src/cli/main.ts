#!/usr/bin/env node
// The `lastseen` command. Tiny on purpose: each subcommand lives in its own file and registers
// itself; one top-level catch turns known errors into a message and an exit code.
import { Command } from 'commander';
import { versionLine } from '../version.js';
import { runProgram } from './errors.js';
import { addKubectlFlags } from './kubectl-flags.js';

const program = new Command('lastseen').description('Heartbeat-lease checkpoints for self-hosted Kubernetes control planes').showHelpAfterError();
// The version string is built only when asked for: from a checkout it costs a run of git.
program.option('-V, --version', 'print the version and the commit it was built from, then exit').on('option:version', () => {
  process.stdout.write(`${versionLine()}\n`);
  process.exit(0);
});

// Subcommands (one line each; keep alphabetical). Only the one named on the command line is
// loaded: the agent starts first on a rebooted node and should not pay for the simulator's or
// status table's imports. Help, an unknown name or no name loads them all, so `--help` lists
// every subcommand and commander's suggestions still work.
const subcommands: Record<string, () => Promise<{ register: (p: Command) => void }>> = {
  agent: () => import('./agent.js'),
  heartbeat: () => import('./heartbeat.js'),
  policy: () => import('./policy.js'),
  ready: () => import('./ready.js'),
  simulate: () => import('./simulate.js'),
  status: () => import('./status.js'),
};

async function main(): Promise<void> {
  const named = process.argv[2];
  const wanted = named !== undefined && Object.hasOwn(subcommands, named) ? [named] : Object.keys(subcommands);
  for (const name of wanted) (await subcommands[name]!()).register(program);
  // kubectl's --context, --kubeconfig and -n/--namespace, for `kubectl lastseen status ...`.
  const status = program.commands.find((c) => c.name() === 'status');
  if (status) addKubectlFlags(status);
  await runProgram(program);
}

// Not a top-level await: the single executable (scripts/release-plugin.mjs) is CommonJS, which has
// none. A rejection ends the process as an uncaught one would, with the stack and exit code 1.
void main();
