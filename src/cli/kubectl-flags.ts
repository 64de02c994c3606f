// kubectl's own flags for `kubectl lastseen ...`. kubectl runs a plugin with the words after its
// name exactly as typed, so a user's habits reach lastseen verbatim: `--context NAME`,
// `--kubeconfig FILE`, `-n/--namespace NS` (with a space or `=`). The subcommands that talk to a
// cluster take them here, one definition for all.
import type { KubeConfig } from '@kubernetes/client-node';
import { type Command, Option } from 'commander';
import { CliError, EXIT } from './errors.js';

export interface KubectlFlags {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
}

/** Adds --context and -n/--namespace (and --kubeconfig, when the command has none) to `cmd`. */
export function addKubectlFlags(cmd: Command): Command {
  const has = (flag: string) => cmd.options.some((o) => o.long === flag);
  if (!has('--kubeconfig')) cmd.addOption(new Option('--kubeconfig <file>', 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)'));
  if (!has('--context')) cmd.addOption(new Option('--context <name>', "the kubeconfig context to use (default: the kubeconfig's current context)"));
  if (!has('--namespace')) cmd.addOption(new Option('-n, --namespace <ns>', 'only parents in this namespace'));
  return cmd;
}

/** Switches `kc` to the --context given; an unknown context is a usage error that lists the known ones. */
export function applyKubectlFlags(kc: KubeConfig, flags: KubectlFlags): KubeConfig {
  if (flags.context === undefined) return kc;
  const known = kc.getContexts().map((c) => c.name);
  if (!known.includes(flags.context)) {
    throw new CliError(
      `--context ${JSON.stringify(flags.context)}: no such context in the kubeconfig (it has: ${known.join(', ') || 'none'})`,
      'ECONTEXT',
      EXIT.usage,
    );
  }
  kc.setCurrentContext(flags.context);
  return kc;
}

/** With -n/--namespace, only the rows of parents in that namespace (kubectl's -n narrows a listing the same way). */
export function inNamespace<T extends { rows: readonly { namespace: string }[] }>(namespace: string | undefined, built: T): T {
  return namespace === undefined ? built : { ...built, rows: built.rows.filter((r) => r.namespace === namespace) };
}
