// The ports the heartbeat loop owns: where beats go (a BeatWriter per channel) and where time comes
// from (a Clock). Adapters (lease.ts, annotation.ts, local.ts, all in src/channels/) implement BeatWriter;
// tests and the simulator supply their own Clock.
import type { Beat, Channel } from '../core/types.js';
import type { Clock as MonotonicClock } from '../core/time.js';

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

/** The heartbeat's clock: the shared monotonic clock (src/core/time.ts) plus wall time and sleep. */
export interface Clock extends MonotonicClock {
  /** Wall-clock milliseconds since the epoch: the renew time written into beats. */
  wallNow(): number;
  /** Resolve after `ms` (early, without error, when `signal` aborts). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const done = () => {
        clearTimeout(t);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener('abort', done, { once: true });
    }),
};
