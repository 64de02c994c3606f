#!/usr/bin/env node
// The heartbeat sidecar's own entry point: `lastseen heartbeat`, `lastseen ready` (its readiness
// probe) and `lastseen wait-checkpoint` (its postStart hook) and nothing else, bundled apart (dist/lastseen-heartbeat.mjs, scripts/bundle.mjs) so a
// parent pod's sidecar parses and keeps only what it runs. It never loads @kubernetes/client-node
// (its api requests go over the light client, src/kube/light-client.ts). The same arguments as the
// full CLI: the subcommand first, then its flags. `ready` runs at every readiness probe: it loads
// only its own module (a dynamic import, which the bundle keeps lazy), not the heartbeat's pino,
// probes and api client; nor does `wait-checkpoint`.
import { Command } from 'commander';
import { runProgram } from './errors.js';

const program = new Command('lastseen')
  .description('the lastseen heartbeat sidecar (the heartbeat, ready and wait-checkpoint subcommands)')
  .showHelpAfterError();
const light = process.argv[2] === 'ready' || process.argv[2] === 'wait-checkpoint';
if (!light) (await import('./heartbeat.js')).register(program);
if (process.argv[2] !== 'wait-checkpoint') (await import('./ready.js')).register(program);
if (process.argv[2] !== 'ready') (await import('./wait-checkpoint.js')).register(program);

await runProgram(program);
