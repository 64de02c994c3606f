// Reboot detection: the kernel's boot id (a random UUID per boot) compared with the one the agent
// recorded in its state folder the last time it started. A changed id means every process of the
// last boot is gone, parents included, and their beats prove nothing (docs/architecture.md).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { writeFileAtomic } from '../checkpoint/atomic.js';

export const KERNEL_BOOT_ID = '/proc/sys/kernel/random/boot_id';
export const BOOT_ID_FILE = 'boot-id';

export interface BootCheck {
  /** True only when a recorded id exists and differs: a first start ever is not a reboot. */
  rebooted: boolean;
  bootId: string | null;
  previous: string | null;
}

const readId = async (path: string): Promise<string | null> => {
  try {
    const id = (await readFile(path, 'utf8')).trim();
    return /^[0-9a-f-]{8,64}$/i.test(id) ? id : null;
  } catch {
    return null;
  }
};

/**
 * The rule, apart from where the ids live (the simulator keeps them on its model disk): a reboot
 * only when an id was recorded and this boot's differs. A first start ever, or no id for this
 * boot, is not a reboot.
 */
export function isReboot<Id>(bootId: Id | null | undefined, previous: Id | null | undefined): boolean {
  return bootId !== null && bootId !== undefined && previous !== null && previous !== undefined && bootId !== previous;
}

/**
 * Read this boot's id, compare it with the recorded one, record this one. Never throws: without a
 * kernel id (not Linux, a locked-down /proc) or with a corrupt record the answer is "not rebooted",
 * which only means the usual startupGrace applies.
 */
export async function checkBoot(stateDir: string, log: Logger, kernelPath = KERNEL_BOOT_ID): Promise<BootCheck> {
  const bootId = await readId(kernelPath);
  const previous = await readId(join(stateDir, BOOT_ID_FILE));
  const rebooted = isReboot(bootId, previous);
  if (bootId === null) log.warn({ path: kernelPath }, 'no kernel boot id: reboots cannot be told from agent restarts; the usual startupGrace applies');
  else if (bootId !== previous) {
    try {
      await writeFileAtomic(join(stateDir, BOOT_ID_FILE), new TextEncoder().encode(`${bootId}\n`), { mode: 0o644 });
    } catch (e) {
      log.warn({ err: (e as Error).message }, 'could not record the boot id');
    }
  }
  return { rebooted, bootId, previous };
}
