import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProbeResult } from './beat.js';
import { acceptedBy, type Ownership, parseListeners, portOwnership } from './ownership.js';
import { makeProbe, parseProbe } from './probe.js';
import { type AttributedResult, FALSE_READY_PER_ROUND, ownershipProblem, probesNeeded, proveReady } from './ready-proof.js';

// /proc/net/tcp as the kernel writes it: a listener on 127.0.0.1:16443 (0x402B), one on
// 0.0.0.0:10359 (0x287F), an established connection to 16443 (state 01), and a header.
const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:403B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5001 1 0000000000000000 100 0 0 10 0
   1: 00000000:2877 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:403B 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 5003 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:403B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5004 1 0000000000000000 100 0 0 10 0
`;
// tcp6: a dual-stack listener on [::]:8080 (0x1F90).
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6001 1 0000000000000000 100 0 0 10 0
`;

const dirs: string[] = [];
const closers: Array<() => void> = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const c of closers.splice(0)) c();
});

/** A fixture /proc: net/tcp{,6} and, per pid, its fd links (`socket:[inode]` or a file path). */
function fakeProc(pids: Record<number, string[] | 'unreadable'>, tcp = TCP, tcp6: string | null = TCP6): string {
  const root = mkdtempSync(join(tmpdir(), 'lastseen-proc-'));
  dirs.push(root);
  mkdirSync(join(root, 'net'));
  writeFileSync(join(root, 'net', 'tcp'), tcp);
  if (tcp6 !== null) writeFileSync(join(root, 'net', 'tcp6'), tcp6);
  mkdirSync(join(root, 'self'));
  for (const [pid, links] of Object.entries(pids)) {
    mkdirSync(join(root, pid));
    // A file where the fd folder should be: readdir fails (ENOTDIR), as an unreadable one would (EACCES).
    if (links === 'unreadable') writeFileSync(join(root, pid, 'fd'), '');
    else {
      mkdirSync(join(root, pid, 'fd'));
      for (const [i, l] of links.entries()) symlinkSync(l, join(root, pid, 'fd', String(i)));
    }
  }
  return root;
}

describe('parseListeners', () => {
  it('keeps LISTEN sockets with their port and inode, skips connections and the header', () => {
    expect(parseListeners(TCP, 'tcp')).toEqual([
      { address: '0100007F', port: 16443, inode: '5001', family: 'tcp' },
      { address: '00000000', port: 10359, inode: '5002', family: 'tcp' },
      { address: '0100007F', port: 16443, inode: '5004', family: 'tcp' },
    ]);
    expect(parseListeners(TCP6, 'tcp6')).toEqual([{ address: '00000000000000000000000000000000', port: 8080, inode: '6001', family: 'tcp6' }]);
  });

  it('skips lines that do not parse', () => {
    expect(parseListeners('header\n garbage\n 0: zz:yy 0:0 0A x x x 0 0 notanumber\n', 'tcp')).toEqual([]);
  });
});

