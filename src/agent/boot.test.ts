import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BOOT_ID_FILE, checkBoot } from './boot.js';

const log = pino({ level: 'silent' });
const A = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
const B = '11111111-2222-3333-4444-555555555555';
let dir: string;
let kernel: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lastseen-boot-'));
  kernel = join(dir, 'kernel-boot-id');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('checkBoot', () => {
  it('first start ever: not a reboot, and the id is recorded', async () => {
    await writeFile(kernel, `${A}\n`);
    expect(await checkBoot(dir, log, kernel)).toEqual({ rebooted: false, bootId: A, previous: null });
    expect((await readFile(join(dir, BOOT_ID_FILE), 'utf8')).trim()).toBe(A);
  });

  it('a restart in the same boot is not a reboot; a new kernel id is, once', async () => {
    await writeFile(kernel, `${A}\n`);
    await checkBoot(dir, log, kernel);
    expect((await checkBoot(dir, log, kernel)).rebooted).toBe(false);
    await writeFile(kernel, `${B}\n`);
    expect(await checkBoot(dir, log, kernel)).toEqual({ rebooted: true, bootId: B, previous: A });
    expect((await checkBoot(dir, log, kernel)).rebooted).toBe(false);
  });

  it('no kernel id or a corrupt record: not a reboot (the usual grace applies)', async () => {
    expect((await checkBoot(dir, log, join(dir, 'missing'))).rebooted).toBe(false);
    await writeFile(kernel, `${B}\n`);
    await writeFile(join(dir, BOOT_ID_FILE), '\u0000garbage\n');
    expect(await checkBoot(dir, log, kernel)).toEqual({ rebooted: false, bootId: B, previous: null });
  });
});
