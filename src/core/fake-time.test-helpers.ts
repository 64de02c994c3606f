// The one fake time for every test: a manual monotonic clock, wall clock, timer queue and sleep
// (it is src/core/time.ts's Time, and satisfies the heartbeat's Clock). Time moves only
// when a test calls advance(); due timers and sleepers fire in order, and promise chains they
// start settle between them: by default only promise callbacks (`flush`: real I/O started by a
// timer is still in flight when advance returns), or with `{ io: true }` a few event-loop turns
// too (`settle`: local file and loopback I/O usually completes), for code that awaits real I/O
// between sleeps.
import { sleep, type Time } from './time.js';

export class FakeTime implements Time {
  private t = 0;
  private q: Array<{ at: number; fn: () => void; id: number }> = [];
  private ids = 0;

  private readonly wallStartMs: number;
  private readonly settle: () => Promise<void>;

  constructor(o: { wallStartMs?: number; io?: boolean } = {}) {
    this.wallStartMs = o.wallStartMs ?? Date.UTC(2026, 11, 2, 10, 0, 0);
    this.settle = o.io ? settle : flush;
  }

  now(): number {
    return this.t;
  }

  wallNow(): number {
    return this.wallStartMs + this.t;
  }

  set(fn: () => void, ms: number): number {
    const id = ++this.ids;
    this.q.push({ at: this.t + Math.max(0, ms), fn, id });
    return id;
  }

  clear(h: unknown): void {
    this.q = this.q.filter((x) => x.id !== h);
  }

  /** src/core/time.ts's sleep on this fake: after `ms` of fake time; an abort rejects with the signal's reason. */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleep(this, ms, signal);
  }

  /** Timers and sleepers waiting now. */
  pending(): number {
    return this.q.length;
  }

  /** Move time forward by `ms`, firing what falls due in order and letting promise chains settle. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await this.settle();
    for (;;) {
      this.q.sort((a, b) => a.at - b.at || a.id - b.id);
      const x = this.q[0];
      if (!x || x.at > end) break;
      this.q.shift();
      this.t = Math.max(this.t, x.at);
      x.fn();
      await this.settle();
    }
    this.t = end;
    await this.settle();
  }
}

/** Let resolved promise chains run (a few hops of async functions; no event-loop turn). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** Let every queued promise callback and ready I/O callback run (a few event-loop turns; no fake time passes). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}

/** A pino logger whose records land in `records` (assert on fields, not strings). */
export async function memoryLogger() {
  const { default: pino } = await import('pino');
  const records: Array<Record<string, unknown>> = [];
  const log = pino(
    { level: 'debug' },
    {
      write(s: string) {
        records.push(JSON.parse(s));
      },
    },
  );
  return { log, records };
}
