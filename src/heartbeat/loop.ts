// The heartbeat's main loop, over ports only (writers, probe, clock, logger), so tests run it on a
// fake clock and the wiring in heartbeat.ts stays a list of constructors.
//
// Every interval, on a fixed schedule (no drift): probe -> phase -> one sequence for the round ->
// hand the beat to every channel, the local file first (the api channels get the round once the
// file holds it, waiting half an interval at most). Each channel writes on its own: the round does
// not wait for the api writes, and a channel whose last write is still running (a hung api-server
// holds a Lease write for its whole deadline and more) skips the round instead of delaying it, so
// the local file keeps its interval whatever the api-server does. A failing channel never stops the others or the loop;
// it is logged with structured fields. A probe that overruns the interval skips the ticks it
// missed instead of firing them back to back. On stop: each channel, once its write in flight is
// done, gets one last beat with phase Stopping; then the writers are closed.
//
// runSidecar is the whole sidecar over its ports: this loop, and a parent's fence responder
// (fence.ts) asked at every round and whenever its files say a request came. The CLI's
// startHeartbeat (heartbeat.ts) gives it the real channels, probe, folder and process killer; the
// simulator gives it adapters over its model (src/sim/sidecar.ts).
import type { Logger } from 'pino';
import type { BeatWriter, Clock } from '../channels/channel.js';
import type { Beat, Phase } from '../core/types.js';
import { advance, type BeatCounter, choosePhase, type HeartbeatIdentity, nextBeat, type ProbeResult } from './beat.js';
import { type FenceDeps, FenceResponder } from './fence.js';

export interface LoopOptions {
  identity: HeartbeatIdentity;
  /** Beat interval (ms); a function is asked before every round (a re-read policy may change it). */
  intervalMs: number | (() => number);
  /** Called before every round, before the interval is read (e.g. to re-read the policy). Must not throw. */
  beforeRound?: () => void;
  writers: BeatWriter[];
  probe: () => Promise<ProbeResult>;
  clock: Clock;
  logger: Logger;
  /**
   * Told the phase of every round (Stopping on stop) right after the probe, before the writes: the
   * pod's own proof, whatever the channels then do with it (the ready file, ready-state.ts). Must
   * not throw; a throw is logged and the round goes on.
   */
  onPhase?: (round: { phase: Phase; probe: ProbeResult; wallMs: number; intervalMs: number }) => void;
}

export interface ChannelStats {
  /** Rounds this channel stored. */
  written: number;
  /** Rounds this channel gave up on. */
  failed: number;
  /** Failed rounds since the last stored one. */
  consecutiveFailures: number;
  /** Rounds this channel skipped because its previous write was still running. */
  skipped: number;
}

export interface Heartbeat {
  /** Write a last beat with phase Stopping to every channel, then release everything. Idempotent. */
  stop(): Promise<void>;
  /** Rounds written so far (each round is one sequence number, whatever its channels did). */
  beats(): number;
  /** Per-channel outcomes, for tests, metrics and the CLI's exit log. */
  stats(): Record<string, ChannelStats>;
}

