// Builders for the core's table tests: each fixture drives decide() from a fresh start into one
// named state, so the tables test reachable states rather than hand-made ones.
import type { ParentPolicy } from '../policy/policy.js';
import { decide, initialState } from './decide.js';
import type { Action, Beat, Decision, Input, ParentState, Phase } from './types.js';

export const POLICY: ParentPolicy = {
  intervalMs: 1000,
  windowMs: 4000,
  startupGraceMs: 6000,
  startTimeoutMs: 30_000,
  handoverTimeoutMs: 10_000,
  handoverBackoff: { initialMs: 5000, maxMs: 40_000 },
  gcGraceMs: 60_000,
  whenApiUnreachable: 'hold',
  handover: 'release',
  channels: ['lease', 'local'],
};

export const POD = { uid: 'u1', name: 'kube-apiserver-n1', specHash: 'h1' };

let seq = 0;
export function beat(phase: Phase, over: Partial<Beat> = {}): Beat {
  seq += 1;
  return { channel: 'lease', holder: POD.name, holderUid: POD.uid, role: 'parent', phase, sequence: seq, renewTime: `t${seq}`, ...over };
}

export interface Run {
  state: ParentState;
  now: number;
  last: Decision;
  all: Decision[];
}

export function drive(state: ParentState, steps: Array<[number, Input]>): Run {
  let s = state;
  let last: Decision = { state, actions: [], wakeAt: null };
  const all: Decision[] = [];
  let now = 0;
  for (const [t, input] of steps) {
    now = t;
    last = decide(s, input, t);
    all.push(last);
    s = last.state;
  }
  return { state: s, now, last, all };
}

export function start(policy: ParentPolicy = POLICY, stored = true): ParentState {
  const s = initialState({
    namespace: 'kube-system',
    key: 'kube-apiserver',
    policy,
    now: 0,
    checkpoint: { stored, active: false, specHash: stored ? 'h1' : null },
  });
  return drive(s, [
    [0, { type: 'api', reachable: true }],
    [0, { type: 'pod', pod: POD }],
  ]).state;
}

/** Fixtures: a run that ends in each named state; `now` is the time of its last input. */
export function fixtures(policy: ParentPolicy = POLICY): Record<string, Run> {
  const base = start(policy);
  const pending = drive(base, [[1000, { type: 'beat', beat: beat('Ready') }]]); // baseline only
  const healthy = drive(pending.state, [[2000, { type: 'beat', beat: beat('Ready') }]]);
  const starting = drive(pending.state, [[2000, { type: 'beat', beat: beat('Starting') }]]);
  const silent = drive(healthy.state, [[6500, { type: 'tick' }]]);
  const active = drive(silent.state, [
    [6600, { type: 'confirmed', outcome: 'unchanged' }],
    [6700, { type: 'activated' }],
  ]);
  const handingOver = drive(active.state, [
    [7000, { type: 'beat', beat: beat('Starting') }],
    [7100, { type: 'retired' }],
  ]);
  const orphaned = drive(healthy.state, [
    [3000, { type: 'beat', beat: beat('Ready') }],
    [3000, { type: 'pod', pod: null }],
    [63_000, { type: 'tick' }],
  ]);
  return { Pending: pending, Healthy: healthy, Starting: starting, Silent: silent, Active: active, HandingOver: handingOver, Orphaned: orphaned };
}

/** Drive decide() through `steps` and collect every action asked for on the way. */
export function feed(s: ParentState, steps: Array<[number, Input]>): { state: ParentState; actions: Action[] } {
  const actions: Action[] = [];
  for (const [t, input] of steps) {
    const d = decide(s, input, t);
    actions.push(...d.actions);
    s = d.state;
  }
  return { state: s, actions };
}
