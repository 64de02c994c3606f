// Under `handover: redirect` the parent's own probes must reach the parent, not its checkpoint
// (docs/decisions/0012-one-listener-per-port.md). While the redirect stands, every new connection to the parent's port on
// the node goes to the copy, except those to the excepted address (and `::1`). A probe that is
// redirected judges the copy: a heartbeat sidecar would prove the parent Ready while it is not
// (the hand-back removes the redirect, the parent fails the clients, the redirect comes back), a
// readiness probe would let a DaemonSet rollout go on past a spec that never serves, a liveness
// probe would keep a hung parent alive. Nothing here changes the pod: the captured spec is what the
// operator wrote, and what is wrong with it is said (an Event, a log line) at each capture.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { RedirectPorts } from '../policy/policy.js';

type Probe = NonNullable<V1Container['readinessProbe']>;

/** Addresses the redirect never moves: the policy's excepted one and IPv6 loopback. */
function excepted(host: string, ports: RedirectPorts): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === ports.exceptAddress || h === '::1';
}

/** A probe's port as a number: a number, or a named port of the container. */
function portOf(port: unknown, c: V1Container): number | null {
  if (typeof port === 'number') return port;
  if (typeof port === 'string') {
    if (/^\d+$/.test(port)) return Number(port);
    const named = c.ports?.find((p) => p.name === port);
    return named ? named.containerPort : null;
  }
  return null;
}

function probeWarning(c: V1Container, kind: string, pr: Probe | undefined, ports: RedirectPorts): string | null {
  if (!pr) return null;
  const at = pr.httpGet
    ? { how: 'httpGet', port: pr.httpGet.port, host: pr.httpGet.host }
    : pr.tcpSocket
      ? { how: 'tcpSocket', port: pr.tcpSocket.port, host: pr.tcpSocket.host }
      : pr.grpc
        ? { how: 'grpc', port: pr.grpc.port, host: undefined }
        : null;
  if (!at || portOf(at.port, c) !== ports.port) return null;
  if (at.host && excepted(at.host, ports)) return null;
  return `container ${c.name}: its ${kind} (${at.how} on port ${ports.port}, host ${at.host || "the pod's IP"}) reaches the checkpoint's copy while the redirect stands; give it host ${ports.exceptAddress}`;
}

/** The heartbeat sidecar's `--probe=<url>` (or `--probe <url>`), if it names the parent's port on an address the redirect moves. */
function sidecarWarning(c: V1Container, ports: RedirectPorts): string | null {
  const args = [...(c.command ?? []), ...(c.args ?? [])];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const url = a.startsWith('--probe=') ? a.slice('--probe='.length) : a === '--probe' ? args[i + 1] : undefined;
    if (url === undefined || url === 'none') continue;
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      continue;
    }
    const port = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
    if (port !== ports.port || excepted(u.hostname, ports)) continue;
    return `container ${c.name}: its heartbeat probe ${url} reaches the checkpoint's copy while the redirect stands, so it would prove the parent Ready by the copy's answer; probe https://${ports.exceptAddress}:${ports.port}${u.pathname} instead`;
  }
  return null;
}

/** What in the parent's pod would be redirected to its checkpoint under `handover: redirect` (empty: nothing). */
export function redirectedProbes(pod: V1Pod, ports: RedirectPorts): string[] {
  const out: string[] = [];
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const [kind, pr] of [
      ['livenessProbe', c.livenessProbe],
      ['readinessProbe', c.readinessProbe],
      ['startupProbe', c.startupProbe],
    ] as const) {
      const w = probeWarning(c, kind, pr, ports);
      if (w) out.push(w);
    }
    const s = sidecarWarning(c, ports);
    if (s) out.push(s);
  }
  return out;
}
