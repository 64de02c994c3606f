// Time as lastseen injects it: one declaration of the clock and timer ports, used by the agent,
// the informer, the simulator (simulated time) and the tests (fake time). Production code never
// reads the time or sets a timer any other way, so every schedule can be driven by a fake.

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