describe('portOwnership over a fixture /proc', () => {
  it('the pod own process (visible in its PID namespace) holds the port', () => {
    const proc = fakeProc({ 1: ['/dev/null'], 7: ['/dev/null', 'socket:[5001]', 'pipe:[9]'], 42: ['socket:[77]'] });
    const o = portOwnership(16443, { procRoot: proc, selfPid: 42 });
    expect(o.listeners.map((l) => l.inode)).toEqual(['5001', '5004']);
    expect(o.ours).toEqual([{ inode: '5001', pid: 7 }]);
    expect(o.visibleProcesses).toBe(2);
    expect(o.unreadable).toEqual([]);
    expect(ownershipProblem(o)).toBeNull();
  });

  it('a port held only by sockets of no visible process (the checkpoint, another pod) is not ours', () => {
    const proc = fakeProc({ 1: ['/dev/null'], 7: ['socket:[123]'], 42: [] });
    const o = portOwnership(16443, { procRoot: proc, selfPid: 42 });
    expect(o.ours).toEqual([]);
    expect(ownershipProblem(o)).toBe(
      'port 16443 is held by 2 listening socket(s) (inode 5001, 5004) of no process of this pod (another pod on this network, such as its checkpoint, holds it)',
    );
  });

  it('nothing listening, no shared process namespace, unreadable fds: each says which proof failed', () => {
    expect(ownershipProblem(portOwnership(9999, { procRoot: fakeProc({ 7: [] }), selfPid: 42 }))).toBe('nothing listens on port 9999');
    const alone = portOwnership(16443, { procRoot: fakeProc({ 42: ['/dev/null'] }), selfPid: 42 });
    expect(alone.visibleProcesses).toBe(0);
    expect(ownershipProblem(alone)).toContain('sees no other process of its pod: set shareProcessNamespace: true');
    const denied = portOwnership(16443, { procRoot: fakeProc({ 1: [], 7: 'unreadable' }), selfPid: 42 });
    expect(denied.unreadable).toEqual([{ pid: 7, code: 'ENOTDIR' }]);
    expect(ownershipProblem(denied)).toContain(
      'process(es) 7 (ENOTDIR) cannot be read: give the heartbeat container the capabilities SYS_PTRACE and DAC_READ_SEARCH',
    );
  });

  it('a dual-stack listener in tcp6 counts; a namespace without tcp6 is fine', () => {
    const o = portOwnership(8080, { procRoot: fakeProc({ 7: ['socket:[6001]'] }), selfPid: 42 });
    expect(o.ours).toEqual([{ inode: '6001', pid: 7 }]);
    const v4 = portOwnership(10359, { procRoot: fakeProc({ 7: ['socket:[5002]'] }, TCP, null), selfPid: 42 });
    expect(v4.ours).toEqual([{ inode: '5002', pid: 7 }]);
  });

  it('on the real /proc: a server of this very process is found as ours', async () => {
    const server = createServer((_q, r) => r.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    closers.push(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const o = portOwnership(port);
    expect(o.listeners).toHaveLength(1);
    expect(o.ours).toEqual([{ inode: o.listeners[0]!.inode, pid: process.pid }]);
  });
});

describe('acceptedBy over a fixture /proc', () => {
  // TCP's line 2: 127.0.0.1:16443 accepted a connection from local port 50000 (0xC350), inode 5003.
  it('the accepted end among the pod own files is ours; listed but not held, theirs; not found, unknown', () => {
    expect(acceptedBy(16443, 50000, [7], { procRoot: fakeProc({ 7: ['socket:[5001]', 'socket:[5003]'] }) })).toBe('ours');
    expect(acceptedBy(16443, 50000, [7], { procRoot: fakeProc({ 7: ['socket:[5001]'] }) })).toBe('theirs');
    expect(acceptedBy(16443, 50001, [7], { procRoot: fakeProc({ 7: ['socket:[5003]'] }) })).toBeNull();
    expect(acceptedBy(16443, 50000, [7], { procRoot: fakeProc({ 7: 'unreadable' }) })).toBeNull();
    // Not yet accepted (inode 0): not known.
    const queued = TCP.replace(' 5003 ', ' 0 ');
    expect(acceptedBy(16443, 50000, [7], { procRoot: fakeProc({ 7: ['socket:[5003]'] }, queued) })).toBeNull();
  });
});

describe('probesNeeded: N consecutive answers when the port is shared', () => {
  it.each([
    [1, 1, 1],
    [2, 2, 1],
    [1, 2, 20],
    [1, 3, 35],
    [2, 3, 13],
    [1, 5, 62],
    [1, 6, null],
    [0, 2, null],
  ])('%i of %i listeners ours: %s', (ours, listeners, n) => {
    expect(probesNeeded(ours, listeners)).toBe(n);
    if (n !== null && listeners > ours) {
      // The chance that N answers all came from the other listeners stays within the bound...
      expect(((listeners - ours) / listeners) ** n).toBeLessThanOrEqual(FALSE_READY_PER_ROUND);
      // ...and N is the smallest such number.
      expect(((listeners - ours) / listeners) ** (n - 1)).toBeGreaterThan(FALSE_READY_PER_ROUND);
    }
  });
});

const own = (listeners: number, ours: number): Ownership => ({
  port: 443,
  listeners: Array.from({ length: listeners }, (_, i) => ({ address: '0100007F', port: 443, inode: String(100 + i), family: 'tcp' as const })),
  ours: Array.from({ length: ours }, (_, i) => ({ inode: String(100 + i), pid: 7 })),
  visibleProcesses: 2,
  unreadable: [],
});

describe('proveReady', () => {
  const counting = (answers: (i: number) => ProbeResult) => {
    let calls = 0;
    return { once: async () => answers(++calls), calls: () => calls };
  };

  describe('an unanswered probe of a process waiting for a CPU is starved, not hung', () => {
    const NO_ANSWER: ProbeResult = { ok: false, error: 'GET https://127.0.0.1:443/readyz: no answer within 2000ms', unanswered: true };
    /** A clock that moves 2000 ms over the probe, and a port holder whose wait for a CPU grows by `waitedMs` over it. */
    const round = (waitedMs: number | null, listeners = 1) => {
      let t = 0;
      let waits = 0;
      return proveReady({
        port: 443,
        kind: 'http',
        timeoutMs: 2000,
        now: () => t,
        once: async () => {
          t += 2000;
          return NO_ANSWER;
        },
        ownership: () => own(listeners, 1),
        cpuWait: (pids) => {
          expect(pids).toEqual([7]);
          return waitedMs === null ? null : waits++ === 0 ? 5e9 : 5e9 + waitedMs * 1e6;
        },
      });
    };

    it('waited 1500 of 2000 ms: starved, and the error says how long', async () => {
      expect(await round(1500)).toEqual({
        ...NO_ANSWER,
        error: `${NO_ANSWER.ok ? '' : NO_ANSWER.error}; its process waited 1500ms of 2000ms for a CPU: starved, not hung`,
        starved: true,
      });
    });

    it('waited 100 of 2000 ms (a stopped or deadlocked process waits about nothing): hung', async () => {
      expect(await round(100)).toEqual(NO_ANSWER);
      expect(await round(0)).toEqual(NO_ANSWER);
    });

    it('no reading (no schedstat, the process gone): not called starved', async () => {
      expect(await round(null)).toEqual(NO_ANSWER);
    });

    it('sharing the port, the probe that got no answer is judged the same way', async () => {
      const r = await round(1800, 2);
      expect(r).toMatchObject({ ok: false, unanswered: true, starved: true });
    });
  });

  it('alone on its port: one answer is Ready', async () => {
    const p = counting(() => ({ ok: true }));
    expect(await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: p.once, ownership: () => own(1, 1) })).toEqual({ ok: true });
    expect(p.calls()).toBe(1);
  });

  it('sharing the port with the checkpoint: 20 answers in a row, and one failure is Starting', async () => {
    const all = counting(() => ({ ok: true }));
    expect(await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: all.once, ownership: () => own(2, 1) })).toEqual({ ok: true });
    expect(all.calls()).toBe(20);
    // Our process bound but not ready: the connections the kernel gives it fail.
    const half = counting((i) => (i === 3 ? { ok: false, error: 'GET https://127.0.0.1/readyz: HTTP 503' } : { ok: true }));
    expect(await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: half.once, ownership: () => own(2, 1) })).toEqual({
      ok: false,
      error: "GET https://127.0.0.1/readyz: HTTP 503 (probe 3 of 20: port 443 is shared by 2 listeners, 1 of them this pod's)",
    });
    expect(half.calls()).toBe(3);
  });

  it('our process exiting during the round (its socket gone) is Starting: the answers came from the checkpoint', async () => {
    // A bad kube-apiserver listens while it waits for its storage, then gives up and exits; the
    // rest of the round's probes reach the checkpoint beside it, and all of them answer.
    let scans = 0;
    const all = counting(() => ({ ok: true }));
    const r = await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: all.once, ownership: () => (++scans === 1 ? own(2, 1) : own(1, 0)) });
    expect(r).toEqual({ ok: false, error: "this pod's listening socket(s) on port 443 (inode 100) closed during the proof: the answers came from others" });
    expect(all.calls()).toBe(20);
    // Restarted with a new socket in the meantime: still not the socket the answers were judged for.
    scans = 0;
    const renewed = (): Ownership => ({ ...own(2, 0), ours: [{ inode: '999', pid: 8 }] });
    const again = await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: all.once, ownership: () => (++scans === 1 ? own(2, 1) : renewed()) });
    expect(again.ok).toBe(false);
    // The same socket still ours at the end: Ready.
    expect(await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: all.once, ownership: () => own(2, 1) })).toEqual({ ok: true });
  });

  it('the checkpoint answering while our process does not hold the port is Starting, without a probe', async () => {
    const p = counting(() => ({ ok: true }));
    const r = await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: p.once, ownership: () => own(1, 0) });
    expect(r).toMatchObject({ ok: false, error: expect.stringContaining('of no process of this pod') });
    expect(p.calls()).toBe(0);
  });

  it('tcp: ownership plus one accepted connection (the kernel accepts for any listener)', async () => {
    const p = counting(() => ({ ok: true }));
    expect(await proveReady({ port: 443, kind: 'tcp', timeoutMs: 1000, once: p.once, ownership: () => own(2, 1) })).toEqual({ ok: true });
    expect(p.calls()).toBe(1);
  });

  describe('sharing the port, with each answer attributed to the listener that took it', () => {
    const attributed = (answers: (i: number) => AttributedResult) => {
      const asked: Array<readonly number[] | undefined> = [];
      let calls = 0;
      return {
        once: async (_t: number, pids?: readonly number[]) => {
          asked.push(pids);
          return answers(++calls);
        },
        calls: () => calls,
        asked,
      };
    };

    it("a co-listener's failures are passed over, and our own answer decides the round", async () => {
      // A copy stalled beside a Ready parent: 500 from it, 200 from ours.
      const p = attributed((i) => (i < 4 ? { ok: false, error: 'GET https://127.0.0.1/readyz: HTTP 500', owner: 'theirs' } : { ok: true, owner: 'ours' }));
      expect(await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: p.once, ownership: () => own(2, 1) })).toEqual({ ok: true });
      expect(p.calls()).toBe(4);
      expect(p.asked[0]).toEqual([7]);
    });

    it('our own listener failing is Starting at once, whatever the others answer', async () => {
      const p = attributed((i) => (i === 1 ? { ok: true, owner: 'theirs' } : { ok: false, error: 'GET https://127.0.0.1/readyz: HTTP 500', owner: 'ours' }));
      expect(await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: p.once, ownership: () => own(2, 1) })).toEqual({
        ok: false,
        error: "GET https://127.0.0.1/readyz: HTTP 500 (probe 2, answered by this pod: port 443 is shared by 2 listeners, 1 of them this pod's)",
      });
    });

    it('only the others answering is Starting, and says so', async () => {
      let t = 0;
      const p = attributed(() => {
        t += 10;
        return { ok: true, owner: 'theirs' };
      });
      const r = await proveReady({ port: 443, kind: 'http', timeoutMs: 100, now: () => t, once: p.once, ownership: () => own(2, 1) });
      expect(r).toEqual({
        ok: false,
        error: "0 of 20 probes answered within 100ms, 10 more by the port's other listeners (port 443 is shared by 2 listeners)",
      });
    });

    it('alone on its port nothing is attributed (one answer is enough)', async () => {
      const p = attributed(() => ({ ok: true }));
      expect(await proveReady({ port: 443, kind: 'http', timeoutMs: 1000, once: p.once, ownership: () => own(1, 1) })).toEqual({ ok: true });
      expect(p.asked).toEqual([undefined]);
    });
  });

  it('the round keeps to its timeout', async () => {
    let t = 0;
    const slow = async (): Promise<ProbeResult> => {
      t += 30;
      return { ok: true };
    };
    const r = await proveReady({ port: 443, kind: 'http', timeoutMs: 100, now: () => t, ownership: () => own(2, 1), once: slow });
    expect(r).toEqual({ ok: false, error: '4 of 20 probes answered within 100ms (port 443 is shared by 2 listeners)' });
  });
});

