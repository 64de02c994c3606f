// The node-local redirect (src/agent/redirect.ts) against the real nftables, in a network namespace
// of its own (nothing of the machine's network is touched): new connections to the parent's port go
// to the copy's while the redirect stands, the excepted address always reaches the parent, an
// established connection stays where it began, and the table reads back as written. Needs root
// and nft (scripts/node ensure installs it).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NftRedirector, type Redirect } from '../../src/agent/redirect.js';

const NS = `lastseen-redirect-${process.pid}`;
const inNs = (cmd: string, ...args: string[]) => ['ip', 'netns', 'exec', NS, cmd, ...args];
const nft = new NftRedirector(inNs('nft'));
const api: Redirect = { parent: 'kube-system/kube-apiserver', port: 6443, toPort: 16443, exceptAddress: '127.0.0.2' };
const servers: ChildProcess[] = [];

/** A server in the namespace that answers every connection with its name, one line per line received. */
async function server(name: string, port: number): Promise<void> {
  const code = `require('net').createServer((s) => { s.write('${name}\\n'); s.on('data', () => s.write('${name}\\n')); }).listen(${port}, '0.0.0.0', () => console.log('up'))`;
  const [cmd, ...args] = inNs(process.execPath, '-e', code);
  const child = spawn(cmd!, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`server ${name} on ${port} exited (${c})`)));
  });
}

/** Who answers a new connection to host:port in the namespace. */
function who(host: string, port = 6443): string {
  const code = `const s = require('net').connect(${port}, '${host}'); s.once('data', (d) => { process.stdout.write(String(d)); s.destroy(); }); s.on('error', (e) => { process.stdout.write(e.code + '\\n'); });`;
  const [cmd, ...args] = inNs(process.execPath, '-e', code);
  return execFileSync(cmd!, args, { encoding: 'utf8', timeout: 10_000 }).trim();
}

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('test/node/redirect.test.ts needs root (a network namespace, nftables)');
  try {
    execFileSync('nft', ['--version']);
  } catch {
    throw new Error("nft is missing: run scripts/node ensure (as root it installs Debian's nftables), or apt-get install -y nftables");
  }
  execFileSync('ip', ['netns', 'add', NS]);
  execFileSync('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
  execFileSync('ip', ['-n', NS, 'addr', 'add', '10.77.0.1/24', 'dev', 'lo']);
  await server('parent', 6443);
  await server('copy', 16443);
});

afterAll(() => {
  for (const s of servers) s.kill('SIGKILL');
  execFileSync('ip', ['netns', 'del', NS]);
});

describe('the node-local redirect on real nftables', () => {
  it("sends new connections to the copy while it stands, except on the parent's own address, and back once removed", async () => {
    expect(await nft.read()).toEqual([]);
    expect(who('127.0.0.1')).toBe('parent');

    await nft.set([api]);
    expect(await nft.read()).toEqual([api]);
    expect(who('127.0.0.1')).toBe('copy');
    expect(who('10.77.0.1')).toBe('copy');
    expect(who('127.0.0.2'), 'the excepted address reaches the parent itself').toBe('parent');
    expect(who('127.0.0.1', 16443)).toBe('copy');

    // Written again, the same: one transaction, nothing doubled.
    await nft.set([api]);
    expect(await nft.read()).toEqual([api]);

    await nft.set([]);
    expect(await nft.read()).toEqual([]);
    expect(who('127.0.0.1')).toBe('parent');
    expect(who('10.77.0.1')).toBe('parent');
  });

  it('moves only new connections: one established through the redirect stays with the copy after it is removed', async () => {
    await nft.set([api]);
    const code = `const s = require('net').connect(6443, '127.0.0.1'); const got = []; s.on('data', (d) => { got.push(String(d).trim()); if (got.length === 1) process.stdout.write('ready\\n'); if (got.length === 2) { console.log(got.join(' ')); s.destroy(); } }); process.stdin.once('data', () => s.write('again\\n'));`;
    const [cmd, ...args] = inNs(process.execPath, '-e', code);
    const client = spawn(cmd!, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    client.stdout!.setEncoding('utf8').on('data', (s: string) => {
      out += s;
    });
    await expect.poll(() => out, { timeout: 10_000 }).toContain('ready');
    await nft.set([]);
    expect(who('127.0.0.1'), 'a new connection').toBe('parent');
    client.stdin!.write('go\n');
    await expect.poll(() => out, { timeout: 10_000 }).toContain('copy copy');
  });

  it('refuses to read a table holding a rule it did not write, and says what nft said', async () => {
    await nft.set([]);
    execFileSync(inNs('nft')[0]!, [...inNs('nft').slice(1), '-f', '-'], {
      input: 'table inet lastseen {\n chain prerouting {\n type nat hook prerouting priority -90;\n tcp dport 80 redirect to :8080\n }\n}\n',
    });
    await expect(nft.read()).rejects.toThrow(/a prerouting rule lastseen did not write/);
    // set() replaces the table whole, the foreign rule with it.
    await nft.set([api]);
    expect(await nft.read()).toEqual([api]);
    await nft.set([]);
    await expect(new NftRedirector(['/nonexistent/nft']).read()).rejects.toThrow(/\/nonexistent\/nft not found .*apt-get install nftables/);
  });
});
