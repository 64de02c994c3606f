import { type Command, CommanderError } from 'commander';

/**
 * Exit codes, the same for every subcommand (each one's --help lists them): 0 success; 1 a verdict
 * or check that failed (a simulation's invariant, a parent not covered); 2 invalid input or usage
 * (a flag, a file, a policy, a scenario: every problem named at once); 3 and up, per command and
 * listed in its --help (for `status`: 3 refused, 4 unreachable).
 */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** An error meant for the person at the terminal: a clear message, a stable code, an exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly exitCode: number = EXIT.failed,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Invalid input: every problem found, one per line, exit 2. */
export function usageError(problems: readonly string[], code = 'EUSAGE'): CliError {
  const text = problems.length === 1 ? problems[0]! : `${problems.length} problems:\n  ${problems.join('\n  ')}`;
  return new CliError(text, code, EXIT.usage);
}

/** The "Exit codes" section of a subcommand's --help: the common ones, then `extra` (1 and 3+) for that command. */
export function exitCodesHelp(extra: Record<number, string> = {}): string {
  const codes: Record<number, string> = { 0: 'success', 2: 'invalid input or usage (every problem is named)', ...extra };
  const lines = Object.entries(codes)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([c, what]) => `  ${c}  ${what}`);
  return `\nExit codes:\n${lines.join('\n')}\n`;
}

/** The cause of a failed request, as a person needs it (`fetch failed` says nothing by itself). */
export function describeCause(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e && depth < 4; depth++) {
    const o = e as { message?: unknown; code?: unknown; cause?: unknown };
    const msg = typeof o.message === 'string' ? o.message : String(e);
    const code = typeof o.code === 'string' && !msg.includes(o.code) ? ` (${o.code})` : '';
    if (msg && !parts.includes(msg)) parts.push(`${msg}${code}`);
    e = o.cause;
  }
  return parts.join(': ') || String(err);
}

function overrideExits(c: Command): void {
  c.exitOverride();
  for (const sub of c.commands) overrideExits(sub);
}

/**
 * Runs a CLI program: a CliError ends the process with its message and exit code; a usage error
 * found by commander (unknown option, bad choice, missing argument) exits 2, --help 0; anything
 * else is a bug and throws (with its stack).
 */
export async function runProgram(program: Command, argv: string[] = process.argv): Promise<void> {
  overrideExits(program);
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CliError) {
      process.stderr.write(`lastseen: ${e.message}\n`);
      process.exit(e.exitCode);
    }
    // commander has already printed its message (and the help, where asked for).
    if (e instanceof CommanderError) process.exit(e.exitCode === 0 ? EXIT.ok : EXIT.usage);
    throw e;
  }
}