describe('makeProbe with the ownership proof', () => {
  async function serve(): Promise<number> {
    const server: Server = createServer((_q, r) => r.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    closers.push(() => server.close());
    return (server.address() as AddressInfo).port;
  }

  it('an answering port that this pod does not hold is Starting: the answer came from someone else', async () => {
    const port = await serve();
    const hex = port.toString(16).toUpperCase().padStart(4, '0');
    // The fixture /proc: the port is listened on (inode 9001), by no process this sidecar sees.
    const tcp = `header\n   0: 0100007F:${hex} 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 9001 1 0 100 0 0 10 0\n`;
    const proc = fakeProc({ 1: ['/dev/null'], 7: ['socket:[1]'] }, tcp, null);
    const spec = parseProbe(`http://127.0.0.1:${port}/healthz`);
    if (!spec.ok) throw new Error(spec.error);
    const r = await makeProbe(spec.spec, { timeoutMs: 1000, ownership: { procRoot: proc, selfPid: 42 } })();
    expect(r).toEqual({
      ok: false,
      error: `port ${port} is held by 1 listening socket(s) (inode 9001) of no process of this pod (another pod on this network, such as its checkpoint, holds it)`,
    });
    // The same port with the pod's own process holding it is Ready.
    const ours = fakeProc({ 1: ['/dev/null'], 7: ['socket:[9001]'] }, tcp, null);
    expect(await makeProbe(spec.spec, { timeoutMs: 1000, ownership: { procRoot: ours, selfPid: 42 } })()).toEqual({ ok: true });
  });

  /**
   * A real SO_REUSEPORT pair: this process's server and another process's on one port, each
   * answering with `status`. The fixture /proc shows the real socket tables and this process alone
   * (as a pod's PID namespace would), so the other process is another pod's.
   */
  async function sharedPort(oursStatus: number, theirsStatus: number, bodyAfterMs = 0): Promise<{ port: number; proc: string }> {
    const server: Server = createServer((_q, r) => {
      r.statusCode = oursStatus;
      if (bodyAfterMs === 0) return r.end('ours');
      r.write('our');
      setTimeout(() => r.end('s'), bodyAfterMs);
    });
    await new Promise<void>((r) => server.listen({ port: 0, host: '127.0.0.1', reusePort: true }, () => r()));
    closers.push(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const code = `require('node:http').createServer((q, r) => { r.statusCode = ${theirsStatus}; r.end('theirs'); }).listen({ port: ${port}, host: '127.0.0.1', reusePort: true }, () => console.log('up'))`;
    const other = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push(() => other.kill('SIGKILL'));
    await new Promise<void>((resolve, reject) => {
      other.stdout.once('data', () => resolve());
      other.once('exit', (c) => reject(new Error(`the other listener exited with ${c}`)));
    });
    const proc = mkdtempSync(join(tmpdir(), 'lastseen-proc-'));
    dirs.push(proc);
    mkdirSync(join(proc, 'net'));
    symlinkSync('/proc/net/tcp', join(proc, 'net', 'tcp'));
    symlinkSync('/proc/net/tcp6', join(proc, 'net', 'tcp6'));
    symlinkSync(`/proc/${process.pid}`, join(proc, String(process.pid)));
    return { port, proc };
  }

  it('a real shared port: another process answering 500 beside our Ready server does not hold us back', async () => {
    const { port, proc } = await sharedPort(200, 500);
    const spec = parseProbe(`http://127.0.0.1:${port}/readyz`);
    if (!spec.ok) throw new Error(spec.error);
    const probe = makeProbe(spec.spec, { timeoutMs: 2000, ownership: { procRoot: proc, selfPid: -1 } });
    // Twenty answers in a row, as the proof asked before, would fail nearly every round here.
    for (let i = 0; i < 5; i++) expect(await probe()).toEqual({ ok: true });
  });

  it('a real shared port: an answer whose body comes later is attributed at its head, and its connection ended after', async () => {
    const { port, proc } = await sharedPort(200, 500, 200);
    const spec = parseProbe(`http://127.0.0.1:${port}/readyz`);
    if (!spec.ok) throw new Error(spec.error);
    const probe = makeProbe(spec.spec, { timeoutMs: 2000, ownership: { procRoot: proc, selfPid: -1 } });
    for (let i = 0; i < 3; i++) expect(await probe()).toEqual({ ok: true });
    // The bodies end and the client closes each connection: nothing of the probes is left open.
    await new Promise((r) => setTimeout(r, 400));
    const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
    const established = readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f[1]?.endsWith(local) && f[3] === '01');
    expect(established).toEqual([]);
  });

  it('a real shared port: our own server answering 500 is Starting, though the other answers 200', async () => {
    const { port, proc } = await sharedPort(500, 200);
    const spec = parseProbe(`http://127.0.0.1:${port}/readyz`);
    if (!spec.ok) throw new Error(spec.error);
    const probe = makeProbe(spec.spec, { timeoutMs: 2000, ownership: { procRoot: proc, selfPid: -1 } });
    for (let i = 0; i < 5; i++) expect(await probe()).toMatchObject({ ok: false, error: expect.stringContaining('HTTP 500 (probe') });
  });

  it('none: Ready, marked unprobed', async () => {
    const spec = parseProbe('none');
    if (!spec.ok) throw new Error(spec.error);
    expect(await makeProbe(spec.spec, { timeoutMs: 1000 })()).toEqual({ ok: true, unprobed: true });
  });
});
