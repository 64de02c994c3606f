/**
 * vitest globalSetup of the node project: the real-node binaries, built once.
 *
 * Runs `scripts/node ensure` (kubelet, kube-scheduler, kube-controller-manager and pause from the Go
 * module proxy, containerd and runc from Debian's packages; minutes when cold, instant when cached)
 * and fails the run, saying what is missing, when that cannot be done: the real-node tests never
 * skip. The node itself is started and stopped by the tests (test/node/testbed.ts); the teardown
 * runs `scripts/node down` once more so a failed test leaves no kubelet behind.
 */
import { spawnSync } from 'node:child_process';
import { NODE_SCRIPT } from './env.js';

export default function setup(): () => void {
  if (process.getuid?.() !== 0) {
    throw new Error(
      'the node project needs root (its kubelet mounts volumes, makes cgroups and sets sysctls); run `npm test` as root, or `npm run test:unit` / `vitest run --project integration` without it',
    );
  }
  const r = spawnSync(NODE_SCRIPT, ['ensure'], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 30 * 60_000 });
  if (r.status !== 0)
    throw new Error(
      `scripts/node ensure failed (exit ${r.status}): it needs Go (https://go.dev/dl) and, as root, apt-get for containerd, runc and nftables; see its output above`,
    );
  return () => {
    spawnSync(NODE_SCRIPT, ['down'], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 120_000 });
  };
}
