// `scripts/cluster up` calls this once the three kubelets run: `bootstrap` brings up the static
// control plane on the three nodes, then the self-hosted one with lastseen, as the tests do.
import { realCluster } from './cluster.js';

const cmd = process.argv[2];
if (cmd !== 'bootstrap') {
  console.error(`test/cluster/cli.ts: unknown command '${cmd ?? ''}' (expected: bootstrap)`);
  process.exit(2);
}
const c = realCluster();
await c.bootstrapStatic();
await c.selfHost();
