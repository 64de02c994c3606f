// A small list+watch informer over the api-server, scoped by selectors, that does not go blind.
//
// Promises:
// - Scoped: every list and watch carries the label and/or field selector given (the constructor
//   refuses an unscoped informer: the agent keeps no cluster-wide caches).
// - Complete: after each (re)list the cache is diffed against the list, so objects created,
//   changed, re-created (new uid) or deleted while the watch was down produce onAdd / onUpdate /
//   onDelete (+onAdd) before `onSynced()`. Watch events are applied in order after that.
// - Never stuck: any error (list, watch connect, HTTP status, stream break, ERROR event) restarts
//   after a capped, jittered exponential backoff, resuming from the last resourceVersion seen (as
//   client-go's reflector); 410 Gone relists at once; a watch that is silent (no event, bookmark
//   included) for `watchdogMs` is aborted and re-opened at once (silence alone is not a failure:
//   if the path is really broken, the re-open's headers miss `requestTimeoutMs`, which is). Lists
//   are bounded by `requestTimeoutMs` too.
// - Never throws into the caller: bad lines and objects are logged and skipped; a throwing
//   callback is logged; callbacks never run after `stop()` resolves.
//
// Assumes: the api-server sends a bookmark roughly every minute to a watch that asked for them
// (allowWatchBookmarks; true of the watch cache since 1.17, "roughly every minute" in cacher.go),
// so a silence much longer than that means the connection, not the cluster, went quiet.
//
// Why not client-node's makeInformer/ListWatch (read in 1.4; 2.0's makeInformer still takes a
// label selector only): it has no field selector in makeInformer, no bookmarks, no restart after
// an error (it only calls ERROR handlers), no "synced" signal, and its Watch.watch awaits the
// response before it hands back the AbortController, so a connection that stalls before the
// headers cannot even be aborted. Its Watch also overwrites its own 30 s timeout signal. Here each
// request is a plain node https request with the KubeConfig's TLS material and auth
// (applyToHTTPSOptions, so exec plugins, tokens and proxies still work) and our own AbortSignal.
// Each request gets its own agent (applyToHTTPSOptions builds one; not keep-alive), so a re-opened
// watch never reuses a socket that the stall left behind.
import type { KubeConfig, V1ObjectMeta } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { backoffMs } from '../core/backoff.js';
import type { Clock, Timers } from '../core/time.js';
import { classifyKubeError } from './errors.js';
import { kubeGet, queryString, readBody } from './http.js';

/**
 * Silence after which a watch is presumed stalled. The api-server bookmarks about every 60 s;
 * 90 s is that plus room for a busy api-server, and still well under the policy's default
 * startup grace, so a node is never blind for longer than a parent's grace.
 */
export const WATCHDOG_MS = 90_000;
/** A list, or a watch's response headers, must arrive within this. Scoped lists are small; 10 s is generous on a loaded api-server. */
export const REQUEST_TIMEOUT_MS = 10_000;
/** First delay after a failure (client-go's reflector uses 800 ms). */
export const INITIAL_BACKOFF_MS = 800;
/**
 * Longest delay between attempts. client-go's reflector uses 30 s; a node agent watches a few tiny
 * scoped collections and exists for the moment a self-hosted api-server comes back, so it retries
 * sooner. Jitter keeps a thousand agents from arriving in step.
 */
export const MAX_BACKOFF_MS = 10_000;
/**
 * Server-side watch timeout, chosen at random in this range for each watch (as client-go does, 5–10 min) so that
 * thousands of agents do not re-open their watches at the same moment.
 */
export const WATCH_TIMEOUT_RANGE_S = [300, 600] as const;
/** Page size of lists; a node's pods or Leases fit in one page, bigger scopes still list safely. */
export const LIST_PAGE_LIMIT = 500;
/** One watch line (one object) larger than this is not ours to hold in memory; restart instead. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** A watch that closes cleanly sooner than this, having delivered nothing, counts as a failure (no tight reconnect loop). */
export const MIN_CLEAN_WATCH_MS = 1_000;

export type { Clock, Timers } from '../core/time.js';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
}

export interface InformerCallbacks<T extends KubeObject> {
  onAdd?(obj: T): void;
  /** `old` is the cached version the update replaces. */
  onUpdate?(obj: T, old: T): void;
  /** The last known version of the object. */
  onDelete?(obj: T): void;
  /** After each successful (re)list, once every difference from the list has been delivered. */
  onSynced?(): void;
  /** On every change of health: true once a watch is open after a sync, false on any failure. */
  onHealth?(ok: boolean, reason: string): void;
}

