// `lastseen wait-checkpoint`: the heartbeat sidecar's postStart hook. It returns when the parent's
// containers may start: at once unless this node's checkpoint of the same parent is starting, then
// when that copy is Ready, stops, goes silent, or `--max` has passed
// (src/heartbeat/checkpoint-gate.ts). It always exits 0 on what it reads: a failed postStart hook
// makes the kubelet kill the sidecar. Run by the kubelet at each start of the pod's sidecar, so it
// loads only commander and the beat file's reader, like `ready`.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { DEFAULT_HEARTBEAT_DIR } from '../channels/local.js';
import { localBeatFile } from '../core/names.js';
import { type GateReading, waitAtGate } from '../heartbeat/checkpoint-gate.js';
import { parseDuration } from '../policy/duration.js';
import { exitCodesHelp, usageError } from './errors.js';

interface Flags {
  node?: string;
  namespace?: string;
  parentKey?: string;
  heartbeatDir: string;
  max: string;
}

function readBeatFile(path: string): GateReading | null {
  try {
    const mtimeMs = statSync(path).mtimeMs;
    return { text: readFileSync(path, 'utf8'), mtimeMs };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    // Unreadable for another reason: judged as a file that is not a beat (the gate opens).
    return { text: '', mtimeMs: Date.now() };
  }
}

export function register(program: Command): void {
  program
    .command('wait-checkpoint')
    .description(
      "hold a parent pod's containers while this node's checkpoint of the same parent is starting (the heartbeat sidecar's postStart hook); returns when that copy is Ready, stops, goes silent, or --max passes",
    )
    .option('--node <name>', 'node name (env NODE_NAME)')
    .option('--namespace <ns>', "the parent's namespace (env POD_NAMESPACE)")
    .option('--parent-key <key>', 'parent key (env LASTSEEN_PARENT_KEY)')
    .option('--heartbeat-dir <dir>', 'folder of the local channel', DEFAULT_HEARTBEAT_DIR)
    .option('--max <duration>', 'the longest it holds the containers', '60s')
    .addHelpText(
      'after',
      exitCodesHelp({ 0: 'the containers may start (also when it gave up waiting, or when run in a checkpoint: LASTSEEN_ROLE=checkpoint)' }),
    )
    .action(async (flags: Flags) => {
      const env = process.env;
      const problems: string[] = [];
      const node = flags.node ?? env.NODE_NAME;
      const namespace = flags.namespace ?? env.POD_NAMESPACE;
      const key = flags.parentKey ?? env.LASTSEEN_PARENT_KEY;
      if (!node) problems.push('--node (or env NODE_NAME) is required');
      if (!namespace) problems.push('--namespace (or env POD_NAMESPACE) is required');
      if (!key) problems.push('--parent-key (or env LASTSEEN_PARENT_KEY) is required');
      const max = parseDuration(flags.max);
      if (!max.ok) problems.push(`--max: ${max.error}`);
      if (problems.length > 0) throw usageError(problems);
      const say = (line: string) => process.stdout.write(`wait-checkpoint: ${line}\n`);
      // The copy's own sidecar runs this hook too (its spec is the parent's): it waits for nothing.
      if ((env.LASTSEEN_ROLE ?? 'parent') === 'checkpoint') {
        say('this is the checkpoint itself; starting at once');
        return;
      }
      const path = join(flags.heartbeatDir, localBeatFile(namespace!, key!, 'checkpoint'));
      const outcome = await waitAtGate({ node: node!, namespace: namespace!, key: key! }, (max as { ms: number }).ms, {
        read: () => readBeatFile(path),
        now: Date.now,
        sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
        say,
      });
      say(outcome);
    });
}
