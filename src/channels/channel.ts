// The ports the heartbeat loop owns: where beats go (a BeatWriter per channel) and where time comes
// from (a Clock). Adapters (lease.ts, annotation.ts, local.ts, all in src/channels/) implement BeatWriter;
// tests and the simulator supply their own Clock (clockOf over their Time).

import { type Clock as MonotonicClock, sleep, systemTime, type Time } from '../core/time.js';
import type { Beat, Channel } from '../core/types.js';

export interface BeatWriter {
  readonly channel: Channel;
  /**
   * Store one beat. Resolves when stored; rejects when the channel gave up for this round, with a
   * message that names the object. Retries end by `deadline` (Clock.now() milliseconds): the
   * next round brings a newer beat anyway.
   */
  write(beat: Beat, deadline: number): Promise<void>;
  /** Release connections and handles. */
  close?(): void;
}

/**
 * The heartbeat's clock, cut from the one time port (src/core/time.ts): monotonic and wall time,
 * and its `sleep` (an abort rejects with the signal's reason).
 */
export interface Clock extends MonotonicClock {
  /** Wall-clock milliseconds since the epoch: the renew time written into beats. */
  wallNow(): number;
  /** Resolve after `ms`; when `signal` aborts, reject at once with its reason. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** A heartbeat clock over a Time (the system's, the simulator's, a fake). */
export function clockOf(t: Time): Clock {
  return { now: () => t.now(), wallNow: () => t.wallNow(), sleep: (ms, signal) => sleep(t, Math.max(0, ms), signal) };
}

export const systemClock: Clock = clockOf(systemTime);
