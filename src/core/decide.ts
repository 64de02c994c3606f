// The decision core: one parent key on one node. decide() is the skeleton; each rule lives in its
// own module and owns its piece of ParentState:
// - freshness.ts   beats, the window a parent is judged by, the grace, Healthy/Starting/Silent
// - silence.ts     a silence is confirmed by a live read before it is covered
// - handover.ts    retire on return, hand-over windows and back-off, the persisted record
// - overlap.ts     hand-over beside a port-sharing copy: exits counted, fallback to release
// - known-bad.ts   no hand-over to a spec on probation (the verdicts: probation.ts)
// - redirect.ts    hand-over behind the node's redirect to a copy on its own port
// - fence.ts       a hung parent is fenced
// - gc.ts          collection only with the api-server's word
// - last-known-good.ts  capture only from a Ready pod
// - boot.ts        the reboot rule; a boot voids deadlines
// - manifest.ts    the manifest as observed, and actions claimed once their result is known
// - actions.ts     each file action in flight and retried on its own
// - transitions.ts how a rule says what it decided (transitions, notes, Events, covers)
// The rules themselves are docs/architecture.md's and the design's; each module's header says
// what its rule is for.
//
// A call: observe the input (inputs change what the core knows, never what it does), then step
// the state machine until it rests (each step is one rule's judgement for the current state), then
// reconcile (bring the node's files in line with the state: desired vs. reported), then work out
// when the answer could change without new input (`wakeAt`).
//
// Pure and synchronous: no I/O, no clock, no randomness. The caller feeds inputs and ticks at
// `wakeAt`, carries out the actions, and reports their results back as inputs.
import { actionWakes, ask, failed, succeeded } from './actions.js';
import { copyTrust, emptyTrust } from './beats.js';
import { bootGrace, kubeletQuestion, noGraceReason, observeFirstVerdict, observeKubelet, recordCarriesOver } from './boot.js';
import { observeDeleting } from './deletion.js';
import {
  copyHang,
  copyRestarted,
  emptyHang,
  fenceBesideCopy,
  fencedEvent,
  fenceFailed,
  fenceWakes,
  judgeFencedNotBack,
  judgeHang,
  observeFenced,
} from './fence.js';
import {
  freshnessWakes,
  judgeLive,
  noteWindow,
  observeListedWhileUnreachable,
  observeBeat as observeParentBeat,
  regrace,
  takeHeldBeat,
  windowReason,
} from './freshness.js';
import {
  gcWake,
  judgeOrphaned,
  judgeScheduled,
  observeCollected,
  observeScheduling,
  observeSchedulingUnknown,
  reconcileCollect,
  schedulingLost,
} from './gc.js';
import { capBackoff, handoverWakes, handoverWindowMs, initialHandover, judgeHandingOver, judgeReturn, type RecoveredHandover } from './handover.js';
import { exclusiveCopy, observeSpec, verdictWake } from './known-bad.js';
import { captureFailed, captureWakes, observeCaptured, reconcileCapture } from './last-known-good.js';
import { claimResult, observeManifest } from './manifest.js';
import { copyRewritten, emptyExitWatch, exitsUnknown, observeCopy, observeExits } from './overlap.js';
import { PROBATION, recovered as recoveredVerdict } from './probation.js';
import { copyChanged, emptyRedirect, observeCopyForRedirect, observeRedirected, reconcileRedirect, redirectWake } from './redirect.js';
import { answerLiveRead, judgeSilence, silenceWake } from './silence.js';
import { R } from './transitions.js';
import type { Action, Beat, CheckpointInfo, Decision, Input, ParentPolicy, ParentState } from './types.js';

export { HANDOVER_ATTEMPTS_BEFORE_GROWTH, handoverJitter, handoverToPersist, handoverWindowMs, type RecoveredHandover } from './handover.js';
export { OWN_SPEC_BIND_SLACK_MS } from './overlap.js';
export { CONFIRM_RETRY_MS, CONFIRM_TIMEOUT_MS } from './silence.js';

