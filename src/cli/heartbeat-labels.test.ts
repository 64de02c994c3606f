import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { PROBE_MODES, parseLabelsFile, register } from './heartbeat.js';

describe('parseLabelsFile', () => {
  it('reads the downward API format and skips malformed lines', () => {
    expect(parseLabelsFile('app="kube-apiserver"\ncomponent="a \\"b\\""\nbroken\ntier=unquoted\n')).toEqual({ app: 'kube-apiserver', component: 'a "b"' });
  });
});

describe('heartbeat --help', () => {
  it('says what each probe mode proves, and what none does to last known good and to a retire', () => {
    const program = new Command();
    register(program);
    const help = program.commands.find((c) => c.name() === 'heartbeat')!;
    let out = '';
    help.configureOutput({ writeOut: (s) => (out += s) });
    help.outputHelp();
    expect(out).toContain(PROBE_MODES.trim());
    for (const mode of ['http://HOST:PORT/PATH', 'tcp://HOST:PORT', 'none (the default)']) expect(PROBE_MODES).toContain(mode);
    expect(PROBE_MODES).toContain('shareProcessNamespace: true');
    expect(PROBE_MODES).toMatch(
      /last known good, retires a checkpoint or ends a hand-over on an\s+unprobed Ready only once the api-server reports the pod's own/,
    );
  });
});
