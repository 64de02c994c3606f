// The network between the nodes and the api-server, beyond a node's own switches (model.ts NodeNet):
// added latency per direction, drawn per message. Every draw comes from the node's own seeded
// stream (`latency/<node>`), so a seed replays a run exactly, and a fixed latency draws nothing.
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

export class Network {
  private readonly streams = new Map<string, Rng>();

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
