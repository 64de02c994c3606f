// Time as lastseen injects it: one declaration of the clock and timer ports (`Time`: monotonic
// now, wall time, timers), one `sleep` and one periodic helper (`every`) over them, used by the
// agent, the informer, the heartbeat (src/channels/channel.ts's Clock is cut from it), the
// simulator (simulated time) and the tests (fake time). Production code never reads the time or
// sets a timer any other way, so every schedule can be driven by a fake.

export interface Clock {
  /** Monotonic milliseconds: deadlines and intervals, never compared with another machine's time. */
  now(): number;
}

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as NodeJS.Timeout),
};

export const monotonicClock: Clock = { now: () => Math.floor(performance.now()) };

/** The whole port: what a component that both measures and stamps time takes. */
export interface Time extends Clock, Timers {
  /** Wall-clock milliseconds since the epoch: only for what is written out (a beat's renewTime), never for deadlines. */
  wallNow(): number;
}

export const systemTime: Time = { now: monotonicClock.now, wallNow: () => Date.now(), set: realTimers.set, clear: realTimers.clear };

export interface Periodic {
  /** No further run starts; a run in progress finishes (await it through the returned promise). */
  stop(): Promise<void>;
}

/**
 * Run `fn` every `ms` (the next period counted from the end of the previous run, so runs never
 * overlap), optionally jittered to `ms * (1 ± jitter/2)` so many agents do not act in step. A run
 * that throws or rejects is reported to `onError` and the schedule goes on. The one helper for
 * periodic work, instead of hand-rolled timer chains.
 */
export function every(
  timers: Timers,
  ms: number,
  fn: () => unknown,
  o: { jitter?: number; random?: () => number; onError?: (e: unknown) => void } = {},
): Periodic {
  if (!(ms > 0)) throw new Error(`every: the period must be positive, got ${ms}`);
  let stopped = false;
  let handle: unknown = null;
  let running: Promise<void> = Promise.resolve();
  const delay = () => (o.jitter ? ms * (1 + o.jitter * ((o.random ?? Math.random)() - 0.5)) : ms);
  const schedule = () => {
    handle = timers.set(() => {
      handle = null;
      if (stopped) return;
      running = (async () => {
        try {
          await fn();
        } catch (e) {
          o.onError?.(e);
        }
      })().finally(() => {
        if (!stopped) schedule();
      });
    }, delay());
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      if (handle !== null) timers.clear(handle);
      handle = null;
      await running;
    },
  };
}

/**
 * Wait `ms` on `timers`; an aborted `signal` ends it at once by rejecting with the signal's reason
 * (an AbortError). The one sleep: a caller that treats an abort as "wake up" catches it.
 */
export function sleep(timers: Timers, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      timers.clear(handle);
      reject(signal!.reason);
    };
    const handle = timers.set(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
