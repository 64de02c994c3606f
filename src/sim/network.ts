// The network between the nodes and the api-server, beyond a node's own switches (model.ts NodeNet).
//
// Links. The only traffic the model has between nodes is a client (kubelet, agent, heartbeat
// sidecar) talking to an api-server instance, which runs on some master, its own node included.
// A link fault cuts the packets from one endpoint to another: a node, or `api-server`, the
// api-server's address (every instance, the client's own node's included: clients use the
// cluster's address). For a client on C and an instance on S:
// - a request (a write, a read, a probe) reaches S unless C -> S or C -> api-server is cut
//   (C -> S needs no link when C is S);
// - an answer or a watch event reaches C unless S -> C or api-server -> C is cut.
// A write lands once its request arrives, whether or not its answer comes back; a round trip
// (probe, read, the kubelet's sync) needs both legs through one instance. A partition (model.ts)
// is every link of the node cut both ways plus its api-server instance losing etcd; links leave
// etcd alone.
//
// Latency. Added latency per direction, drawn per message. Every draw comes from the node's own
// seeded stream (`latency/<node>`), so a seed replays a run exactly, and a fixed latency draws nothing.
import type { SimNode } from './model.js';
import type { Rng } from './rng.js';

/** Added one-way latency: uniform in [minMs, maxMs] for each message (fixed when equal). */
export interface Delay {
  minMs: number;
  maxMs: number;
}

export const NO_DELAY: Delay = Object.freeze({ minMs: 0, maxMs: 0 });

export function formatDelay(d: Delay): string {
  return d.minMs === d.maxMs ? `${d.minMs}ms` : `${d.minMs}-${d.maxMs}ms`;
}

/**
 * When a message sent at `now` with `delayMs` arrives on an ordered stream (one connection, such as
 * a sidecar's writes of one channel or one watch) whose previous message arrives at `lastAt`: never
 * before it, as over one TCP connection. A fixed latency keeps the order by itself.
 */
export function arrivalInOrder(now: number, delayMs: number, lastAt: number): number {
  return Math.max(now + delayMs, lastAt);
}

/** The api-server's address as a link endpoint. */
export const API_SERVER = 'api-server';

export type LinkDirection = 'both' | 'out' | 'in';

export class Network {
  private readonly streams = new Map<string, Rng>();
  /** Cut directions, `${from}>${to}` -> how many faults cut it now (faults may overlap). */
  private readonly cuts = new Map<string, number>();
  private changed = false;

  constructor(private readonly rng: (name: string) => Rng) {}

  /** Added latency of one message from the node to the api-server (a write, a request). */
  toApiMs(node: SimNode): number {
    return this.draw(node, node.net.toApi);
  }

  /** Added latency of one message from the api-server to the node (a response, a watch event). */
  fromApiMs(node: SimNode): number {
    return this.draw(node, node.net.fromApi);
  }

  /** Set the node's added latency per direction (NO_DELAY for none). */
  setLatency(node: SimNode, toApi: Delay, fromApi: Delay): void {
    node.net.toApi = toApi;
    node.net.fromApi = fromApi;
    node.net.latencyMs = Math.max(toApi.maxMs, fromApi.maxMs);
  }

  /** No link is cut: reachability is the node's own switches and the api-server's availability. */
  get whole(): boolean {
    return this.cuts.size === 0;
  }

  /** Whether a link was cut or healed since the last call (the world then looks at every node). */
  takeChanged(): boolean {
    const c = this.changed;
    this.changed = false;
    return c;
  }

  /** Cut (`by` 1) or heal (`by` -1) the link from `from` to `to` in `direction` (`out`: from -> to). */
  cut(from: string, to: string, direction: LinkDirection, by: 1 | -1): void {
    this.changed = true;
    if (direction !== 'in') this.count(`${from}>${to}`, by);
    if (direction !== 'out') this.count(`${to}>${from}`, by);
  }

  /** A request from a client on `client` reaches the api-server instance on `server`. */
  requestPasses(client: string, server: string): boolean {
    return !this.cuts.has(`${client}>${API_SERVER}`) && (client === server || !this.cuts.has(`${client}>${server}`));
  }

  /** An answer or watch event from the instance on `server` reaches a client on `client`. */
  answerPasses(server: string, client: string): boolean {
    return !this.cuts.has(`${API_SERVER}>${client}`) && (client === server || !this.cuts.has(`${server}>${client}`));
  }

  private count(k: string, by: 1 | -1): void {
    const n = (this.cuts.get(k) ?? 0) + by;
    if (n > 0) this.cuts.set(k, n);
    else this.cuts.delete(k);
  }

  private draw(node: SimNode, d: Delay): number {
    if (d.minMs === d.maxMs) return d.minMs;
    let s = this.streams.get(node.name);
    if (!s) {
      s = this.rng(`latency/${node.name}`);
      this.streams.set(node.name, s);
    }
    return s.between(d.minMs, d.maxMs);
  }
}
