import type { Command } from 'commander';

/** An error meant for the person at the terminal: a clear message, a stable code, an exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Runs a CLI program: a CliError ends the process with its message and exit code; anything else is a bug and throws. */
export async function runProgram(program: Command, argv: string[] = process.argv): Promise<void> {
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CliError) {
      process.stderr.write(`lastseen: ${e.message}\n`);
      process.exit(e.exitCode);
    }
    throw e;
  }
}
