#!/usr/bin/env node
// The `lastseen` command. Tiny on purpose: each subcommand lives in its own file and registers
// itself; one top-level catch turns known errors into a message and an exit code.
import { Command } from 'commander';
import { CliError } from './errors.js';

const program = new Command('lastseen')
  .description('Heartbeat-lease checkpoints for self-hosted Kubernetes control planes')
  .showHelpAfterError();

// Subcommands (one line each; keep alphabetical).
const registrations: Array<(p: Command) => void> = [
  (await import('./agent.js')).register,
  (await import('./heartbeat.js')).register,
  (await import('./policy.js')).register,
  (await import('./simulate.js')).register,
  (await import('./status.js')).register,
];
for (const register of registrations) register(program);

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CliError) {
    process.stderr.write(`lastseen: ${e.message}\n`);
    process.exit(e.exitCode);
  }
  throw e;
}
