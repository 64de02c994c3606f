// A second process for lock.test.ts and run-lock.test.ts. With two arguments (folder, holder):
// takes the node lock for the folder in argv[2] as holder argv[3], tells its parent (over the fork
// IPC channel) whether it got it, then idles until killed. With `daemonset POD SPEC` after them: a
// DaemonSet pod's agent (run-lock.ts): stands by with its standby sign raised until the lock is
// its own, tells its parent `{ held: true }`, then idles holding it until killed.
import { join } from 'node:path';
import pino from 'pino';
import { realTimers } from '../core/time.js';
import { NodeLock } from './lock.js';
import { holdNodeLock } from './run-lock.js';

const [dir, holder, role, pod, spec] = process.argv.slice(2) as [string, string, string?, string?, string?];
if (role === 'daemonset') {
  await holdNodeLock({
    stateDir: dir,
    holder,
    role: 'daemonset',
    pod: pod ?? holder,
    spec: spec ?? 'spec',
    timers: realTimers,
    log: pino({ level: 'silent' }),
  });
  process.send?.({ held: true, pid: process.pid });
} else {
  const lock = new NodeLock({ path: join(dir, 'agent.lock'), holder });
  const held = await lock.tryAcquire();
  process.send?.({ held, pid: process.pid });
}
setInterval(() => {}, 60_000); // stay alive: the lock is unref'd
