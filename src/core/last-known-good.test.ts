import { describe, expect, it } from 'vitest';
import { fixtures, POD } from './fixtures.test-helpers.js';
import { captureFailed, observeCaptured, reconcileCapture } from './last-known-good.js';
import type { Action } from './types.js';

describe('last known good: capture only from a Ready pod', () => {
  it('a Healthy parent whose pod runs a new spec is captured once; the report stores it', () => {
    const { state: s, now } = structuredClone(fixtures().Healthy!);
    s.pod = { ...POD, specHash: 'h2' };
    const actions: Action[] = [];
    reconcileCapture(s, now, actions);
    reconcileCapture(s, now, actions);
    expect(actions).toEqual([{ type: 'capture', pod: s.pod, reason: { code: 'NewSpec', message: 'the Ready parent runs a new spec' } }]);
    expect(s.capturingHash).toBe('h2');
    observeCaptured(s, 'h2');
    expect(s.checkpoint).toMatchObject({ stored: true, specHash: 'h2' });
    expect(s.capturingHash).toBeNull();
  });

  it('never from a Starting parent, nor from an unprobed Ready the api-server does not call Ready', () => {
    const starting = structuredClone(fixtures().Starting!);
    starting.state.pod = { ...POD, specHash: 'h2' };
    const actions: Action[] = [];
    reconcileCapture(starting.state, starting.now, actions);
    const unprobed = structuredClone(fixtures().Healthy!);
    unprobed.state.pod = { ...POD, specHash: 'h2', ready: false };
    unprobed.state.phaseUnprobed = true;
    reconcileCapture(unprobed.state, unprobed.now, actions);
    expect(actions).toEqual([]);
    unprobed.state.pod.ready = true;
    reconcileCapture(unprobed.state, unprobed.now, actions);
    expect(actions.map((a) => a.type)).toEqual(['capture']);
  });

  it('a failed capture forgets the spec in flight, so the next Ready spec is asked for after the back-off', () => {
    const { state: s } = structuredClone(fixtures().Healthy!);
    s.capturingHash = 'h2';
    captureFailed(s);
    expect(s.capturingHash).toBeNull();
  });
});
