// Per-node clocks. The simulator's virtual time is the one true time; each node sees it through
// its own clocks:
// - monotonic: starts at 0 when the node boots and runs at (1 + drift) of true speed. The agent
//   measures freshness with it, so drift stretches or shrinks its windows slightly, as in life.
// - wall: an arbitrary epoch plus skew (which a fault can step), also drifting. Heartbeats stamp
//   renewTime with it; the core must never compare those across nodes.

/** The wall-clock epoch of virtual time 0 (any fixed instant works; this one reads well). */
export const SIM_EPOCH_MS = Date.UTC(2026, 11, 2, 10, 0, 0);

export class NodeClock {
  /** Virtual time of the last boot. */
  bootAt = 0;

  constructor(
    /** Wall clock minus true time, in ms (positive: the node runs ahead). */
    public skewMs: number,
    /** Rate error in parts per million (positive: the node's clocks run fast). */
    readonly driftPpm: number,
  ) {}

  private get rate(): number {
    return 1 + this.driftPpm / 1e6;
  }

  /** The node's monotonic clock at true time `now`. */
  mono(now: number): number {
    return (now - this.bootAt) * this.rate;
  }

  /** True time at which the monotonic clock reads `mono` (to schedule the core's wake-ups). */
  trueAt(mono: number): number {
    return this.bootAt + mono / this.rate;
  }

  /** The node's wall clock at true time `now`. */
  wall(now: number): number {
    return SIM_EPOCH_MS + now * this.rate + this.skewMs;
  }
}
