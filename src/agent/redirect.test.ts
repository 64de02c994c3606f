import { describe, expect, it } from 'vitest';
import { CONNTRACK_KEEPER, checkRedirect, nftScript, type Redirect, redirectsFromListing } from './redirect.js';

const api: Redirect = { parent: 'kube-system/kube-apiserver', port: 6443, toPort: 16443, exceptAddress: '127.0.0.2' };

describe('the nftables script', () => {
  it('writes the whole table in one transaction: created, emptied, then both chains with one rule per address family', () => {
    const s = nftScript([api]);
    const lines = s.trim().split('\n');
    expect(lines.slice(0, 2)).toEqual(['table inet lastseen', 'delete table inet lastseen']);
    expect(s.match(/ct state new counter comment/g), 'conntrack kept on in both chains').toHaveLength(2);
    expect(s).toContain('type nat hook output priority -90; policy accept;');
    expect(s).toContain('type nat hook prerouting priority -90; policy accept;');
    expect(s).toContain(
      'meta nfproto ipv4 ip daddr != 127.0.0.2 fib daddr type local tcp dport 6443 redirect to :16443 comment "kube-system/kube-apiserver 127.0.0.2"',
    );
    expect(s).toContain('meta nfproto ipv6 ip6 daddr != ::1 fib daddr type local tcp dport 6443 redirect to :16443');
    expect(s.match(/redirect to/g)).toHaveLength(3);
  });

  it('with no redirect, keeps the table, its chains and the rule that keeps conntrack on', () => {
    const s = nftScript([]);
    expect(s).not.toContain('redirect to');
    expect(s).toContain('chain output');
    expect(s).toContain('chain prerouting');
    expect(s.match(/ct state new counter/g)).toHaveLength(2);
  });

  it('refuses a bad redirect, naming the parent and the field', () => {
    expect(() => nftScript([{ ...api, toPort: 70_000 }])).toThrow(/kube-system\/kube-apiserver.*toPort/);
    expect(() => nftScript([{ ...api, exceptAddress: '10.0.0.1' }])).toThrow(/exceptAddress must be a loopback address/);
    expect(() => nftScript([{ ...api, parent: 'kube-apiserver"; flush ruleset; "' }])).toThrow(/parent must be namespace\/key/);
    expect(() => checkRedirect({ ...api, toPort: 6443 })).toThrow(/the parent's own port/);
    expect(() => nftScript([api, { ...api, parent: 'kube-system/other', toPort: 16444 }])).toThrow(/two redirects for port 6443/);
  });
});

/** What nft 1.0.6 prints for the table nftScript([api]) writes (prerouting part; measured on this machine). */
const listing = (rule: object) =>
  JSON.stringify({
    nftables: [
      { metainfo: { version: '1.0.6', json_schema_version: 1 } },
      { table: { family: 'inet', name: 'lastseen', handle: 2 } },
      { chain: { family: 'inet', table: 'lastseen', name: 'prerouting', handle: 2, type: 'nat', hook: 'prerouting', prio: -90, policy: 'accept' } },
      { rule: { family: 'inet', table: 'lastseen', chain: 'prerouting', handle: 5, ...rule } },
    ],
  });
const ours = {
  comment: 'kube-system/kube-apiserver 127.0.0.2',
  expr: [
    { match: { op: '==', left: { fib: { result: 'type', flags: ['daddr'] } }, right: 'local' } },
    { match: { op: '==', left: { payload: { protocol: 'tcp', field: 'dport' } }, right: 6443 } },
    { redirect: { port: 16443 } },
  ],
};

describe('reading the table back', () => {
  it('gives the redirects it holds', () => {
    expect(redirectsFromListing(listing(ours))).toEqual([api]);
    expect(redirectsFromListing(listing({ comment: CONNTRACK_KEEPER, expr: [{ counter: { packets: 0, bytes: 0 } }] }))).toEqual([]);
  });

  it('refuses a rule lastseen did not write, and a listing that is not one', () => {
    expect(() => redirectsFromListing(listing({ ...ours, comment: undefined }))).toThrow(/a prerouting rule lastseen did not write/);
    expect(() => redirectsFromListing(listing({ expr: [{ accept: null }] }))).toThrow(/did not write/);
    expect(() => redirectsFromListing('{"nftables": 3}')).toThrow(/not a listing nft writes/);
    expect(() => redirectsFromListing('garbage')).toThrow(/not JSON/);
    expect(() => redirectsFromListing(listing({ ...ours, comment: 'x/y 127.0.0.2', expr: [...ours.expr.slice(0, 2), { redirect: { port: 6443 } }] }))).toThrow(
      /own port/,
    );
  });
});
