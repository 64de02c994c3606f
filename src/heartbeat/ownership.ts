// Who holds a TCP port: the listening sockets in this network namespace (/proc/net/tcp and tcp6)
// and which of them belong to a process this sidecar can see (/proc/<pid>/fd).
//
// Why: on the host network a parent and its checkpoint share the node's ports (overlap hand-over
// with SO_REUSEPORT, or a checkpoint still holding the port while the parent's own process failed
// with EADDRINUSE). A probe of 127.0.0.1:PORT may then be answered by the checkpoint. With
// `shareProcessNamespace: true` the sidecar sees exactly its own pod's processes, so a listening
// socket whose inode is among their open files is the pod's own; one that is not belongs to
// another pod (the checkpoint) or the host.
//
// Assumes: listing another user's /proc/<pid>/fd (mode 0500) needs CAP_DAC_READ_SEARCH, and
// reading its links the ptrace read check (same credentials and a superset of its capabilities,
// or CAP_SYS_PTRACE); both measured on kernel 6.18. What cannot be read is reported, not guessed.
// Pure over a `procRoot` folder, so tests run on fixture folders.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

/** TCP state LISTEN in /proc/net/tcp's `st` column. */
const TCP_LISTEN = '0A';
const SOCKET_LINK = /^socket:\[(\d+)\]$/;

export interface Listener {
  /** Local address as the kernel writes it (hex), and the port. */
  address: string;
  port: number;
  inode: string;
  family: 'tcp' | 'tcp6';
}

/** One socket line of /proc/net/tcp{,6}: local address (hex) and port, remote port, state, inode. */
interface SocketLine {
  address: string;
  port: number;
  remotePort: number;
  state: string;
  inode: string;
}

/** The socket lines of one /proc/net/tcp{,6} text. Lines that do not parse are skipped. */
function parseSockets(text: string): SocketLine[] {
  const out: SocketLine[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
    if (f.length < 10) continue;
    const local = f[1]!.split(':');
    const port = Number.parseInt(local[1] ?? '', 16);
    const inode = f[9]!;
    if (!Number.isInteger(port) || !/^\d+$/.test(inode)) continue;
    out.push({ address: local[0]!, port, remotePort: Number.parseInt(f[2]!.split(':')[1] ?? '', 16), state: f[3]!, inode });
  }
  return out;
}

/** Listening sockets of one /proc/net/tcp{,6} text. Lines that do not parse are skipped. */
export function parseListeners(text: string, family: 'tcp' | 'tcp6'): Listener[] {
  return parseSockets(text)
    .filter((l) => l.state === TCP_LISTEN && l.inode !== '0')
    .map(({ address, port, inode }) => ({ address, port, inode, family }));
}

/**
 * The socket inodes among `pid`'s open files, and the error of a link that could not be read
 * (ENOENT, closed meanwhile, is no error); or the error that kept its fd folder from being listed.
 */
function socketInodes(proc: string, pid: number): { inodes: Set<string>; denied: string | null } | { code: string } {
  let fds: string[];
  try {
    fds = readdirSync(join(proc, String(pid), 'fd'));
  } catch (e) {
    return { code: (e as NodeJS.ErrnoException).code ?? 'EIO' };
  }
  const inodes = new Set<string>();
  let denied: string | null = null;
  for (const fd of fds) {
    try {
      const m = SOCKET_LINK.exec(readlinkSync(join(proc, String(pid), 'fd', fd)));
      if (m) inodes.add(m[1]!);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
      if (code !== 'ENOENT') denied = code;
    }
  }
  return { inodes, denied };
}

export interface Ownership {
  port: number;
  /** Listening sockets on the port in this network namespace. */
  listeners: Listener[];
  /** Of those, the ones held by a visible process, with the pid. */
  ours: Array<{ inode: string; pid: number }>;
  /** Pids this sidecar can see (its PID namespace), not counting itself. */
  visibleProcesses: number;
  /** Processes whose open files could not be read, with the error code (EACCES: no CAP_DAC_READ_SEARCH or CAP_SYS_PTRACE). */
  unreadable: Array<{ pid: number; code: string }>;
}

export interface OwnershipOptions {
  procRoot?: string;
  /** Our own pid: scanned, but not counted among the pod's other processes. Default process.pid. */
  selfPid?: number;
}

/** This network namespace's TCP socket tables, tcp and tcp6 (absent without IPv6: skipped). */
function socketTables(proc: string): Array<{ family: 'tcp' | 'tcp6'; text: string }> {
  const out: Array<{ family: 'tcp' | 'tcp6'; text: string }> = [];
  for (const family of ['tcp', 'tcp6'] as const) {
    try {
      out.push({ family, text: readFileSync(join(proc, 'net', family), 'utf8') });
    } catch {
      // no IPv6 in this namespace: no tcp6 file
    }
  }
  return out;
}

/** Scan `procRoot` for the listeners on `port` and the visible processes holding them. */
export function portOwnership(port: number, opts: OwnershipOptions = {}): Ownership {
  const proc = opts.procRoot ?? '/proc';
  const self = opts.selfPid ?? process.pid;
  const listeners: Listener[] = [];
  for (const { family, text } of socketTables(proc)) listeners.push(...parseListeners(text, family).filter((l) => l.port === port));
  const wanted = new Set(listeners.map((l) => l.inode));
  const ours: Ownership['ours'] = [];
  const unreadable: Ownership['unreadable'] = [];
  let visible = 0;
  for (const name of readdirSync(proc)) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    // Our own process is scanned too (a parent may run the heartbeat in-process) but not counted.
    if (pid !== self) visible++;
    if (wanted.size === 0) continue;
    const open = socketInodes(proc, pid);
    if ('code' in open) {
      if (open.code !== 'ENOENT') unreadable.push({ pid, code: open.code }); // ENOENT: it exited meanwhile
      continue;
    }
    for (const inode of wanted) if (open.inodes.has(inode) && !ours.some((o) => o.inode === inode)) ours.push({ inode, pid });
    if (open.denied) unreadable.push({ pid, code: open.denied });
  }
  return { port, listeners, ours, visibleProcesses: visible, unreadable };
}

/** Whose process accepted a connection: this pod's, another's, or not known. */
export type AcceptedBy = 'ours' | 'theirs' | null;

/**
 * Which process holds the accepted end of a connection to `port` made from local port `peerPort`
 * (a probe's, while it is still open): 'ours' when its inode is an open file of one of `pids` (the
 * pod's own processes that hold the port's listeners), 'theirs' when the kernel lists the accepted
 * socket but none of them holds it (another listener of a shared port took the connection), null
 * when that cannot be told (no such socket, or more than one, or `pids`' files unreadable).
 * The server's end is looked up by its ports alone, in tcp and tcp6 (a dual-stack listener's
 * connections are written there, with mapped addresses); a connection the process has not
 * accepted yet has inode 0 and does not count.
 */
export function acceptedBy(port: number, peerPort: number, pids: readonly number[], opts: OwnershipOptions = {}): AcceptedBy {
  const proc = opts.procRoot ?? '/proc';
  const inodes: string[] = [];
  for (const { text } of socketTables(proc))
    for (const l of parseSockets(text)) if (l.state !== TCP_LISTEN && l.port === port && l.remotePort === peerPort && l.inode !== '0') inodes.push(l.inode);
  if (inodes.length !== 1) return null;
  for (const pid of pids) {
    const open = socketInodes(proc, pid);
    if ('code' in open) return null;
    if (open.inodes.has(inodes[0]!)) return 'ours';
  }
  return 'theirs';
}
