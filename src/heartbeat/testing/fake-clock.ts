// A manual clock for tests: time moves only when the test says so.
import type { Clock } from '../channel.js';

export class FakeClock implements Clock {
  private t = 0;
  private sleepers: Array<{ at: number; resolve: () => void }> = [];

  constructor(private readonly wallStartMs = Date.UTC(2026, 11, 2, 10, 0, 0)) {}

  now(): number {
    return this.t;
  }

  wallNow(): number {
    return this.wallStartMs + this.t;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const s = { at: this.t + Math.max(0, ms), resolve };
      this.sleepers.push(s);
      signal?.addEventListener('abort', () => {
        this.sleepers = this.sleepers.filter((x) => x !== s);
        resolve();
      });
    });
  }

  /** Sleepers waiting now. */
  pending(): number {
    return this.sleepers.length;
  }

  /** Move time forward by `ms`, waking sleepers in order and letting promise chains settle between. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await settle();
      const due = this.sleepers.filter((s) => s.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.t = Math.max(this.t, due.at);
      this.sleepers = this.sleepers.filter((s) => s !== due);
      due.resolve();
    }
    this.t = end;
    await settle();
  }
}

/** Let every queued promise callback run (a few macrotask turns; no time passes). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}
