// A parent whose pod is being deleted is covered before it stops, under overlap.
//
// A DaemonSet rollout (maxSurge 0), a `kubectl delete pod` or an eviction deletes the parent's pod
// before anything replaces it: its kubelet stops it, and the DaemonSet controller creates the
// successor only once it is gone. The heartbeat sidecar is a native sidecar, stopped only after the
// main container has exited, so its Stopping beat comes when the node's port has already gone dark;
// the api-server says at once that the pod is being deleted (its deletionTimestamp). Under
// `handover: overlap` the copy can start beside the stopping pod (the ports are shared), and under
// `redirect` on its own port, so it is
// activated as soon as the deletion is known; with a preStop pause on the parent's main container
// as long as its copy needs to get Ready, the port is never dark. Under `release` the copy could not
// bind before the pod exits: nothing changes there.
//
// Guards: the api-server answers (its word is the deletion; a deletion is never undone, so a late
// word is late, never wrong); no other pod of the key is listed here (a surge's successor is the
// parent, beats.ts); the beats that keep the parent fresh are that very pod's (holder uid); a
// checkpoint is stored. While those beats last they are not the parent's return: an Active parent is
// not handed back to a pod being deleted (handover.ts).
//
// Owns `ParentState.deleting`. Pure.
import { cover, R } from './transitions.js';
import type { Action, Input, ParentState, Reason } from './types.js';

/** A full pod list (the api-server reachable): the pod being deleted, when no live one is listed. */
export function observeDeleting(s: ParentState, input: Extract<Input, { type: 'pod' }>): void {
  s.deleting = input.pod === null && input.deleting ? { uid: input.deleting.uid, name: input.deleting.name } : null;
}

/** The beats that keep the parent fresh are those of its pod being deleted. */
export function beatsOfDeletedPod(s: ParentState): boolean {
  return s.deleting !== null && s.deleting.uid !== '' && s.holderUid === s.deleting.uid;
}

/** A fresh parent (Healthy, Starting or Pending): whether its pod's deletion is covered now. */
export function deletionCovers(s: ParentState): boolean {
  return s.policy.handover !== 'release' && s.apiReachable && s.checkpoint.stored && beatsOfDeletedPod(s);
}

export function coverDeletion(s: ParentState, now: number, actions: Action[]): boolean {
  return cover(
    s,
    'ParentDeleted',
    `pod ${s.deleting?.name} is being deleted and no other pod of this parent is listed on this node; the checkpoint starts beside it (handover: ${s.policy.handover})`,
    now,
    actions,
  );
}

/** Why an Active parent is not handed back to the beats of its pod being deleted. */
export function deletedPodReason(s: ParentState): Reason {
  return R(
    'ParentDeleted',
    `the beats are from pod ${s.deleting?.name}, which is being deleted: the checkpoint serves until another pod of this parent is Ready`,
  );
}
