// `lastseen ready --ready-file FILE`: the heartbeat sidecar's readiness probe (an exec probe the
// kubelet runs in the sidecar's container every few seconds). Exit 0 when the sidecar's last Ready
// proof (src/heartbeat/ready-state.ts) says Ready and is fresh, else 1 with the reason on stderr,
// which the kubelet puts in the pod's "Readiness probe failed" Event.
//
// Run for every probe of every parent, so it loads only commander and the state file's reader
// (heartbeat-main.ts imports nothing else for it); docs/decisions/0009-ready-from-the-sidecar.md has
// its cost.
import type { Command } from 'commander';
import { readReadyVerdict } from '../heartbeat/ready-state.js';
import { exitCodesHelp, usageError } from './errors.js';

export function register(program: Command): void {
  program
    .command('ready')
    .description("exit 0 when the heartbeat sidecar's last proof says its pod's own process is Ready (the sidecar's readiness probe)")
    .option('--ready-file <file>', 'the file the heartbeat writes with its own --ready-file')
    .addHelpText('after', exitCodesHelp({ 1: 'not ready: the last proof is not Ready, is stale, or the file is missing or unreadable (stderr says which)' }))
    .action((flags: { readyFile?: string }) => {
      if (!flags.readyFile) throw usageError(['--ready-file is required']);
      const verdict = readReadyVerdict(flags.readyFile);
      if (verdict.ready) {
        process.stdout.write(`${verdict.message}\n`);
        return;
      }
      process.stderr.write(`${verdict.message}\n`);
      process.exitCode = 1;
    });
}
