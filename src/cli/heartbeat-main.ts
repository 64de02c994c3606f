#!/usr/bin/env node
// The heartbeat sidecar's own entry point: `lastseen heartbeat` and `lastseen ready` (its readiness
// probe) and nothing else, bundled apart (dist/lastseen-heartbeat.mjs, scripts/bundle.mjs) so a
// parent pod's sidecar parses and keeps only what it runs. It never loads @kubernetes/client-node
// (its api requests go over the light client, src/kube/light-client.ts). The same arguments as the
// full CLI: the subcommand first, then its flags. `ready` runs at every readiness probe: it loads
// only its own module (a dynamic import, which the bundle keeps lazy), not the heartbeat's pino,
// probes and api client.
import { Command } from 'commander';
import { runProgram } from './errors.js';

const program = new Command('lastseen').description('the lastseen heartbeat sidecar (the heartbeat and ready subcommands)').showHelpAfterError();
if (process.argv[2] !== 'ready') (await import('./heartbeat.js')).register(program);
(await import('./ready.js')).register(program);

await runProgram(program);
