// The node-local redirect (docs/decisions/0012-one-listener-per-port.md): while a parent's copy serves on a port of its own,
// new connections to the parent's port on the node's own addresses go to the copy's port, and the
// parent, bound to its port alone, receives nothing until the redirect is removed. One nftables
// table of the agent's own (`inet lastseen`), rewritten whole in one transaction at every change,
// so the node never holds half of a change, and read back at the agent's start.
//
// - `output` (the node's own clients, the kubelet and host-network pods among them) and
//   `prerouting` (connections from outside: a load balancer, the other masters), both at priority
//   -90: after kube-proxy's nat hooks (-100), whose translation of the `kubernetes` Service comes
//   first. A connection kube-proxy translated keeps kube-proxy's mapping (the kernel sets up one
//   mapping per connection and hook), so a Service client is not redirected.
// - Only destinations of this node (`fib daddr type local`): a connection from the node to another
//   master's port passes untouched.
// - The excepted address (127.0.0.2 by default) reaches the parent itself, however the rule
//   stands: the parent's own probes (its heartbeat sidecar, the kubelet's) go there. So does [::1]
//   (LOOPBACK6): a wildcard-bound kube-apiserver's loopback client connects to itself there.
// - Conntrack keeps every established connection where it began: adding or removing the rule
//   moves only new connections.
//
// Nothing here decides: the caller says which redirects should stand, this makes it so.
import { execFile } from 'node:child_process';
import { z } from 'zod';

export const NFT_TABLE = 'lastseen';
/** After kube-proxy's nat chains (-100, the standard `dstnat`). */
export const NFT_PRIORITY = -90;
export const DEFAULT_EXCEPT_ADDRESS = '127.0.0.2';
/**
 * Never redirected either: a kube-apiserver bound to the wildcard address listens on [::] and its
 * loopback client (its post-start hooks, its own informers) connects to [::1]:<port>. Redirected, it
 * reached the copy, whose serving certificate its in-memory loopback CA does not sign (`x509:
 * certificate signed by unknown authority`): the post-start hooks failed, the parent exited and
 * never came back while the redirect stood (the real-node bed, kubelet v1.36.3, 2026-12-06).
 */
export const LOOPBACK6 = '::1';

export interface Redirect {
  /** The parent it stands for (namespace/key): written as each rule's comment, read back at start. */
  parent: string;
  /** The parent's port, where clients connect. */
  port: number;
  /** The copy's own port. */
  toPort: number;
  /** An IPv4 loopback address that always reaches the parent itself. */
  exceptAddress: string;
}

const port = z.number().int().min(1).max(65_535);
const redirectSchema = z.strictObject({
  parent: z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be namespace/key'),
  port,
  toPort: port,
  exceptAddress: z.ipv4().refine((a) => a.startsWith('127.'), 'must be a loopback address (127.0.0.0/8)'),
});

/** Checks a redirect before it reaches nft; throws an error naming the parent and the field. */
export function checkRedirect(r: Redirect): Redirect {
  const got = redirectSchema.safeParse(r);
  if (!got.success) {
    const i = got.error.issues[0]!;
    throw new Error(`redirect for ${JSON.stringify(r.parent)}: ${i.path.join('.') || 'value'} ${i.message}`);
  }
  if (r.port === r.toPort) throw new Error(`redirect for ${r.parent}: toPort ${r.toPort} is the parent's own port`);
  return r;
}

/**
 * The comment of the rule that keeps conntrack on in the node's network namespace while the table
 * exists. Measured here (test/node/redirect.test.ts): when the last rule that needs conntrack goes,
 * the kernel stops tracking connections in that namespace, and a connection established through a
 * redirect is then reset at its next packet (its replies no longer translated). On a node with
 * kube-proxy something else keeps conntrack on; the table must not count on that.
 */
export const CONNTRACK_KEEPER = 'lastseen: keeps conntrack on, so established connections keep their redirect';

/**
 * The whole table as one nft transaction: created if absent, emptied, then written. The table and
 * its chains stay when no redirect stands (removing them would reset the connections a redirect
 * set up: CONNTRACK_KEEPER).
 */
export function nftScript(redirects: Redirect[]): string {
  const seen = new Set<number>();
  for (const r of redirects) {
    checkRedirect(r);
    if (seen.has(r.port))
      throw new Error(
        `two redirects for port ${r.port} (${redirects
          .filter((x) => x.port === r.port)
          .map((x) => x.parent)
          .join(', ')})`,
      );
    seen.add(r.port);
  }
  const comment = (r: Redirect) => `comment "${r.parent} ${r.exceptAddress}"`;
  const keeper = `    ct state new counter comment "${CONNTRACK_KEEPER}"`;
  const out = redirects.flatMap((r) => [
    `    meta nfproto ipv4 ip daddr != ${r.exceptAddress} fib daddr type local tcp dport ${r.port} redirect to :${r.toPort} ${comment(r)}`,
    `    meta nfproto ipv6 ip6 daddr != ${LOOPBACK6} fib daddr type local tcp dport ${r.port} redirect to :${r.toPort} ${comment(r)}`,
  ]);
  const pre = redirects.map((r) => `    fib daddr type local tcp dport ${r.port} redirect to :${r.toPort} ${comment(r)}`);
  const lines = [
    `table inet ${NFT_TABLE}`,
    `delete table inet ${NFT_TABLE}`,
    `table inet ${NFT_TABLE} {`,
    '  chain output {',
    `    type nat hook output priority ${NFT_PRIORITY}; policy accept;`,
    keeper,
    ...out,
    '  }',
    '  chain prerouting {',
    `    type nat hook prerouting priority ${NFT_PRIORITY}; policy accept;`,
    keeper,
    ...pre,
    '  }',
    '}',
  ];
  return `${lines.join('\n')}\n`;
}