/** Bound on state-machine steps per call; each step changes state, so a few suffice. */
const MAX_STEPS = 8;

export interface InitialStateArgs {
  namespace: string;
  key: string;
  policy: ParentPolicy;
  now: number;
  checkpoint?: CheckpointInfo;
  /** Whether an api-server answers the agent; undefined: the agent has not heard yet (its first probe is out). */
  apiReachable?: boolean;
  /** A hand-over the agent was in when it stopped (persisted by the caller), to be finished. */
  handover?: RecoveredHandover;
  /** The node rebooted since the agent last ran (its recorded boot id differs): the reboot rule (boot.ts). */
  rebooted?: boolean;
  /** The hand-over record was written under an earlier boot id: a boot voids deadlines (boot.ts). */
  recordFromEarlierBoot?: boolean;
  /** The node rebooted and the agent has not yet heard whether its kubelet reached an api-server since (boot.ts observeKubelet). */
  kubeletUnheard?: boolean;
}

/** A parent as the agent first knows it after starting: grace running, nothing seen yet. */
export function initialState(a: InitialStateArgs): ParentState {
  const checkpoint = a.checkpoint ?? { stored: false, active: false, specHash: null };
  const recovered = checkpoint.active;
  const resumed = !recovered && checkpoint.stored && a.handover !== undefined && a.handover.inProgress !== false && recordCarriesOver(a);
  const { noGrace, untilHeard } = bootGrace(a);
  return {
    id: `${a.namespace}/${a.key}`,
    namespace: a.namespace,
    key: a.key,
    policy: a.policy,
    state: recovered ? 'Active' : resumed ? 'HandingOver' : 'Pending',
    since: a.now,
    reason: recovered
      ? R('RecoveredActive', 'the checkpoint was active when the agent started')
      : resumed
        ? R('RecoveredHandover', 'a hand-over was in progress when the agent stopped; its deadline still holds')
        : noGrace
          ? noGraceReason()
          : R('AgentStarted', 'waiting for a first beat'),
    graceUntil: noGrace ? a.now : a.now + a.policy.startupGraceMs,
    ...(untilHeard && !recovered && !resumed ? { graceEndsIfUnreachable: true } : {}),
    ...(kubeletQuestion(a) && !recovered && !resumed ? { graceEndsIfKubeletBlind: true } : {}),
    lastChangeAt: null,
    lastLocalChangeAt: null,
    phase: null,
    holderUid: null,
    startingSince: null,
    readySince: null,
    rounds: [],
    seen: {},
    declaredIntervalMs: null,
    windowNotedMs: null,
    checkpointPhase: null,
    checkpoint: { ...checkpoint },
    apiReachable: a.apiReachable ?? false,
    pod: null,
    unscheduledSince: null,
    deleting: null,
    confirm: null,
    inflight: {},
    capturingHash: null,
    handover: initialHandover(a.policy, a.now, resumed ? a.handover! : null),
    knownBad: a.handover?.knownBad ? recoveredVerdict(a.handover.knownBad, a.now, a.recordFromEarlierBoot === true, PROBATION[a.policy.handover]) : null,
    exitWatch: emptyExitWatch(),
    overlapFallback: null,
    checkpointHolder: null,
    retry: {},
    beatTrust: emptyTrust(),
    hang: emptyHang(),
    redirect: emptyRedirect(),
  };
}

