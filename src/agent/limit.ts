// A bound on how many calls of an async function run at once; the others wait their turn in the
// order they were made. Nothing is dropped and nothing is reordered: a waiting call starts as soon
// as a running one settles (resolved or rejected).

/** `f` with at most `limit` calls in flight; later calls wait, first come first served. */
export function limitConcurrency<A extends unknown[], R>(limit: number, f: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  if (!Number.isInteger(limit) || limit < 1) throw new Error(`limitConcurrency: limit must be a positive integer, got ${limit}`);
  let running = 0;
  const waiting: Array<() => void> = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else running -= 1;
  };
  return async (...args: A): Promise<R> => {
    if (running < limit) running += 1;
    // The slot is handed over by release(): `running` stays counted for the waiter.
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await f(...args);
    } finally {
      release();
    }
  };
}
