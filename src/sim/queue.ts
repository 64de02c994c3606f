// The virtual clock and its event queue. Events run in (time, insertion sequence) order, so two
// events at the same instant always run in the order they were scheduled: no hidden dependence on
// heap layout, and a seed replays a run exactly. Callbacks guard themselves against stale
// schedules (a rebooted node, a restarted process) with the generation tokens they captured.

/**
 * Resolves once every promise callback released so far has run, callbacks queued by callbacks
 * included. From inside a promise callback (hence the first await), a `process.nextTick` callback
 * runs only once V8 has emptied the microtask queue: Node runs its tick queue between microtask
 * checkpoints. A full drain without a turn of the event loop (setImmediate does the same at
 * several times the cost, which showed in the sweeps' wall time).
 */
export async function promiseCallbacksRun(): Promise<void> {
  await null;
  await new Promise<void>((r) => process.nextTick(r));
}

/** A scheduled event that can be called off (a cleared timer): it is then dropped unrun. */
export interface Scheduled {
  cancel(): void;
}

/** A class, not an object literal with a closure: millions are made per run. */
class Entry implements Scheduled {
  cancelled = false;
  constructor(
    readonly at: number,
    readonly seq: number,
    readonly run: () => void,
  ) {}

  cancel(): void {
    this.cancelled = true;
  }
}

export class EventQueue {
  /** Virtual time in ms since the start of the run. */
  now = 0;
  private seq = 0;
  private heap: Entry[] = [];
  /** Events run so far (for speed figures). */
  executed = 0;

  /** Run `fn` at `at` (clamped to now: the past cannot be scheduled). */
  at(at: number, fn: () => void): Scheduled {
    const e = new Entry(Math.max(at, this.now), this.seq++, fn);
    this.push(e);
    return e;
  }

  after(delayMs: number, fn: () => void): Scheduled {
    return this.at(this.now + Math.max(0, delayMs), fn);
  }

  get size(): number {
    return this.heap.length;
  }

  /**
   * Run events up to and including `until`. After every event, `settle` (when given) lets the
   * promise callbacks that event released run to completion before virtual time moves on: the
   * production agent carries out its actions with promises, and what an action's result feeds back
   * happens at the instant the action ends. `settle` returns null when nothing is pending, so a run
   * without promises pays nothing. Then `afterEach` runs; returning false stops the run (an
   * invariant failed).
   */
  async runUntil(until: number, afterEach: () => boolean, settle: () => Promise<void> | null = () => null): Promise<boolean> {
    while (this.heap.length > 0 && this.heap[0]!.at <= until) {
      const e = this.pop();
      if (e.cancelled) continue;
      this.now = e.at;
      e.run();
      this.executed++;
      const pending = settle();
      if (pending) await pending;
      if (!afterEach()) return false;
    }
    this.now = Math.max(this.now, until);
    return true;
  }

  /**
   * The binary heap's sifts move a hole instead of swapping pairs: the queue holds thousands of
   * events in a large cluster (a few per node), and every event is one push and one pop.
   */
  private push(e: Entry): void {
    const h = this.heap;
    let i = h.length;
    h.push(e);
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = h[p]!;
      if (parent.at < e.at || (parent.at === e.at && parent.seq < e.seq)) break;
      h[i] = parent;
      i = p;
    }
    h[i] = e;
  }

  private pop(): Entry {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    const n = h.length;
    if (n === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let m = l;
      let c = h[l]!;
      const r = l + 1;
      if (r < n) {
        const rc = h[r]!;
        if (rc.at < c.at || (rc.at === c.at && rc.seq < c.seq)) {
          m = r;
          c = rc;
        }
      }
      if (last.at < c.at || (last.at === c.at && last.seq < c.seq)) break;
      h[i] = c;
      i = m;
    }
    h[i] = last;
    return top;
  }
}
