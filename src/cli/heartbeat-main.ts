#!/usr/bin/env node
// The heartbeat sidecar's own entry point: `lastseen heartbeat` and nothing else, bundled apart
// (dist/lastseen-heartbeat.mjs, scripts/bundle.mjs) so a parent pod's sidecar parses and keeps only
// what it runs. It never loads @kubernetes/client-node (its api requests go over the light client,
// src/kube/light-client.ts). The same arguments as the full CLI: `heartbeat` first, then its flags.
import { Command } from 'commander';
import { runProgram } from './errors.js';
import { register } from './heartbeat.js';

const program = new Command('lastseen').description('the lastseen heartbeat sidecar (only the heartbeat subcommand)').showHelpAfterError();
register(program);

await runProgram(program);