function copy(s: ParentState): ParentState {
  const c: ParentState = {
    ...s,
    policy: s.policy,
    seen: { ...s.seen },
    checkpoint: { ...s.checkpoint },
    inflight: { ...s.inflight },
    retry: { ...s.retry },
    handover: { ...s.handover },
    pod: s.pod ? { ...s.pod } : null,
    rounds: [...s.rounds],
    exitWatch: { ...s.exitWatch, base: s.exitWatch.base ? { ...s.exitWatch.base } : null },
    overlapFallback: s.overlapFallback ? { ...s.overlapFallback } : null,
    beatTrust: copyTrust(s.beatTrust),
    hang: copyHang(s.hang),
    redirect: { ...s.redirect },
  };
  if (c.confirm) c.confirm = { ...c.confirm };
  return c;
}

export { beatFingerprint, changedBeat, judgingWindowMs, WINDOW_INTERVALS } from './freshness.js';

export function decide(prev: ParentState, input: Input, now: number): Decision {
  const s = copy(prev);
  const actions: Action[] = [];
  observe(s, input, now);
  if (input.type === 'manifest') observeManifest(s, input.file, now, actions);
  claimResult(prev, s, input, now, actions);
  if (input.type === 'fenced') fencedEvent(s, input, actions);
  if (s.beatRefused) actions.push(s.beatRefused);
  delete s.beatRefused;
  if (s.listPods) actions.push(s.listPods);
  delete s.listPods;
  noteWindow(s, actions);
  for (let i = 0; i < MAX_STEPS; i++) if (!step(s, now, actions)) break;
  windowReason(s, actions);
  reconcile(s, now, actions);
  return { state: s, actions, wakeAt: wakeAt(s, now) };
}

// ---- observing: inputs change what the core knows, never what it does ----

function observe(s: ParentState, input: Input, now: number): void {
  switch (input.type) {
    case 'tick':
      return;
    case 'beat':
      observeBeat(s, input.beat, now);
      return;
    case 'confirmed': {
      const changedBefore = s.lastChangeAt;
      if (input.outcome === 'changed') observeBeat(s, input.beat, now);
      answerLiveRead(s, input, changedBefore, now);
      return;
    }
    case 'kubelet':
      observeKubelet(s, input.reachedApi, now);
      return;
    case 'api':
      observeFirstVerdict(s, input.reachable, now);
      if (input.reachable === s.apiReachable) return;
      // A fresh start after the api-server returns: watches re-list, beats need a window to show.
      if (input.reachable) s.graceUntil = Math.max(s.graceUntil, now + s.policy.startupGraceMs);
      s.apiReachable = input.reachable;
      exitsUnknown(s);
      schedulingLost(s);
      return;
    case 'schedulingUnknown':
      observeSchedulingUnknown(s);
      return;
    case 'pod': {
      if (!s.apiReachable) {
        // Identity only: who may beat for the key (a surge's new pod), never scheduling or spec.
        const held = observeListedWhileUnreachable(s, input.pod);
        if (held) observeBeat(s, held, now);
        return;
      }
      s.pod = input.pod ? { ...input.pod } : null;
      observeDeleting(s, input);
      // A full list: what an identity-only one named before is no longer needed (beats.ts).
      delete s.beatTrust.listedOnly;
      const held = takeHeldBeat(s);
      if (held) observeBeat(s, held, now);
      observeExits(s, now);
      observeSpec(s, input.pod);
      observeScheduling(s, input.pod, now);
      return;
    }
    case 'policy':
      regrace(s, input.policy, now);
      capBackoff(s, input.policy);
      s.policy = input.policy;
      return;
    case 'captured':
      observeCaptured(s, input.specHash);
      return;
    case 'activated':
    case 'retired':
      succeededManifest(s, input, now);
      return;
    case 'fenced':
      observeFenced(s, input, now, handoverWindowMs(s.policy, 1));
      return;
    case 'collected':
      observeCollected(s);
      return;
    case 'redirected':
      observeRedirected(s, input, now);
      return;
    case 'actionFailed': {
      const a = failed(s, input, now);
      if (a === 'capture') captureFailed(s);
      if (a === 'fence') fenceFailed(s);
      return;
    }
  }
}

