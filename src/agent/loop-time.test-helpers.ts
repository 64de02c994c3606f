// Fake timers for the agent loop's tests: `now` is a field (the loop reads it through its Clock),
// `advance` fires due timers in order and lets the promise chains they start settle.
import type { Timers } from './agent.js';

export class LoopTime implements Timers {
  now = 0;
  private q: Array<{ at: number; fn: () => void; id: number }> = [];
  private ids = 0;
  set(fn: () => void, ms: number) {
    const id = ++this.ids;
    this.q.push({ at: this.now + ms, fn, id });
    return id;
  }
  clear(h: unknown) {
    this.q = this.q.filter((t) => t.id !== h);
  }
  async advance(ms: number) {
    const end = this.now + ms;
    for (;;) {
      this.q.sort((a, b) => a.at - b.at);
      const t = this.q[0];
      if (!t || t.at > end) break;
      this.q.shift();
      this.now = t.at;
      t.fn();
      await flush();
    }
    this.now = end;
    await flush();
  }
}

/** Let resolved promise chains (actuator results fed back) run. */
export async function flush() {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}
