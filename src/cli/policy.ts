// `lastseen policy validate FILE`: every problem with its field path, or the effective policy.
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { parsePolicyText, toDocument } from '../policy/policy.js';
import { CliError } from './errors.js';

export function register(program: Command): void {
  const policy = program.command('policy').description('work with lastseen policy documents');
  policy
    .command('validate')
    .argument('<file>', 'policy.yaml (or - for standard input)')
    .description('check a policy document; print every error with its field path, or the effective policy')
    .action(async (file: string) => {
      let text: string;
      try {
        text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
      } catch (e) {
        throw new CliError(`cannot read ${file}: ${(e as Error).message}`, 'EREAD', 2);
      }
      const r = parsePolicyText(text);
      if (!r.ok) {
        for (const err of r.errors) process.stderr.write(`${file}: ${err.path}: ${err.message}\n`);
        throw new CliError(`${file}: ${r.errors.length} error(s); the policy was not accepted`, 'EPOLICY', 1);
      }
      process.stdout.write(`# ${file}: valid. Effective policy:\n${stringify(toDocument(r.policy))}`);
    });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
