import { describe, expect, it } from 'vitest';
import { classifyKubeError } from './errors.js';

const api = (code: number, body?: unknown) => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body });
const fetchFailed = (message: string, code: string) => new TypeError('fetch failed', { cause: Object.assign(new Error(message), { code }) });
const status = (reason: string, message: string) => JSON.stringify({ kind: 'Status', status: 'Failure', reason, message });

describe('classifyKubeError', () => {
  it.each<[string, unknown, string, RegExp]>([
    ['409', api(409, status('Conflict', 'the object has been modified')), 'conflict', /lease ns\/x: HTTP 409: the object has been modified/],
    ['410', api(410, status('Expired', 'too old resource version')), 'gone', /relist/],
    ['404', api(404, status('NotFound', 'leases "x" not found')), 'notFound', /not found/],
    ['403', api(403, { reason: 'Forbidden', message: 'cannot update' }), 'forbidden', /RBAC/],
    ['401 without body', api(401), 'forbidden', /HTTP 401 \(/],
    ['422', api(422, status('Invalid', 'spec.renewTime: bad')), 'invalid', /spec.renewTime/],
    ['429', api(429, 'slow down'), 'unreachable', /slow down/],
    ['503', api(503), 'unreachable', /HTTP 503/],
    [
      'refused',
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { name: 'FetchError', type: 'system', code: 'ECONNREFUSED' }),
      'unreachable',
      /ECONNREFUSED/,
    ],
    // client-node 2.x over undici's fetch: `TypeError: fetch failed`, the network error in `cause`.
    ['fetch: refused', fetchFailed('connect ECONNREFUSED 127.0.0.1:6443', 'ECONNREFUSED'), 'unreachable', /fetch failed: connect ECONNREFUSED/],
    ['fetch: reset', fetchFailed('other side closed', 'UND_ERR_SOCKET'), 'unreachable', /other side closed \(the api-server did not answer/],
    ['fetch: pool dropped', fetchFailed('The client is destroyed', 'UND_ERR_DESTROYED'), 'unreachable', /destroyed/],
    ['fetch: not a network cause', fetchFailed('invalid header', 'UND_ERR_INVALID_ARG'), 'invalid', /unexpected error: fetch failed/],
    ['abort', Object.assign(new Error('The operation was aborted.'), { name: 'AbortError', type: 'aborted' }), 'unreachable', /timed out/],
    ['timeout signal', Object.assign(new Error('timeout'), { name: 'TimeoutError' }), 'unreachable', /timed out/],
    ['a bug', new TypeError('x is not a function'), 'invalid', /unexpected error: x is not a function/],
    ['a thrown string', 'boom', 'invalid', /boom/],
    ['undefined', undefined, 'invalid', /unexpected/],
  ])('%s', (_n, err, kind, message) => {
    const k = classifyKubeError(err, 'lease ns/x');
    expect(k.kind).toBe(kind);
    expect(k.message).toMatch(message);
    expect(k.message.startsWith('lease ns/x: ')).toBe(true);
  });

  it('keeps the Status reason', () => {
    expect(classifyKubeError(api(409, status('Conflict', 'm')), 'o')).toMatchObject({ status: 409, reason: 'Conflict' });
  });
});
