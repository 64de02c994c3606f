// The idle agent's request figure counts only the kinds of request the agent makes (bench section 3b).
import { describe, expect, it } from 'vitest';
import { agentMakes } from '../../bench/sections/apicost.js';

describe('agentMakes', () => {
  it("counts the agent's probe, reads, watches and writes of its own objects", () => {
    for (const k of [
      'GET /readyz',
      'WATCH pods',
      'LIST leases',
      'GET secrets',
      'PUT nodecheckpoints/status',
      'POST events',
      'POST serviceaccounts/token',
      'GET nodes',
    ])
      expect(agentMakes(k), k).toBe(true);
  });
  it("leaves out the api-server's own traffic and writes the agent is not allowed", () => {
    for (const k of ['PUT leases', 'GET openapi/v3', 'POST endpoints', 'GET endpoints', 'WATCH flowschemas', 'PUT configmaps', 'DELETE pods'])
      expect(agentMakes(k), k).toBe(false);
  });
});
