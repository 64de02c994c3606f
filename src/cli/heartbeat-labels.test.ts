import { describe, expect, it } from 'vitest';
import { parseLabelsFile } from './heartbeat.js';

describe('parseLabelsFile', () => {
  it('reads the downward API format and skips malformed lines', () => {
    expect(parseLabelsFile('app="kube-apiserver"\ncomponent="a \\"b\\""\nbroken\ntier=unquoted\n')).toEqual({ app: 'kube-apiserver', component: 'a "b"' });
  });
});
