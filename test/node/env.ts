// Where the test-bed node lives: read from `scripts/node env`, the one place that decides it.
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const NODE_SCRIPT = join(REPO, 'scripts', 'node');

export interface TestbedEnv {
  dir: string;
  nodeName: string;
  binDir: string;
  apiserverPort: number;
  kubeconfig: string;
  kubectl: string;
}

export function testbedEnv(): TestbedEnv {
  const vars: Record<string, string> = {};
  for (const line of execFileSync(NODE_SCRIPT, ['env'], { encoding: 'utf8' }).split('\n')) {
    const m = line.match(/^export (\w+)=(.*)$/);
    if (m?.[1] && m[2] !== undefined) vars[m[1]] = m[2];
  }
  const need = (k: string): string => {
    const v = vars[k];
    if (!v) throw new Error(`scripts/node env did not print ${k}`);
    return v;
  };
  const cpBin = execFileSync(join(REPO, 'scripts', 'control-plane'), ['bin-dir'], { encoding: 'utf8' }).trim();
  return {
    dir: need('LASTSEEN_NODE_DIR'),
    nodeName: need('LASTSEEN_NODE_NAME'),
    binDir: need('LASTSEEN_NODE_BIN_DIR'),
    apiserverPort: Number(need('LASTSEEN_NODE_APISERVER_PORT')),
    kubeconfig: need('LASTSEEN_NODE_KUBECONFIG'),
    kubectl: join(cpBin, 'kubectl'),
  };
}