/** A beat of the parent (freshness.ts) or of its checkpoint's copy (overlap.ts). */
function observeBeat(s: ParentState, b: Beat, now: number): void {
  if (b.role === 'checkpoint') {
    observeCopy(s, b, now);
    observeCopyForRedirect(s, b, now);
  } else observeParentBeat(s, b, now);
}

/** The manifest was written (activated) or removed (retired): the copy starts afresh. */
function succeededManifest(s: ParentState, input: Extract<Input, { type: 'activated' | 'retired' }>, now: number): void {
  if (input.type === 'activated') {
    succeeded(s, 'activate');
    s.checkpoint = { ...s.checkpoint, active: true, exclusive: input.exclusive === true };
  } else {
    succeeded(s, 'retire');
    s.checkpoint = { ...s.checkpoint, active: false, exclusive: false };
    // The copy is gone. A static pod's uid is a hash of its manifest, so the next activation of the
    // same copy runs under the same uid: kept as the holder not to count, the new copy's beats would
    // never count, and under `handover: redirect` the redirect would never stand (the real-node bed:
    // a second bad rollout of the api-server, the node's port dark until the undo).
    s.checkpointHolder = null;
  }
  copyRewritten(s, input.type === 'activated' ? now : null);
  copyChanged(s);
  copyRestarted(s.hang);
}

// ---- deciding: one state-machine step; returns whether the state changed ----

function step(s: ParentState, now: number, actions: Action[]): boolean {
  if (judgeScheduled(s, now, actions)) return true;
  switch (s.state) {
    case 'Pending':
    case 'Healthy':
    case 'Starting':
      return judgeHang(s, now, actions) ?? judgeFencedNotBack(s, now, actions) ?? judgeLive(s, now, actions);
    case 'Silent': {
      const hung = judgeHang(s, now, actions);
      if (hung !== null) return hung;
      const judged = judgeSilence(s, now, actions);
      return judged === 'again' ? step(s, now, actions) : judged;
    }
    case 'Active':
      fenceBesideCopy(s, now, actions);
      return judgeReturn(s, now, actions);
    case 'HandingOver':
      return judgeHandingOver(s, now, actions);
    case 'Orphaned':
      return judgeOrphaned(s, now, actions);
  }
}

// ---- reconciling: bring the node's files in line with the state (desired vs. reported) ----

function reconcile(s: ParentState, now: number, actions: Action[]): void {
  if (s.state === 'Orphaned') {
    reconcileRedirect(s, now, actions);
    reconcileCollect(s, now, actions);
    return;
  }
  const wantActive = s.state === 'Active';
  const exclusive = exclusiveCopy(s, now);
  const activate: Action = exclusive ? { type: 'activate', reason: s.reason, exclusive: true } : { type: 'activate', reason: s.reason };
  if (wantActive && !s.checkpoint.active && s.checkpoint.stored) ask(s, 'activate', activate, now, actions);
  else if (wantActive && s.checkpoint.active && s.checkpoint.stored && (s.checkpoint.exclusive === true) !== exclusive)
    ask(s, 'activate', activate, now, actions);
  // Behind a redirect the copy retires only once the redirect is gone (handover.ts waits for it).
  if (!wantActive && s.checkpoint.active) ask(s, 'retire', { type: 'retire', reason: s.reason }, now, actions);
  reconcileRedirect(s, now, actions);
  reconcileCapture(s, now, actions);
}

// ---- waking: the earliest time at which the answer could change without new input ----

function wakeAt(s: ParentState, now: number): number | null {
  const times = [
    ...freshnessWakes(s),
    ...captureWakes(s),
    gcWake(s),
    silenceWake(s),
    ...handoverWakes(s),
    verdictWake(s),
    redirectWake(s),
    ...fenceWakes(s),
    ...actionWakes(s),
  ].filter((t): t is number => t !== null && t !== undefined && t > now);
  return times.length === 0 ? null : Math.min(...times);
}
