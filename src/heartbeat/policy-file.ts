// The heartbeat's copy of the policy file, re-read while it runs.
//
// A heartbeat must never stop beating because of policy: a typo in one namespace's copy of the
// policy would otherwise crash-loop every sidecar there on its next restart (for instance after
// the very reboot lastseen exists for). So a file that is missing, unreadable or invalid is logged
// as an error naming the file and the field paths, and the heartbeat goes on with the last good
// policy it read, or the built-in defaults when it never read one. The file is read again every
// POLICY_RELOAD_MS, so a fixed (or changed) file reaches a running heartbeat without a restart.
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { defaultPolicy, type Policy, parsePolicyText } from '../policy/policy.js';

/** How often a running heartbeat re-reads its policy file. A stat-less read of a small file: cheap. */
export const POLICY_RELOAD_MS = 5_000;
/** Longest problem text put where people look (a Lease annotation): the log has the rest. */
export const MAX_PROBLEM_CHARS = 250;

/** Where the policy in force came from. */
export type PolicyOrigin = 'file' | 'last-good' | 'defaults';

export interface PolicyState {
  doc: Policy;
  origin: PolicyOrigin;
  /** Why the file was not used, short enough for an annotation; null when it was. */
  problem: string | null;
}

export class PolicyFile {
  private lastGood: Policy | null = null;
  private lastText: string | null = null;
  private lastGoodText: string | null = null;
  private state: PolicyState;

  constructor(
    private readonly file: string | undefined,
    private readonly logger: Logger,
    private readonly read: (file: string) => string = (f) => readFileSync(f, 'utf8'),
  ) {
    this.state = { doc: defaultPolicy(), origin: 'defaults', problem: null };
    this.reload();
  }

  current(): PolicyState {
    return this.state;
  }

  /** Read the file again. Returns true when the policy in force changed (a failed read never changes it). Never throws. */
  reload(): boolean {
    if (!this.file) return false;
    const file = this.file;
    let text: string;
    try {
      text = this.read(file);
    } catch (e) {
      return this.fail(`cannot read ${file}: ${(e as Error).message}`, [], file);
    }
    // Unchanged text: nothing to parse, nothing to log again.
    if (text === this.lastText && this.state.problem === null) return false;
    const r = parsePolicyText(text);
    if (!r.ok) {
      const detail = r.errors.map((e) => `${e.path}: ${e.message}`);
      return this.fail(`invalid policy ${file}: ${detail.join('; ')}`, r.errors, file);
    }
    const previous = this.state;
    const changed = text !== this.lastGoodText;
    this.lastText = text;
    this.lastGoodText = text;
    this.lastGood = r.policy;
    this.state = changed ? { doc: r.policy, origin: 'file', problem: null } : { ...previous, origin: 'file', problem: null };
    if (previous.problem !== null) this.logger.info({ file }, 'policy file valid again: using it');
    return changed;
  }

  private fail(problem: string, errors: Array<{ path: string; message: string }>, file: string): boolean {
    const previous = this.state;
    const origin: PolicyOrigin = this.lastGood ? 'last-good' : 'defaults';
    const short = problem.length > MAX_PROBLEM_CHARS ? `${problem.slice(0, MAX_PROBLEM_CHARS - 1)}…` : problem;
    // Without a last good policy, the one in force is already the built-in defaults.
    this.state = { doc: this.lastGood ?? previous.doc, origin, problem: short };
    this.lastText = null;
    // Loud once per distinct problem, not every reload: the Lease annotation keeps it visible.
    if (previous.problem !== short) {
      this.logger.error(
        { file, errors, using: origin === 'last-good' ? 'the last good policy read from this file' : 'the built-in defaults' },
        `${problem}; still beating with ${origin === 'last-good' ? 'the last good policy' : 'the built-in defaults'} (the file is re-read every ${POLICY_RELOAD_MS / 1000}s)`,
      );
    }
    return false;
  }
}