export function runHeartbeatLoop(opts: LoopOptions): Heartbeat {
  const { identity, writers, clock, logger } = opts;
  const interval = typeof opts.intervalMs === 'function' ? opts.intervalMs : () => opts.intervalMs as number;
  let intervalMs = interval();
  let counter: BeatCounter = { sequence: 0 };
  let lastPhase: Phase | null = null;
  let lastWhy: string | null = null;
  /** The last probe that got an answer (a refusal or an error status is one) said Ready. */
  let lastAnsweredReady = false;
  let stopping = false;
  const wake = new AbortController();
  const stats: Record<string, ChannelStats> = {};
  for (const w of writers) stats[w.channel] = { written: 0, failed: 0, consecutiveFailures: 0, skipped: 0 };
  /** Each channel's write in flight (null: idle). */
  const busy = new Map<BeatWriter, Promise<void>>();

  /** Start one channel's write of this round's beat, unless its last one is still running. */
  function dispatch(w: BeatWriter, beat: Beat, deadline: number): Promise<void> {
    const s = stats[w.channel]!;
    const running = busy.get(w);
    if (running) {
      s.skipped++;
      if (s.skipped === 1 || s.skipped % 100 === 0)
        logger.warn(
          { channel: w.channel, sequence: beat.sequence, skipped: s.skipped },
          'heartbeat channel still writing an earlier beat; round skipped on it',
        );
      return running;
    }
    // async: a writer that throws synchronously still only fails its own channel.
    const p = (async () => w.write(beat, deadline))().then(
      () => {
        if (s.consecutiveFailures > 0)
          logger.info({ channel: w.channel, sequence: beat.sequence, failedRounds: s.consecutiveFailures }, 'heartbeat channel recovered');
        s.written++;
        s.consecutiveFailures = 0;
      },
      (e: unknown) => {
        s.failed++;
        s.consecutiveFailures++;
        const error = e instanceof Error ? e.message : String(e);
        logger.warn(
          { channel: w.channel, sequence: beat.sequence, phase: beat.phase, consecutiveFailures: s.consecutiveFailures, error },
          'heartbeat channel write failed',
        );
      },
    );
    const tracked = p.finally(() => {
      if (busy.get(w) === tracked) busy.delete(w);
    });
    busy.set(w, tracked);
    return tracked;
  }

  async function round(stop: boolean): Promise<void> {
    if (!stop) {
      try {
        opts.beforeRound?.();
      } catch (e) {
        logger.error({ error: (e as Error).message }, 'heartbeat pre-round hook failed');
      }
      intervalMs = interval();
    }
    const started = clock.now();
    const deadline = started + intervalMs;
    const probe: ProbeResult = stop ? { ok: true } : await opts.probe();
    const phase = choosePhase(probe, stop);
    // A new phase, or a Starting whose reason changed (which proof fails), is logged once.
    const why = probe.ok ? null : probe.error.replace(/\d+/g, '#');
    if (phase !== lastPhase || why !== lastWhy) {
      logger.info({ phase, previous: lastPhase, probeError: probe.ok ? undefined : probe.error }, 'heartbeat phase');
      lastPhase = phase;
      lastWhy = why;
    }
    counter = advance(counter);
    const wallMs = clock.wallNow();
    try {
      opts.onPhase?.({ phase, probe, wallMs, intervalMs });
    } catch (e) {
      logger.error({ error: (e as Error).message }, 'heartbeat phase hook failed');
    }
    const unprobed = probe.ok && probe.unprobed === true;
    const unanswered = !probe.ok && probe.unanswered === true;
    // Whether the process was Ready at its last answered probe: what tells a hang from a slow start
    // (Beat.afterReady), kept here because an agent that restarts mid-hang has no answered beat left.
    const afterReady = unanswered ? lastAnsweredReady : undefined;
    if (!stop && !unanswered) lastAnsweredReady = probe.ok;
    const starved = unanswered && !probe.ok && probe.starved === true;
    const beatOn = (w: BeatWriter) => nextBeat(counter, identity, w.channel, phase, wallMs, intervalMs, unprobed, unanswered, afterReady, starved);
    if (stop) {
      // The last beat goes to each channel once its write in flight is done, without waiting for the others.
      await Promise.all(
        writers.map(async (w) => {
          await busy.get(w);
          await dispatch(w, beatOn(w), clock.now() + intervalMs);
        }),
      );
      return;
    }
    // The node's file first: a round goes to the api channels once the local file holds it (or
    // after half an interval, or at once if the local write is still busy with an earlier round),
    // so a Lease or annotation round is never newer than the local file. A sidecar killed between
    // the two would otherwise leave a round that only the api-server has: queued in a frozen or
    // slow api-server, it surfaces after the local file showed the parent dead, newer than
    // anything counted, and reads as the parent alive again (src/core/beats.ts).
    const localFirst = writers.filter((w) => w.channel === 'local' && !busy.has(w));
    const rest = writers.filter((w) => !localFirst.includes(w));
    const written = localFirst.map((w) => dispatch(w, beatOn(w), deadline));
    if (written.length > 0 && rest.length > 0) {
      const bound = new AbortController();
      await Promise.race([Promise.allSettled(written), clock.sleep(intervalMs / 2, bound.signal).catch(() => undefined)]);
      bound.abort();
    }
    for (const w of rest) void dispatch(w, beatOn(w), deadline);
    const tookMs = clock.now() - started;
    if (tookMs > intervalMs) logger.warn({ sequence: counter.sequence, tookMs, intervalMs }, 'heartbeat round overran its interval');
  }

  const loop = (async () => {
    let next = clock.now();
    while (!stopping) {
      try {
        await round(false);
      } catch (e) {
        // Writers and probes report through results; reaching here is a bug, but the beat goes on.
        logger.error({ error: (e as Error).message }, 'heartbeat round failed unexpectedly');
      }
      next += intervalMs;
      const now = clock.now();
      if (next <= now) next += Math.ceil((now - next) / intervalMs) * intervalMs || intervalMs;
      // stop() wakes the loop: the aborted sleep rejects, and the loop ends.
      if (!stopping) await clock.sleep(next - now, wake.signal).catch(() => undefined);
    }
  })();

  let stopped: Promise<void> | null = null;
  return {
    beats: () => counter.sequence,
    stats: () => structuredClone(stats),
    stop() {
      stopped ??= (async () => {
        stopping = true;
        wake.abort();
        await loop;
        try {
          await round(true);
        } finally {
          for (const w of writers) w.close?.();
        }
        logger.info({ sequence: counter.sequence, stats }, 'heartbeat stopped');
      })();
      return stopped;
    },
  };
}

export interface SidecarOptions extends LoopOptions {
  /** A parent's fence responder's ports (its sidecar shares the heartbeat folder with the agent); null: this sidecar fences nothing. */
  fence: FenceDeps | null;
}

/** The heartbeat loop and, for a parent, its fence responder: what a sidecar runs. */
export function runSidecar(opts: SidecarOptions): Heartbeat {
  const { logger } = opts;
  const responder = opts.fence ? new FenceResponder(opts.fence) : null;
  const checkFence = (): void => {
    void responder
      ?.check()
      .then((r) => {
        if (r) logger[r.killed > 0 ? 'warn' : 'info']({ killed: r.killed, detail: r.detail, error: r.error }, 'fence request answered');
      })
      .catch((e: unknown) => logger.error({ error: (e as Error).message }, 'fence request could not be answered'));
  };
  const hb = runHeartbeatLoop({
    ...opts,
    beforeRound: () => {
      checkFence();
      opts.beforeRound?.();
    },
  });
  // A fence request is answered as soon as it is written, not only at the next round.
  const watcher =
    responder?.files.watchRequests(checkFence, (e) =>
      logger.warn({ error: e.message }, 'heartbeat folder not watched: fence requests are answered at each round'),
    ) ?? null;
  return {
    ...hb,
    stop: async () => {
      watcher?.close();
      await hb.stop();
    },
  };
}