export interface InformerOptions<T extends KubeObject> extends InformerCallbacks<T> {
  /** What this informer watches, for logs, e.g. `leases of node-1`. */
  name: string;
  kubeConfig: KubeConfig;
  /** Collection path: `/api/v1/pods`, `/apis/coordination.k8s.io/v1/leases`, `/api/v1/namespaces/ns/configmaps`. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  log: Logger;
  clock: Clock;
  timers: Timers;
  /** Default WATCHDOG_MS. */
  watchdogMs?: number;
  /** Default REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  /** Default INITIAL_BACKOFF_MS / MAX_BACKOFF_MS. */
  backoff?: { initialMs: number; maxMs: number };
  /** In [0, 1); default Math.random. */
  random?: () => number;
  /** Replaces HTTP (tests). */
  transport?: InformerTransport;
  /**
   * After a failed list or watch, list again instead of resuming the watch from the last
   * resourceVersion. For caches whose absence of an object is acted on (the agent collects a
   * checkpoint when no pod is scheduled): the first word after an outage is a fresh list, never a
   * watch resumed over it. Default false (resume, as client-go's reflector does).
   */
  relistAfterFailure?: boolean;
}

export interface Informer<T extends KubeObject> {
  /** Begin listing and watching. Idempotent. */
  start(): void;
  /** Abort the watch and wait for the loop to end; no callback runs after this resolves. */
  stop(): Promise<void>;
  /** True once the first list has been delivered (stays true, as client-go's HasSynced; see isHealthy). */
  isSynced(): boolean;
  /** True while a watch is open after a sync. */
  isHealthy(): boolean;
  /**
   * List afresh now: the open watch (or a back-off wait) ends and the next turn lists; `onSynced`
   * follows once the list is delivered. For "is this cache current?" moments, e.g. the api-server
   * just came back and a watch opened before the outage may be dead without knowing it.
   */
  resync(): void;
  /** The cached objects. */
  list(): T[];
  get(namespace: string | undefined, name: string): T | undefined;
}

/** The two requests an informer makes. The default one speaks HTTPS to the KubeConfig's server. */
export interface InformerTransport {
  /** GET path?query; resolves with the parsed JSON body of a 200, rejects otherwise (with `statusCode` when the server answered). */
  getJson(path: string, query: Record<string, string>, signal: AbortSignal): Promise<unknown>;
  /**
   * GET path?query as a stream: resolves when the response headers of a 200 arrive, then calls
   * `onLine` per line; `done` resolves when the server ends the stream, rejects when it breaks.
   */
  stream(path: string, query: Record<string, string>, signal: AbortSignal, onLine: (line: string) => void): Promise<{ done: Promise<void> }>;
}

/** An error the api-server answered with; `classifyKubeError` understands it. */
export class HttpStatusError extends Error {
  constructor(
    readonly statusCode: number,
    readonly body: string,
    what: string,
  ) {
    super(`${what}: HTTP ${statusCode}`);
  }
}

