import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadKubeConfig } from './client.js';
import { inClusterEndpoint, loadEndpoint, tokenFileHeader } from './light-config.js';

const dir = mkdtempSync(join(tmpdir(), 'lastseen-light-config-'));
const noHome = join(dir, 'no-home');
const b64 = (s: string) => Buffer.from(s).toString('base64');

function kubeconfig(name: string, user: string, cluster = 'server: https://10.0.0.1:6443\n    certificate-authority: pki/ca.crt'): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
current-context: x
contexts:
- name: x
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster:
    ${cluster}
users:
- name: u
  user:
${user}
`,
  );
  return file;
}

mkdirSync(join(dir, 'pki'));
writeFileSync(join(dir, 'pki', 'ca.crt'), 'CA');
writeFileSync(join(dir, 'pki', 'u.crt'), 'CERT');
writeFileSync(join(dir, 'pki', 'u.key'), 'KEY');

describe('loadEndpoint (the light client, without client-node)', () => {
  it('reads a client-certificate kubeconfig as kubectl does: relative paths from its own folder', async () => {
    const e = await loadEndpoint(kubeconfig('cert.yaml', '    client-certificate: pki/u.crt\n    client-key: pki/u.key'), {}, noHome)();
    expect(e.server).toBe('https://10.0.0.1:6443');
    expect(e.tls).toEqual({ ca: Buffer.from('CA'), cert: Buffer.from('CERT'), key: Buffer.from('KEY') });
    expect(await e.headers()).toEqual({});
  });

  it('prefers *-data to files, takes a token, insecure-skip-tls-verify and tls-server-name', async () => {
    const file = kubeconfig(
      'data.yaml',
      `    token: abc\n    client-certificate-data: ${b64('C2')}\n    client-key-data: ${b64('K2')}`,
      `server: https://h:6443/\n    certificate-authority-data: ${b64('CA2')}\n    certificate-authority: pki/nope\n    insecure-skip-tls-verify: true\n    tls-server-name: kubernetes`,
    );
    const e = await loadEndpoint(undefined, { KUBECONFIG: file }, noHome)();
    expect(e.server).toBe('https://h:6443');
    expect(e.tls).toEqual({ ca: Buffer.from('CA2'), cert: Buffer.from('C2'), key: Buffer.from('K2'), rejectUnauthorized: false, servername: 'kubernetes' });
    expect(await e.headers()).toEqual({ authorization: 'Bearer abc' });
  });

  it('refuses exec plugins, auth providers, impersonation and proxies by name', () => {
    expect(() => loadEndpoint(kubeconfig('exec.yaml', '    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}'), {}, noHome)).toThrow(
      /user exec is not supported by the heartbeat's light api client/,
    );
    expect(() => loadEndpoint(kubeconfig('as.yaml', '    token: t\n    as: admin'), {}, noHome)).toThrow(/user as is not supported/);
    expect(() => loadEndpoint(kubeconfig('proxy.yaml', '    token: t', 'server: https://h\n    proxy-url: http://p:3128'), {}, noHome)).toThrow(
      /cluster proxy-url is not supported/,
    );
  });

  it('fails as loadKubeConfig fails when there is no source, word for word', () => {
    for (const args of [
      [join(dir, 'nope'), {}],
      [undefined, { KUBECONFIG: '/nonexistent' }],
      [undefined, {}],
    ] as const) {
      const message = (f: () => unknown) => {
        try {
          f();
        } catch (e) {
          return (e as Error).message;
        }
        return 'no error';
      };
      expect(message(() => loadEndpoint(args[0], args[1], noHome))).toBe(message(() => loadKubeConfig(args[0], args[1], noHome)));
    }
  });

  it('in a pod: the service host and port, the service account CA and token', async () => {
    const sa = join(dir, 'sa');
    mkdirSync(sa);
    writeFileSync(join(sa, 'ca.crt'), 'SA-CA');
    writeFileSync(join(sa, 'token'), 'sa-token\n');
    const e = await inClusterEndpoint({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' }, sa)();
    expect(e.server).toBe('https://[fd00::1]:6443');
    expect(e.tls).toEqual({ ca: Buffer.from('SA-CA') });
    expect(await e.headers()).toEqual({ authorization: 'Bearer sa-token' });
  });

  it('re-reads a rotated token file once a minute, not on every request', async () => {
    const file = join(dir, 'rotating-token');
    writeFileSync(file, 'one');
    let now = 0;
    const headers = tokenFileHeader(file, () => now);
    expect(await headers()).toEqual({ authorization: 'Bearer one' });
    writeFileSync(file, 'two');
    now = 59_000;
    expect(await headers()).toEqual({ authorization: 'Bearer one' });
    now = 60_000;
    expect(await headers()).toEqual({ authorization: 'Bearer two' });
  });
});
