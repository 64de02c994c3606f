// Seeing things happen as early as possible: a file appearing or disappearing (inotify through
// fs.watch, plus a 10 ms stat poll as a fallback), and beats being written on each channel (our
// own scoped watch on the Lease or the pod, or the local heartbeat file changing).
import { existsSync, type FSWatcher, watch } from 'node:fs';
import { join } from 'node:path';
import type { KubeConfig, V1Lease, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { type Informer, makeInformer } from '../../src/kube/informer.js';

export class PathWatch {
  private exists: boolean;
  private readonly watcher: FSWatcher;
  private readonly poll: NodeJS.Timeout;
  private waiters: Array<{ want: boolean; resolve: (t: number) => void }> = [];
  readonly path: string;

  constructor(dir: string, name: string) {
    this.path = join(dir, name);
    this.exists = existsSync(this.path);
    this.watcher = watch(dir, () => this.check());
    this.poll = setInterval(() => this.check(), 10);
  }

  private check(): void {
    const now = Date.now();
    const e = existsSync(this.path);
    if (e === this.exists) return;
    this.exists = e;
    const done = this.waiters.filter((w) => w.want === e);
    this.waiters = this.waiters.filter((w) => w.want !== e);
    for (const w of done) w.resolve(now);
  }

  /** Resolves with the wall time the path was first seen in the wanted state (now, if it already is). */
  wait(want: boolean, timeoutMs: number): Promise<number> {
    this.check();
    if (this.exists === want) return Promise.resolve(Date.now());
    return new Promise((resolve, reject) => {
      const w = {
        want,
        resolve: (t: number) => {
          clearTimeout(timer);
          resolve(t);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`${this.path} did not ${want ? 'appear' : 'disappear'} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  close(): void {
    this.watcher.close();
    clearInterval(this.poll);
  }
}

export type Channel = 'lease' | 'annotation' | 'local';

/** Emits the wall time of every beat written to one parent's channel, as seen from outside the agent. */
export class BeatWatch {
  private listeners = new Set<(t: number) => void>();
  private informer: Informer<V1Lease> | Informer<V1Pod> | null = null;
  private fsw: FSWatcher | null = null;
  private lastT = 0;
  beats = 0;

  constructor(o: { channel: Channel; kc: KubeConfig; node: string; namespace: string; key: string; heartbeatDir: string }) {
    const log = pino({ level: 'silent' });
    const clock = { now: () => Math.floor(performance.now()) };
    const timers = { set: (fn: () => void, ms: number) => setTimeout(fn, ms), clear: (h: unknown) => clearTimeout(h as NodeJS.Timeout) };
    if (o.channel === 'lease') {
      this.informer = makeInformer<V1Lease>({
        name: 'bench leases',
        kubeConfig: o.kc,
        path: `/apis/coordination.k8s.io/v1/namespaces/${o.namespace}/leases`,
        labelSelector: `lastseen.dev/node=${o.node}`,
        log,
        clock,
        timers,
        onAdd: () => this.emit(),
        onUpdate: () => this.emit(),
      });
    } else if (o.channel === 'annotation') {
      let last: string | undefined;
      const seen = (p: V1Pod) => {
        const v = p.metadata?.annotations?.['lastseen.dev/last-seen'];
        if (v !== undefined && v !== last) {
          last = v;
          this.emit();
        }
      };
      this.informer = makeInformer<V1Pod>({
        name: 'bench pods',
        kubeConfig: o.kc,
        path: `/api/v1/namespaces/${o.namespace}/pods`,
        fieldSelector: `spec.nodeName=${o.node}`,
        log,
        clock,
        timers,
        onAdd: seen,
        onUpdate: seen,
      });
    } else {
      const file = `${o.namespace}_${o.key}.json`;
      // One atomic write (temp file, rename) raises several events; 30 ms apart counts as one beat.
      this.fsw = watch(o.heartbeatDir, (_e, name) => {
        if (name !== file) return;
        if (Date.now() - this.lastT < 30) return;
        this.emit();
      });
    }
    this.informer?.start();
  }

  private emit(): void {
    const t = Date.now();
    this.lastT = t;
    this.beats++;
    for (const fn of [...this.listeners]) fn(t);
  }

  /** The next beat at or after now. */
  next(timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const fn = (t: number) => {
        this.listeners.delete(fn);
        clearTimeout(timer);
        resolve(t);
      };
      const timer = setTimeout(() => {
        this.listeners.delete(fn);
        reject(new Error(`no beat within ${timeoutMs} ms`));
      }, timeoutMs);
      this.listeners.add(fn);
    });
  }

  /** Run `fn` synchronously on the next beat (so a kill lands right after it). */
  onNext(fn: (t: number) => void): void {
    const once = (t: number) => {
      this.listeners.delete(once);
      fn(t);
    };
    this.listeners.add(once);
  }

  async close(): Promise<void> {
    this.fsw?.close();
    await this.informer?.stop();
  }
}
