// The checkpoint's manifest in the kubelet's folder: observed, not assumed, and claimed only once
// its result is known.
//
// The core counts a checkpoint active (`checkpoint.active`) from the reports of its own writes.
// But the folder is the node's, and anything can change it: an operator's `rm`, a config tool
// that owns /etc/kubernetes/manifests, a folder removed and re-created. A manifest gone from under
// an Active parent leaves it uncovered while every report still says Active. So the agent re-reads
// the folder (on a schedule and on inotify) and feeds what it finds (`manifest` input):
// - Active, and the manifest is gone or no longer what the agent writes (`changed`): the core
//   counts the checkpoint inactive, says so (a Warning Event), and the reconcile step writes it
//   again at once; the write's success is announced as `CheckpointRestored`.
// - Active, and the file is what the agent wrote: counted active (a write whose report was lost).
// - Not Active (Healthy, Starting, HandingOver…), and a manifest is there although the core counts
//   none: counted active, so it is retired (a copy nobody covers with would fight the parent for
//   its ports).
// - While an activation, retire or collection is in flight, what the folder shows says nothing:
//   that action's own report settles it (the agent also drops a reading taken before a write ended).
//
// Claims: `CheckpointActivated` (Normal) only after the manifest was written (the `activated`
// report of an activation this core asked for, not a rewrite of one already running); a failed
// activation is a Warning `ActivationFailed` with the error, once per run of failures;
// `CheckpointCollected` only after the collection, whose live read may still cancel it.
//
// Owns `ParentState.manifestLost`; clears `checkpointHolder` when the copy is found gone.
// Pure: times are the observer's monotonic milliseconds.
import type { Action, Input, ParentState } from './types.js';

/**
 * The checkpoint's manifest as the agent read it: absent (no file, or no folder); present but not
 * what the agent wrote from the stored copy (`changed`); or what it wrote (`ours`).
 */
export type ManifestFile = 'absent' | 'changed' | 'ours';

/** A manifest the core counted active and found gone or changed, until it is written again. */
export interface ManifestLoss {
  file: 'absent' | 'changed';
  at: number;
}

const secs = (ms: number) => `${Math.round(ms / 100) / 10}s`;

function event(actions: Action[], eventType: 'Normal' | 'Warning', reason: string, message: string): void {
  actions.push({ type: 'event', eventType, reason, message });
}

/** A manifest action in flight: its own report says what the file is. */
function manifestBusy(s: ParentState): boolean {
  return s.inflight.activate !== undefined || s.inflight.retire !== undefined || s.inflight.collect !== undefined;
}

/**
 * The reading says what the core already counts on (no manifest where none is counted active, the
 * stored copy as counted where one is): feeding it would change nothing. The agent skips those.
 */
export function manifestAgrees(s: ParentState, file: ManifestFile): boolean {
  return file === (s.checkpoint.active ? 'ours' : 'absent');
}

/** What the folder shows, brought into the core's picture of the node's files (see the header). */
export function observeManifest(s: ParentState, file: ManifestFile, now: number, actions: Action[]): void {
  // Nothing stored: nothing this core wrote or could write (the agent's own copy is not the core's).
  if (!s.checkpoint.stored || manifestBusy(s)) return;
  if (s.state === 'Active') {
    if (file !== 'ours') {
      if (!s.checkpoint.active) return; // not written yet, or its write failed: the retry writes it
      s.checkpoint = { ...s.checkpoint, active: false, exclusive: false };
      // The kubelet stops that copy, and the one written again has its uid (a static pod's uid is a
      // hash of its manifest): kept as the holder not to count, the new copy's beats never would
      // (no exit watch, no hang watch beside it), as at a retire (decide.ts).
      s.checkpointHolder = null;
      s.manifestLost = { file, at: now };
      event(
        actions,
        'Warning',
        file === 'absent' ? 'ManifestRemoved' : 'ManifestChanged',
        file === 'absent'
          ? `${s.id}: the checkpoint's manifest was removed from the kubelet's folder by something other than lastseen while the parent is down; writing it again`
          : `${s.id}: the checkpoint's manifest in the kubelet's folder was changed by something other than lastseen while the parent is down; writing the stored copy again`,
      );
      return;
    }
    // Written though no write was reported (its report lost): counted active. Whether without port
    // sharing is not known; counted shared, so a copy that must hold its ports alone is rewritten.
    if (!s.checkpoint.active) {
      delete s.retry.activate;
      s.checkpoint = { ...s.checkpoint, active: true, exclusive: false };
    }
    return;
  }
  // A collection removes the manifest itself; elsewhere a manifest nobody asked for is retired.
  if (s.state !== 'Orphaned' && file !== 'absent' && !s.checkpoint.active) {
    s.checkpoint = { ...s.checkpoint, active: true, exclusive: false };
    event(
      actions,
      'Warning',
      'ManifestUnexpected',
      `${s.id}: a checkpoint manifest is in the kubelet's folder although the parent is ${s.state}; removing it so the copy does not take the parent's ports`,
    );
  }
}

/**
 * Events that claim a result, from the report of the action (`prev`: the state before the report).
 * Called after the report was observed.
 */
export function claimResult(prev: ParentState, s: ParentState, input: Input, now: number, actions: Action[]): void {
  switch (input.type) {
    case 'activated': {
      delete s.manifestLost;
      // A rewrite of a running copy (port sharing on or off) or a copy found active is no activation.
      if (prev.inflight.activate === undefined || prev.checkpoint.active) return;
      const lost = prev.manifestLost;
      if (lost && prev.state === 'Active' && lost.at >= prev.since) {
        event(
          actions,
          'Normal',
          'CheckpointRestored',
          `${s.id}: the checkpoint's manifest, ${lost.file === 'absent' ? 'removed' : 'changed'} ${secs(now - lost.at)} ago, was written again; the checkpoint runs as a static pod`,
        );
        return;
      }
      event(actions, 'Normal', 'CheckpointActivated', `${s.id}: ${s.reason.message}; the checkpoint's manifest is written, running it as a static pod`);
      return;
    }
    case 'retired':
      delete s.manifestLost;
      return;
    case 'actionFailed': {
      // Once per run of failures, and only for an activation this core asked for.
      if (input.action !== 'activate' || prev.inflight.activate === undefined || prev.retry.activate !== undefined) return;
      const retryIn = (s.retry.activate?.at ?? now) - now;
      event(
        actions,
        'Warning',
        'ActivationFailed',
        `${s.id}: the checkpoint's manifest could not be written (${input.error}); the parent is not covered, trying again in ${secs(retryIn)}`,
      );
      return;
    }
    case 'collected':
      delete s.manifestLost;
      if (prev.inflight.collect === undefined) return;
      event(
        actions,
        'Normal',
        'CheckpointCollected',
        `${s.id}: the api-server has scheduled no pod for this parent here for ${Math.round(s.policy.gcGraceMs / 1000)}s, and a live read said the same; its checkpoint was removed`,
      );
      return;
    default:
      return;
  }
}