const keyOf = (o: KubeObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

export function makeInformer<T extends KubeObject>(opts: InformerOptions<T>): Informer<T> {
  return new ListWatchInformer<T>(opts);
}

class ListWatchInformer<T extends KubeObject> implements Informer<T> {
  private readonly watchdogMs: number;
  private readonly requestTimeoutMs: number;
  private readonly backoff: { initialMs: number; maxMs: number };
  private readonly random: () => number;
  private readonly transport: InformerTransport;
  private readonly log: Logger;
  private cache = new Map<string, T>();
  private resourceVersion = '';
  private synced = false;
  private healthy: boolean | null = null;
  private stopped = false;
  private readonly stopAc = new AbortController();
  private loop: Promise<void> | null = null;
  /** Ends the open watch with 'resync' (null: none open). */
  private endWatch: (() => void) | null = null;
  /** Wakes a back-off wait (null: not waiting). */
  private wakeSleep: (() => void) | null = null;

  constructor(private readonly o: InformerOptions<T>) {
    if (!o.labelSelector && !o.fieldSelector) throw new Error(`informer ${o.name}: a label or field selector is required (no unscoped watches)`);
    if (!o.path.startsWith('/')) throw new Error(`informer ${o.name}: path must start with /, got ${o.path}`);
    this.watchdogMs = o.watchdogMs ?? WATCHDOG_MS;
    this.requestTimeoutMs = o.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    this.backoff = o.backoff ?? { initialMs: INITIAL_BACKOFF_MS, maxMs: MAX_BACKOFF_MS };
    if (!(this.watchdogMs > 0) || !(this.requestTimeoutMs > 0)) throw new Error(`informer ${o.name}: watchdogMs and requestTimeoutMs must be positive`);
    if (!(this.backoff.initialMs > 0) || this.backoff.maxMs < this.backoff.initialMs)
      throw new Error(`informer ${o.name}: backoff needs 0 < initialMs <= maxMs`);
    this.random = o.random ?? Math.random;
    this.transport = o.transport ?? httpsTransport(o.kubeConfig);
    this.log = o.log.child({ informer: o.name });
  }

  start(): void {
    if (this.loop || this.stopped) return;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopAc.abort();
    await this.loop;
  }

  isSynced(): boolean {
    return this.synced;
  }

  resync(): void {
    if (this.stopped) return;
    this.resourceVersion = '';
    this.endWatch?.();
    this.wakeSleep?.();
  }

  isHealthy(): boolean {
    return this.healthy === true;
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.cache.get(`${namespace ?? ''}/${name}`);
  }

  // ---- the loop ----

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        if (this.resourceVersion === '') await this.relist();
        if (this.stopped) break;
        const end = await this.watchOnce();
        if (end.kind === 'gone') {
          this.log.info({ resourceVersion: this.resourceVersion }, 'watch resource version expired (410); relisting');
          this.resourceVersion = '';
          failures = 0;
        } else if (end.kind === 'resync') {
          this.log.info('relisting on request');
          this.resourceVersion = '';
          failures = 0;
        } else if (end.kind === 'silent') {
          // Not yet a failure: re-open at once. If the path is really broken the next connect times out.
          this.log.warn({ silentMs: end.silentMs, watchdogMs: this.watchdogMs }, 'watch silent past the watchdog; re-opening');
          failures = 0;
        } else if (end.kind === 'failed') {
          throw end.error;
        } else {
          failures = 0;
        }
      } catch (err) {
        if (this.stopped) break;
        failures++;
        const e = classifyKubeError(err, this.o.name);
        if (e.kind === 'gone') {
          this.resourceVersion = '';
          failures = 0;
          continue;
        }
        const delayMs = Math.round(backoffMs(failures, this.backoff, this.random));
        if (this.o.relistAfterFailure) this.resourceVersion = '';
        this.setHealth(false, e.message);
        this.log.warn({ kind: e.kind, status: e.status, reason: e.reason, failures, retryInMs: delayMs }, 'list/watch failed; will retry');
        await this.sleep(delayMs);
      }
    }
    this.setHealth(false, 'stopped');
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.stopAc.signal.aborted) return resolve();
      const done = () => {
        this.wakeSleep = null;
        this.o.timers.clear(h);
        this.stopAc.signal.removeEventListener('abort', done);
        resolve();
      };
      const h = this.o.timers.set(done, ms);
      this.stopAc.signal.addEventListener('abort', done, { once: true });
      this.wakeSleep = done;
    });
  }

  private selectors(): Record<string, string> {
    const q: Record<string, string> = {};
    if (this.o.labelSelector) q.labelSelector = this.o.labelSelector;
    if (this.o.fieldSelector) q.fieldSelector = this.o.fieldSelector;
    return q;
  }

  /** A signal that aborts on stop() or after `ms`. */
  private deadline(ms: number): { signal: AbortSignal; cancel(): void } {
    const ac = new AbortController();
    const onStop = () => ac.abort(new Error('stopped'));
    this.stopAc.signal.addEventListener('abort', onStop, { once: true });
    const h = this.o.timers.set(() => ac.abort(Object.assign(new Error(`${this.o.name}: request timed out after ${ms} ms`), { name: 'TimeoutError' })), ms);
    return {
      signal: ac.signal,
      cancel: () => {
        this.o.timers.clear(h);
        this.stopAc.signal.removeEventListener('abort', onStop);
      },
    };
  }

  /**
   * Lists every page (a consistent read: no resourceVersion, so a relist after an outage sees
   * etcd, not a stale cache) and delivers the differences from the cache.
   */
  private async relist(): Promise<void> {
    const items: T[] = [];
    let cont = '';
    let rv = '';
    do {
      const q: Record<string, string> = { ...this.selectors(), limit: String(LIST_PAGE_LIMIT) };
      if (cont) q.continue = cont;
      const d = this.deadline(this.requestTimeoutMs);
      let body: unknown;
      try {
        body = await this.transport.getJson(this.o.path, q, d.signal);
      } finally {
        d.cancel();
      }
      const page = body as { items?: unknown; metadata?: { resourceVersion?: string; continue?: string } } | null;
      if (!page || !Array.isArray(page.items)) throw new Error(`${this.o.name}: list answer has no items array`);
      for (const it of page.items as T[]) {
        if (it?.metadata?.name) items.push(it);
        else this.log.warn({ item: JSON.stringify(it)?.slice(0, 200) }, 'listed object has no metadata.name; skipped');
      }
      rv = page.metadata?.resourceVersion ?? '';
      cont = page.metadata?.continue ?? '';
    } while (cont && !this.stopped);
    if (this.stopped) return;

    const next = new Map(items.map((i) => [keyOf(i), i] as const));
    const old = this.cache;
    this.cache = next;
    let added = 0;
    let updated = 0;
    let deleted = 0;
    for (const [k, prev] of old) {
      const now = next.get(k);
      if (!now || (prev.metadata?.uid && now.metadata?.uid && prev.metadata.uid !== now.metadata.uid)) {
        deleted++;
        this.call('onDelete', () => this.o.onDelete?.(prev));
      }
    }
    for (const [k, obj] of next) {
      const prev = old.get(k);
      if (!prev || (prev.metadata?.uid && obj.metadata?.uid && prev.metadata.uid !== obj.metadata.uid)) {
        added++;
        this.call('onAdd', () => this.o.onAdd?.(obj));
      } else if (prev.metadata?.resourceVersion !== obj.metadata?.resourceVersion) {
        updated++;
        this.call('onUpdate', () => this.o.onUpdate?.(obj, prev));
      }
    }
    this.resourceVersion = rv;
    this.synced = true;
    this.log.info({ objects: next.size, added, updated, deleted, resourceVersion: rv }, 'listed');
    this.call('onSynced', () => this.o.onSynced?.());
  }

  private async watchOnce(): Promise<{ kind: 'closed' | 'gone' | 'resync' } | { kind: 'silent'; silentMs: number } | { kind: 'failed'; error: unknown }> {
    const ac = new AbortController();
    const onStop = () => ac.abort(new Error('stopped'));
    this.stopAc.signal.addEventListener('abort', onStop, { once: true });
    const [lo, hi] = WATCH_TIMEOUT_RANGE_S;
    const query: Record<string, string> = {
      ...this.selectors(),
      watch: '1',
      allowWatchBookmarks: 'true',
      resourceVersion: this.resourceVersion,
      timeoutSeconds: String(Math.floor(lo + (hi - lo) * this.random())),
    };
    const openedAt = this.o.clock.now();
    let lastActivity = openedAt;
    let connected = false;
    let events = 0;
    let outcome: { kind: 'gone' | 'resync' } | { kind: 'silent'; silentMs: number } | { kind: 'failed'; error: unknown } | null = null;
    const finish = (o: NonNullable<typeof outcome>) => {
      outcome ??= o;
      ac.abort(new Error(o.kind));
    };
    this.endWatch = () => finish({ kind: 'resync' });

    // One timer: before the headers it enforces the request timeout, after them the watchdog.
    let timer: unknown = null;
    const arm = () => {
      const limit = connected ? this.watchdogMs : this.requestTimeoutMs;
      const idle = this.o.clock.now() - lastActivity;
      if (idle >= limit) {
        if (connected) finish({ kind: 'silent', silentMs: idle });
        else finish({ kind: 'failed', error: Object.assign(new Error(`${this.o.name}: no watch response within ${limit} ms`), { name: 'TimeoutError' }) });
        return;
      }
      timer = this.o.timers.set(arm, limit - idle);
    };
    arm();

    const onLine = (line: string) => {
      if (outcome || this.stopped) return;
      lastActivity = this.o.clock.now();
      if (line.trim() === '') return;
      events++;
      const r = this.applyEvent(line);
      if (r) finish(r);
    };
    try {
      const { done } = await this.transport.stream(this.o.path, query, ac.signal, onLine);
      connected = true;
      lastActivity = this.o.clock.now();
      if (timer !== null) this.o.timers.clear(timer);
      arm();
      if (!outcome) this.setHealth(true, 'watching');
      await done;
      if (!outcome && events === 0 && this.o.clock.now() - openedAt < MIN_CLEAN_WATCH_MS) {
        return { kind: 'failed', error: new Error(`${this.o.name}: watch closed at once without events`) };
      }
      return outcome ?? { kind: 'closed' };
    } catch (err) {
      return outcome ?? { kind: 'failed', error: err };
    } finally {
      if (timer !== null) this.o.timers.clear(timer);
      this.endWatch = null;
      this.stopAc.signal.removeEventListener('abort', onStop);
      ac.abort(new Error('watch over'));
    }
  }

  /** Applies one watch line; returns an outcome that ends this watch, or null to carry on. */
  private applyEvent(line: string): { kind: 'gone' } | { kind: 'failed'; error: unknown } | null {
    let ev: { type?: unknown; object?: unknown };
    try {
      ev = JSON.parse(line);
    } catch (e) {
      this.log.warn({ error: (e as Error).message, line: line.slice(0, 200) }, 'watch line is not JSON; skipped');
      return null;
    }
    const type = ev?.type;
    const obj = ev?.object as (T & { code?: number; reason?: string; message?: string }) | undefined;
    if (type === 'ERROR') {
      if (obj?.code === 410) return { kind: 'gone' };
      return { kind: 'failed', error: new HttpStatusError(obj?.code ?? 500, JSON.stringify(obj ?? {}), `${this.o.name}: watch ERROR event`) };
    }
    if (!obj?.metadata) {
      this.log.warn({ type, line: line.slice(0, 200) }, 'watch event without an object; skipped');
      return null;
    }
    const rv = obj.metadata.resourceVersion;
    if (type === 'BOOKMARK') {
      if (rv) this.resourceVersion = rv;
      return null;
    }
    if (!obj.metadata.name) {
      this.log.warn({ type }, 'watched object has no metadata.name; skipped');
      return null;
    }
    const k = keyOf(obj);
    const prev = this.cache.get(k);
    if (type === 'ADDED' || type === 'MODIFIED') {
      this.cache.set(k, obj);
      if (!prev) this.call('onAdd', () => this.o.onAdd?.(obj));
      else if (prev.metadata?.resourceVersion !== rv) this.call('onUpdate', () => this.o.onUpdate?.(obj, prev));
    } else if (type === 'DELETED') {
      if (prev) {
        this.cache.delete(k);
        this.call('onDelete', () => this.o.onDelete?.(obj));
      }
    } else {
      this.log.warn({ type }, 'unknown watch event type; skipped');
      return null;
    }
    if (rv) this.resourceVersion = rv;
    return null;
  }

  private setHealth(ok: boolean, reason: string): void {
    if (this.healthy === ok) return;
    this.healthy = ok;
    if (ok || reason !== 'stopped') this.call('onHealth', () => this.o.onHealth?.(ok, reason));
  }

  private call(what: string, fn: () => void): void {
    if (this.stopped) return;
    try {
      fn();
    } catch (e) {
      this.log.error({ callback: what, error: (e as Error)?.message ?? String(e) }, 'informer callback threw; carrying on');
    }
  }
}

