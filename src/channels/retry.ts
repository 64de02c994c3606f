// Backoff between retries of one round of writes, shared by the api channels.
import { backoffMs as coreBackoffMs } from '../core/backoff.js';

/** First backoff after a failure; doubled per failure in the round. */
export const BASE_BACKOFF_MS = 50;
/** As the kubelet's lease controller (maxBackoff 7s); in practice a round's deadline ends retries sooner. */
export const MAX_BACKOFF_MS = 7_000;

/** Delay before the next try after the `failures`-th failure in a round: capped doubling, jittered to 50–150% so many writers do not retry in step. */
export function backoffMs(failures: number, random: () => number = Math.random): number {
  return coreBackoffMs(failures, { initialMs: BASE_BACKOFF_MS, maxMs: MAX_BACKOFF_MS }, random);
}
