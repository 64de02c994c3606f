// A second process for lock.test.ts: takes the node lock for the folder in argv[2] as holder
// argv[3], tells its parent (over the fork IPC channel) whether it got it, then idles until killed.
import { join } from 'node:path';
import { NodeLock } from './lock.js';

const [dir, holder] = process.argv.slice(2) as [string, string];
const lock = new NodeLock({ path: join(dir, 'agent.lock'), holder });
const held = await lock.tryAcquire();
process.send?.({ held, pid: process.pid });
setInterval(() => {}, 60_000); // stay alive: the lock is unref'd