// ---- HTTPS transport (plain GETs from ./http.ts) ----

/** A list is at most LIST_PAGE_LIMIT objects; a pod is rarely over 64 KiB. */
const MAX_LIST_BYTES = 64 * 1024 * 1024;
/** Enough of an error body to quote its Status. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

export function httpsTransport(kc: KubeConfig): InformerTransport {
  return {
    async getJson(path, query, signal) {
      const res = await kubeGet(kc, path + queryString(query), signal);
      if (res.statusCode !== 200) throw new HttpStatusError(res.statusCode ?? 0, await readBody(res, MAX_ERROR_BODY_BYTES).catch(() => ''), `GET ${path}`);
      return JSON.parse(await readBody(res, MAX_LIST_BYTES));
    },
    async stream(path, query, signal, onLine) {
      const res = await kubeGet(kc, path + queryString(query), signal);
      if (res.statusCode !== 200) throw new HttpStatusError(res.statusCode ?? 0, await readBody(res, MAX_ERROR_BODY_BYTES).catch(() => ''), `watch ${path}`);
      res.setEncoding('utf8');
      const done = new Promise<void>((resolve, reject) => {
        let buf = '';
        res.on('data', (s: string) => {
          buf += s;
          let i = buf.indexOf('\n');
          while (i >= 0) {
            onLine(buf.slice(0, i));
            buf = buf.slice(i + 1);
            i = buf.indexOf('\n');
          }
          if (buf.length > MAX_LINE_BYTES) res.destroy(new Error(`watch line longer than ${MAX_LINE_BYTES} bytes`));
        });
        res.on('end', () => {
          if (buf.trim()) onLine(buf);
          resolve();
        });
        res.on('error', reject);
        res.on('close', () => reject(new Error('watch connection closed mid-stream')));
      });
      done.catch(() => undefined); // settled by the caller; avoid an unhandled rejection if it stopped listening
      return { done };
    },
  };
}
