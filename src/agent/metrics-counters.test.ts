// Counters that alerts take increase() of are exported at 0 before their first event (deploy/monitoring/rules.yaml).
import { describe, expect, it } from 'vitest';
import { AgentMetrics, BAD_INPUT_SOURCES, HANDOVER_RESULTS } from './metrics.js';

describe('AgentMetrics', () => {
  it('exports the counters that alerts take increase() of at 0 before the first event', async () => {
    const text = await new AgentMetrics(false).registry.metrics();
    for (const result of HANDOVER_RESULTS) expect(text).toContain(`lastseen_handovers_total{result="${result}"} 0\n`);
    for (const source of BAD_INPUT_SOURCES) expect(text).toContain(`lastseen_bad_inputs_total{source="${source}"} 0\n`);
  });

  it('counts on from the pre-initialised 0', async () => {
    const m = new AgentMetrics(false);
    m.handovers.inc({ result: 'failed' });
    expect(await m.registry.metrics()).toContain('lastseen_handovers_total{result="failed"} 1\n');
  });
});
