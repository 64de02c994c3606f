// The whole test bed's memory and CPU, sampled from /proc: every process in one of its network or
// mount namespaces (kubelets, containerds, shims, every container, haproxy). Memory is the sum of
// resident set sizes (pages shared between processes count once per process, so it errs high);
// CPU is the processes' user+system time between two samples (a process seen in both: same pid and
// start time, so a reused pid is not taken for the same process), in cores, over the time between
// the samples on the monotonic clock: a wall clock stepped between two samples, or a reused pid,
// can make a peak read far more cores than the machine has (133 was once recorded).
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';

const PAGE = 4096;
const HZ = 100;

export interface ResourcePeak {
  samples: number;
  peakRssMiB: number;
  medianRssMiB: number;
  peakCpuCores: number;
  meanCpuCores: number;
  /** The machine's 1-minute load average over the samples (everything on it, not only the bed). */
  peakLoad1: number;
  meanLoad1: number;
}

export class ResourceSampler {
  private readonly rss: number[] = [];
  private readonly cpu: number[] = [];
  private readonly load: number[] = [];
  private last: { t: number; ticks: Map<string, number> } | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly clusterDir: string) {}

  start(everyMs = 2000): void {
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  stop(): ResourcePeak {
    if (this.timer) clearInterval(this.timer);
    const sorted = this.rss.slice().sort((a, b) => a - b);
    const mib = (b: number) => Math.round(b / 1048576);
    return {
      samples: this.rss.length,
      peakRssMiB: mib(sorted[sorted.length - 1] ?? 0),
      medianRssMiB: mib(sorted[Math.floor(sorted.length / 2)] ?? 0),
      peakCpuCores: Math.round(Math.max(0, ...this.cpu) * 100) / 100,
      meanCpuCores: this.cpu.length ? Math.round((this.cpu.reduce((a, b) => a + b, 0) / this.cpu.length) * 100) / 100 : 0,
      peakLoad1: Math.round(Math.max(0, ...this.load) * 100) / 100,
      meanLoad1: this.load.length ? Math.round((this.load.reduce((a, b) => a + b, 0) / this.load.length) * 100) / 100 : 0,
    };
  }

  private inodes(): Set<string> {
    const dir = join(this.clusterDir, 'ns');
    const out = new Set<string>();
    try {
      for (const f of readdirSync(dir)) out.add(`[${statSync(join(dir, f)).ino}]`);
    } catch {
      // the test bed is down
    }
    return out;
  }

  private sample(): void {
    const ns = this.inodes();
    if (ns.size === 0) return;
    let rss = 0;
    const ticks = new Map<string, number>();
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const net = readlinkSync(`/proc/${d}/ns/net`);
        const mnt = readlinkSync(`/proc/${d}/ns/mnt`);
        if (![...ns].some((i) => net.endsWith(i) || mnt.endsWith(i))) continue;
        rss += Number(readFileSync(`/proc/${d}/statm`, 'utf8').split(' ')[1]) * PAGE;
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        // utime and stime (fields 14, 15), keyed by pid and start time (field 22).
        ticks.set(`${d}/${f[19]}`, Number(f[11]) + Number(f[12]));
      } catch {
        // gone meanwhile
      }
    }
    const t = performance.now();
    this.rss.push(rss);
    this.load.push(loadavg()[0] ?? 0);
    if (this.last) {
      let used = 0;
      for (const [pid, v] of ticks) {
        const before = this.last.ticks.get(pid);
        if (before !== undefined && v >= before) used += v - before;
      }
      this.cpu.push(used / HZ / ((t - this.last.t) / 1000));
    }
    this.last = { t, ticks };
  }
}
