// The one back-off formula: capped doubling from `initialMs`, optionally jittered to 50-150% so
// many processes retrying the same thing do not retry in step. Used by the api channels' write
// rounds, the informer's list/watch restarts and the core's per-action retries.

export interface BackoffShape {
  initialMs: number;
  maxMs: number;
}

/** Delay after the `failures`-th failure in a row (1 for the first): min(max, initial * 2^(failures-1)), times 0.5 + random() when `random` is given. */
export function backoffMs(failures: number, shape: BackoffShape, random?: () => number): number {
  const base = Math.min(shape.maxMs, shape.initialMs * 2 ** Math.max(0, failures - 1));
  return random ? base * (0.5 + random()) : base;
}
