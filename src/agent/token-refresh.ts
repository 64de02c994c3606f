// The tokens of running checkpoints: a copied service-account token lives about an hour, a
// checkpoint may run for days (a control plane on its own copy). Every active checkpoint's tokens
// are minted again once 80% of their lifetime is gone, whatever state its parent is in, and written
// in place so the running containers' hostPath mounts see them (Store.replaceToken).
//
// Promises: a token is replaced only by a token the api-server just issued; when no api-server
// answers (the TokenRequest fails) nothing is written and the old token stays until it expires;
// the next pass tries again. `expiries` reports, per checkpoint, the earliest expiry of its copied
// tokens, for the NodeCheckpoint status.
//
// Assumes: "active" is what the kubelet's manifest folder says (an active copy of the agent itself
// included); the resolver is the agent's (its TokenRequests go to whichever api-server answers at
// the kubeconfig's address, typically the checkpoint's own); `wallNow` is the wall clock.
import type { Logger } from 'pino';
import type { DataResolver } from '../checkpoint/capture.js';
import type { ManifestDir } from '../checkpoint/manifests.js';
import type { Store } from '../checkpoint/store.js';
import { isDue, type TokenCopy, tokenCopy } from '../checkpoint/tokens.js';
import { every, type Timers } from '../core/time.js';

/**
 * How often active checkpoints' tokens are looked at. The shortest lifetime a pod may ask for is
 * ten minutes, renewed at eight: a pass every 30 s leaves the last 1.5 minutes as margin.
 */
export const TOKEN_CHECK_MS = 30_000;

export interface TokenRefreshDeps {
  store: Pick<Store, 'load' | 'replaceToken'>;
  manifests: Pick<ManifestDir, 'active'>;
  /** Null while there is no api-server client. */
  resolver: () => DataResolver | null;
  wallNow: () => number;
  logger: Logger;
}

export interface TokenRefreshResult {
  id: string;
  relPath: string;
  outcome: 'refreshed' | 'failed';
  expiresAt: string;
}

export class TokenRefresher {
  private readonly expiry = new Map<string, string>();
  private running: Promise<TokenRefreshResult[]> | null = null;

  constructor(private readonly d: TokenRefreshDeps) {}

  /** Earliest expiry (ISO 8601) of each active checkpoint's copied tokens, as of the last pass. */
  expiries(): ReadonlyMap<string, string> {
    return this.expiry;
  }

  /** One pass over the active checkpoints; a pass still running is joined, not doubled. */
  pass(): Promise<TokenRefreshResult[]> {
    this.running ??= this.run().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async run(): Promise<TokenRefreshResult[]> {
    const results: TokenRefreshResult[] = [];
    const active = await this.d.manifests.active();
    for (const id of [...this.expiry.keys()]) if (!active.includes(id)) this.expiry.delete(id);
    for (const id of active) {
      let tokens: TokenCopy[];
      try {
        tokens = (await this.d.store.load(id))?.tokens ?? [];
      } catch (e) {
        this.d.logger.warn({ checkpoint: id, err: (e as Error).message }, 'cannot read the active checkpoint to refresh its tokens');
        continue;
      }
      const expiries: string[] = [];
      for (const t of tokens) {
        const now = this.d.wallNow();
        if (!isDue(t, now)) {
          expiries.push(t.expiresAt);
          continue;
        }
        const outcome = await this.refreshOne(id, t, now);
        expiries.push(outcome.expiresAt);
        results.push(outcome);
      }
      if (expiries.length > 0)
        this.expiry.set(
          id,
          expiries.reduce((a, b) => (Date.parse(a) <= Date.parse(b) ? a : b)),
        );
      else this.expiry.delete(id);
    }
    return results;
  }

  private async refreshOne(id: string, t: TokenCopy, now: number): Promise<TokenRefreshResult> {
    const failed = (err: string): TokenRefreshResult => {
      this.d.logger.warn(
        { checkpoint: id, token: t.relPath, expiresAt: t.expiresAt, err },
        "could not refresh a running checkpoint's token; the copy keeps the old one",
      );
      return { id, relPath: t.relPath, outcome: 'failed', expiresAt: t.expiresAt };
    };
    const resolver = this.d.resolver();
    if (!resolver) return failed('no api-server client');
    let bytes: Buffer;
    try {
      bytes = await resolver.serviceAccountToken(t.namespace, t.serviceAccount, t.audience, t.expirationSeconds);
    } catch (e) {
      return failed((e as Error).message);
    }
    const copy = tokenCopy(
      t.relPath,
      { namespace: t.namespace, name: t.serviceAccount, audience: t.audience, expirationSeconds: t.expirationSeconds },
      bytes,
      now,
    );
    try {
      await this.d.store.replaceToken(id, copy, bytes);
    } catch (e) {
      return failed((e as Error).message);
    }
    this.d.logger.info({ checkpoint: id, token: t.relPath, expiresAt: copy.expiresAt }, "refreshed a running checkpoint's token in place");
    return { id, relPath: t.relPath, outcome: 'refreshed', expiresAt: copy.expiresAt };
  }
}

/** Run `refresher.pass()` every TOKEN_CHECK_MS until the returned stop is called. */
export function startTokenRefresh(refresher: TokenRefresher, timers: Timers, onPass: (results: TokenRefreshResult[]) => void): () => Promise<void> {
  const p = every(timers, TOKEN_CHECK_MS, () => refresher.pass().then(onPass, () => {}));
  return () => p.stop();
}
