// `lastseen policy validate FILE`: every problem with its field path, or the effective policy.
// FILE is a policy document, or the `lastseen-policy` ConfigMap that carries one under the key
// `policy.yaml` (as `kubectl get configmap lastseen-policy -o yaml` prints it, or as it sits in
// deploy/base): what the agent reads is what is checked.
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { parseAllDocuments, stringify } from 'yaml';
import { POLICY_CONFIGMAP_KEY } from '../agent/observe/policy-source.js';
import { type PolicyError, parsePolicyText, toDocument } from '../policy/policy.js';
import { CliError, EXIT, exitCodesHelp } from './errors.js';

/** The policy text a file holds: itself, or a ConfigMap's `policy.yaml` (path prefix for its errors). */
export function policyTextOf(text: string): { text: string; prefix: string } | { errors: PolicyError[] } {
  let docs: unknown[];
  try {
    docs = parseAllDocuments(text, { logLevel: 'silent' }).map((d) => (Array.isArray(d) ? null : d.toJS()));
  } catch {
    return { text, prefix: '' };
  }
  const cm = docs.find((d) => (d as { kind?: unknown } | null)?.kind === 'ConfigMap') as
    | { data?: Record<string, unknown>; metadata?: { name?: string } }
    | undefined;
  if (!cm) return { text, prefix: '' };
  const inner = cm.data?.[POLICY_CONFIGMAP_KEY];
  if (typeof inner !== 'string')
    return {
      errors: [
        {
          path: `data.${POLICY_CONFIGMAP_KEY}`,
          message: `ConfigMap ${cm.metadata?.name ?? ''} has no key "${POLICY_CONFIGMAP_KEY}" (the agent reads the policy document from it)`,
        },
      ],
    };
  return { text: inner, prefix: `data.${POLICY_CONFIGMAP_KEY}: ` };
}

export function register(program: Command): void {
  const policy = program.command('policy').description('work with lastseen policy documents');
  policy
    .command('validate')
    .argument('<file>', 'policy.yaml, or the lastseen-policy ConfigMap holding it (or - for standard input)')
    .description('check a policy document (or its ConfigMap); print every error with its field path, or the effective policy')
    .addHelpText('after', exitCodesHelp({ 2: 'the file cannot be read, or the policy is not valid (every error with its field path)' }))
    .action(async (file: string) => {
      let text: string;
      try {
        text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
      } catch (e) {
        throw new CliError(`cannot read ${file}: ${(e as Error).message}`, 'EREAD', EXIT.usage);
      }
      const inner = policyTextOf(text);
      const r = 'errors' in inner ? { ok: false as const, errors: inner.errors } : parsePolicyText(inner.text);
      const prefix = 'prefix' in inner ? inner.prefix : '';
      if (!r.ok) {
        for (const err of r.errors) process.stderr.write(`${file}: ${prefix}${err.path}: ${err.message}\n`);
        throw new CliError(`${file}: ${r.errors.length} error(s); the policy was not accepted`, 'EPOLICY', EXIT.usage);
      }
      process.stdout.write(`# ${file}: valid. Effective policy:\n${stringify(toDocument(r.policy))}`);
    });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
