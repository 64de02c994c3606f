// Seeded randomness. One root seed; every subsystem takes its own stream with `fork(name)`, so
// adding a random draw in one subsystem never shifts the draws of another, and a seed replays a
// run exactly. mulberry32: tiny, fast, good enough for fault schedules (not for cryptography).

/** FNV-1a over the name, mixed with the parent seed: stable stream ids across runs and versions. */
function mix(seed: number, name: string): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export class Rng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Uniform real in [lo, hi). */
  between(lo: number, hi: number): number {
    return lo + this.next() * (hi - lo);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('Rng.pick: no items');
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** An independent stream named after a subsystem. */
  fork(name: string): Rng {
    return new Rng(mix(this.seed, name));
  }
}