/** Removes the table (the agent's uninstall; never while a connection may still ride a redirect). */
export const NFT_REMOVE = `table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\n`;

// What `nft -j list table` says, as far as this reads it.
const listed = z.object({
  nftables: z.array(
    z.looseObject({
      rule: z.optional(
        z.looseObject({
          chain: z.string(),
          comment: z.optional(z.string()),
          expr: z.array(z.looseObject({ redirect: z.optional(z.looseObject({ port: z.optional(z.number()) })) })),
        }),
      ),
    }),
  ),
});

/**
 * The redirects a listing of the table holds (its prerouting rules, one per redirect). A rule this
 * module did not write (no comment of ours, no redirect port) is an error naming it: the table is
 * the agent's own, and a rule it cannot read is not one it can keep.
 */
export function redirectsFromListing(json: string): Redirect[] {
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch (e) {
    throw new Error(`nft -j list table inet ${NFT_TABLE}: not JSON (${(e as Error).message})`);
  }
  const got = listed.safeParse(doc);
  if (!got.success)
    throw new Error(
      `nft -j list table inet ${NFT_TABLE}: not a listing nft writes (${got.error.issues[0]!.message} at ${got.error.issues[0]!.path.join('.')})`,
    );
  const out: Redirect[] = [];
  for (const item of got.data.nftables) {
    const rule = item.rule;
    if (rule?.chain !== 'prerouting' || rule.comment === CONNTRACK_KEEPER) continue;
    const m = /^(\S+) (\S+)$/.exec(rule.comment ?? '');
    const toPort = rule.expr.find((e) => e.redirect)?.redirect?.port;
    const dport = rule.expr
      .map((e) => (e as { match?: { left?: { payload?: { field?: string } }; right?: unknown } }).match)
      .find((x) => x?.left?.payload?.field === 'dport')?.right;
    if (!m || toPort === undefined || typeof dport !== 'number')
      throw new Error(`table inet ${NFT_TABLE} holds a prerouting rule lastseen did not write: ${JSON.stringify(rule).slice(0, 300)}`);
    out.push(checkRedirect({ parent: m[1]!, exceptAddress: m[2]!, port: dport, toPort }));
  }
  return out;
}

export interface Redirector {
  /** Make the node's redirects exactly these (empty: none, and no table). */
  set(redirects: Redirect[]): Promise<void>;
  /** The redirects the node holds now (the table as left by an earlier run, or none). */
  read(): Promise<Redirect[]>;
}

function run(nft: string[], args: string[], input?: string): Promise<string> {
  const [cmd, ...pre] = nft;
  return new Promise((resolve, reject) => {
    const child = execFile(cmd!, [...pre, ...args], { timeout: 10_000, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (err) {
        const why =
          (err as NodeJS.ErrnoException).code === 'ENOENT'
            ? `${cmd} not found (the agent's image carries nft; on a host: apt-get install nftables)`
            : stderr.trim() || err.message;
        reject(new Error(`nft ${args.join(' ')}: ${why}`));
      } else resolve(stdout);
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}

/** The redirects in the node's nftables, through the `nft` command (needs CAP_NET_ADMIN in the node's network namespace). */
export class NftRedirector implements Redirector {
  /** `nft`: the command that runs nft (a test runs it in a network namespace of its own: `ip netns exec NS nft`). */
  constructor(private readonly nft: string[] = ['nft']) {}

  async set(redirects: Redirect[]): Promise<void> {
    await run(this.nft, ['-f', '-'], nftScript(redirects));
  }

  async read(): Promise<Redirect[]> {
    let json: string;
    try {
      json = await run(this.nft, ['-j', 'list', 'table', 'inet', NFT_TABLE]);
    } catch (e) {
      // No table: no redirect stands (nft says "No such file or directory").
      if (/No such file or directory/.test((e as Error).message)) return [];
      throw e;
    }
    return redirectsFromListing(json);
  }
}

/**
 * The node's redirects as the agent keeps them: read once at its start, then changed one parent at
 * a time, each change written as the whole table (one transaction), one change at a time.
 */
export class RedirectTable {
  private readonly standing = new Map<string, Redirect>();
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly r: Redirector) {}

  /** What the node holds now (at the agent's start: what an earlier run left). */
  async load(): Promise<Redirect[]> {
    const got = await this.r.read();
    this.standing.clear();
    for (const x of got) this.standing.set(x.parent, x);
    return got;
  }

  holds(parent: string): boolean {
    return this.standing.has(parent);
  }

  /** Make the redirect of `parent` stand (`to`) or go (null). */
  set(parent: string, to: Redirect | null): Promise<void> {
    const run = async () => {
      const next = new Map(this.standing);
      if (to) next.set(parent, checkRedirect(to));
      else next.delete(parent);
      await this.r.set([...next.values()]);
      this.standing.clear();
      for (const [k, v] of next) this.standing.set(k, v);
    };
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => undefined);
    return p;
  }
}
