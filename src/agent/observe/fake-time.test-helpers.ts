// A manual clock and timer queue for the observers' tests: time moves only when a test says so.
import type { Clock, Timers } from '../agent.js';

export class FakeTime implements Clock, Timers {
  t = 0;
  private q: Array<{ at: number; fn: () => void; id: number }> = [];
  private ids = 0;
  now(): number {
    return this.t;
  }
  set(fn: () => void, ms: number): number {
    const id = ++this.ids;
    this.q.push({ at: this.t + Math.max(0, ms), fn, id });
    return id;
  }
  clear(h: unknown): void {
    this.q = this.q.filter((x) => x.id !== h);
  }
  pending(): number {
    return this.q.length;
  }
  /** Runs every timer due within `ms`, in order, letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await flush();
    for (;;) {
      this.q.sort((a, b) => a.at - b.at || a.id - b.id);
      const x = this.q[0];
      if (!x || x.at > end) break;
      this.q.shift();
      this.t = x.at;
      x.fn();
      await flush();
    }
    this.t = end;
    await flush();
  }
}

/** Lets queued promise callbacks run (a few hops of async functions). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
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
