// Where the test-bed node lives: read from `scripts/node env`, the one place that decides it.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
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
  /**
   * lastseen's release image as the node pulls it, `<registry>/lastseen@sha256:…` (scripts/node
   * writes it at `up`, when it pushes the image to the node's registry); read when asked, so a
   * TestbedEnv made before `up` names the image of the node that runs. Absent on a bed without a
   * registry (the cluster bed imports its own image): its manifests keep their own image name.
   */
  readonly lastseenImage?: string;
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
    get lastseenImage(): string {
      const file = join(need('LASTSEEN_NODE_DIR'), 'images', 'lastseen.ref');
      if (!existsSync(file)) throw new Error(`${file} is missing: lastseen's image is pushed to the node's registry by \`scripts/node up\` (or \`images\`)`);
      return readFileSync(file, 'utf8').trim();
    },
  };
}
