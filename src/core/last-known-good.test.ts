import { describe, expect, it } from 'vitest';
import { beat, feed, fixtures, POD } from './fixtures.test-helpers.js';
import { judgingWindowMs } from './freshness.js';
import { captureFailed, captureWakes, observeCaptured, reconcileCapture } from './last-known-good.js';
import type { Action } from './types.js';

const HOUR = 3_600_000;

describe('last known good: capture only from a Ready pod', () => {
  it('a Healthy parent whose pod runs a new spec is captured once; the report stores it', () => {
    const { state: s, now } = structuredClone(fixtures().Healthy!);
    s.pod = { ...POD, specHash: 'h2' };
    const actions: Action[] = [];
    // A new spec over a stored copy: only once its Ready has held one window.
    const settledAt = s.readySince! + judgingWindowMs(s);
    expect(captureWakes(s)).toEqual([settledAt]);
    reconcileCapture(s, Math.max(now, settledAt - 1), actions);
    expect(actions).toEqual([]);
    reconcileCapture(s, settledAt, actions);
    reconcileCapture(s, settledAt, actions);
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
    reconcileCapture(starting.state, starting.now + HOUR, actions);
    const unprobed = structuredClone(fixtures().Healthy!);
    unprobed.state.pod = { ...POD, specHash: 'h2', ready: false };
    unprobed.state.phaseUnprobed = true;
    reconcileCapture(unprobed.state, unprobed.now + HOUR, actions);
    expect(actions).toEqual([]);
    unprobed.state.pod.ready = true;
    reconcileCapture(unprobed.state, unprobed.now + HOUR, actions);
    expect(actions.map((a) => a.type)).toEqual(['capture']);
  });

  it('one Ready beat of a new spec between Starting ones is not captured: the stored copy stays', () => {
    // On a real kubelet a bad kube-apiserver's sidecar once reported Ready for 4 s (its process
    // exited in the middle of the proof); captured, that spec would have replaced the only copy
    // that could bring the node back.
    const { state: s, now } = structuredClone(fixtures().Healthy!);
    s.pod = { ...POD, specHash: 'bad' };
    const r = feed(s, [
      [now + 1_000, { type: 'beat', beat: beat('Ready', { sequence: 50 }) }],
      [now + 5_000, { type: 'beat', beat: beat('Starting', { sequence: 51 }) }],
      [now + 10_000, { type: 'beat', beat: beat('Starting', { sequence: 52 }) }],
      [now + 60_000, { type: 'beat', beat: beat('Starting', { sequence: 53 }) }],
    ]);
    expect(r.actions.filter((a) => a.type === 'capture')).toEqual([]);
    expect(r.state.checkpoint.specHash).not.toBe('bad');
  });

  it('a first capture (nothing stored yet) does not wait', () => {
    const { state: s, now } = structuredClone(fixtures().Healthy!);
    s.checkpoint = { ...s.checkpoint, stored: false, specHash: null };
    s.pod = { ...POD, specHash: 'h1' };
    const actions: Action[] = [];
    reconcileCapture(s, now, actions);
    expect(actions.map((a) => a.type)).toEqual(['capture']);
  });

  it('a failed capture forgets the spec in flight, so the next Ready spec is asked for after the back-off', () => {
    const { state: s } = structuredClone(fixtures().Healthy!);
    s.capturingHash = 'h2';
    captureFailed(s);
    expect(s.capturingHash).toBeNull();
  });
});
