// The decision core's vocabulary: what it is told (inputs), what it remembers (state), what it
// asks for (actions). All plain JSON-serializable data, so the simulator can log every step and a
// crashed agent can be reasoned about from its logs.
//
// Time: every `...At` / `...Until` field is milliseconds on the *observer's own monotonic clock*
// (the agent's, or a simulated node's). Writers' wall-clock times (a Lease's renewTime) are opaque
// strings to the core: compared for equality only, never for age.
import type { ParentPolicy } from '../policy/policy.js';
import type { Channel } from '../policy/schema.js';
import type { BeatTrust } from './beats.js';
import type { HangState } from './fence.js';
import type { ManifestFile, ManifestLoss } from './manifest.js';
import type { Verdict } from './probation.js';

export type { Channel, ParentPolicy };

export type Phase = 'Starting' | 'Ready' | 'Stopping';
export type Role = 'parent' | 'checkpoint';

/** One heartbeat as read from one channel. */
export interface Beat {
  channel: Channel;
  /** Pod name of the writer. */
  holder: string;
  /** Pod uid of the writer ('' when unknown). */
  holderUid: string;
  role: Role;
  phase: Phase;
  /** Monotonic per writer process; a restart begins again at 1. */
  sequence: number;
  /** The writer's own wall clock (RFC 3339 MicroTime). Compared for equality only. */
  renewTime: string;
  /**
   * The interval the writer beats at, as it declares it (absent: a writer that does not say). The
   * agent never judges a parent by a window shorter than twice this (see freshness.ts).
   */
  intervalMs?: number;
  /**
   * A Ready that no probe checked (`--probe none`): the sidecar runs, nothing more is known. Such a
   * beat keeps the parent alive, but a copy is kept as last known good only when the api-server
   * also reports the pod Ready (last-known-good.ts). Absent: the phase came from a probe.
   */
  unprobed?: boolean;
  /**
   * The sidecar's probe got no answer at all from the main container (a timeout, not a refusal nor
   * an error status): the process holds its port and does not answer, a hang. Not a proof of life:
   * the parent may be fenced (src/core/fence.ts). Absent: the probe was answered or refused.
   */
  unanswered?: boolean;
  /**
   * Only with `unanswered`: whether the last probe this sidecar got an answer to was Ready. true: a
   * process that served and stopped answering, a hang; false: one not Ready since this sidecar
   * started (or since its last refusal or error status), slow to start. The sidecar knows this
   * across an agent's restart, which the agent's own memory of the last answered beat does not
   * (src/core/fence.ts). Absent: a writer that does not say.
   */
  afterReady?: boolean;
  /**
   * Only with `unanswered`: the sidecar saw the process waiting for a CPU through much of the
   * unanswered probe (its threads runnable, not run: a node short of CPU), which a hung process
   * is not. A starved process is slow, not hung: it is fenced only once it has gone unanswered for
   * HANG_STARVED_MS (src/core/fence.ts). Absent: not seen waiting, or a writer that does not say.
   */
  starved?: boolean;
}

/** What the api-server says about pods for this parent key on this node. */
/** A pod by identity only. */
export interface PodRef {
  uid: string;
  name: string;
}

export interface PodInfo {
  uid: string;
  name: string;
  /** Hash of the sanitized spec: what a checkpoint captured from this pod would contain. */
  specHash: string;
  /**
   * Restarts of the pod's main containers as its kubelet reports them to the api-server (the sum of
   * `restartCount`; absent: unknown). A rise while the pod starts beside a port-sharing checkpoint
   * is an exit the checkpoint cannot have caused (see ParentState.knownBad).
   */
  restarts?: number;
  /**
   * The latest exit of its main containers is one the kubelet calls `Unknown` (exit code 255): a
   * container lost with its node (a reboot), found exited when the kubelet started again. Such a
   * rise of `restarts` is no failure of the process (measured on the real node: after a power cycle
   * every container's last state is `Unknown`, and the count rises by one as it starts again).
   */
  lastExitUnknown?: boolean;
  /**
   * How long the run that ended in that latest exit lasted (`finishedAt - startedAt`, ms; absent:
   * not reported). A process that cannot bind a port held without sharing fails before it could be
   * Ready; one that ran longer had its ports (see OWN_SPEC_BIND_SLACK_MS in overlap.ts).
   */
  lastExitRanMs?: number;
  /** The pod's own Ready condition as the api-server reports it (absent: no status, as in the simulator). */
  ready?: boolean;
  /**
   * Other live pods the api-server lists for this key on this node (a surge rollout's old or new
   * pod; absent: none). Their beats are the parent's too (src/core/beats.ts).
   */
  alsoListed?: Array<{ uid: string; name: string }>;
}

export type ParentStateName = 'Pending' | 'Healthy' | 'Starting' | 'Silent' | 'Active' | 'HandingOver' | 'Orphaned';

export interface CheckpointInfo {
  /** A sanitized copy is stored on disk. */
  stored: boolean;
  /** Its manifest is in the kubelet's static-pod directory. */
  active: boolean;
  /** Spec hash of the stored copy (null when none). */
  specHash: string | null;
  /**
   * The active manifest was written without port sharing (`--permit-port-sharing` removed), so a
   * crash-looping known-bad parent cannot bind beside it (absent: false).
   */
  exclusive?: boolean;
}

/** The actions that change files on the node (each tracked in flight and retried on its own). */
export type ActionKind = 'capture' | 'activate' | 'retire' | 'collect' | 'fence' | 'redirect';

/**
 * Why: a CamelCase `code` programs may match (status REASON, metric labels, the simulator's
 * invariants) and a `message` for people. Kubernetes keeps the two apart; so does lastseen.
 */
export interface Reason {
  code: string;
  message: string;
}

/**
 * The flags a beat carries only in their own phase, whoever builds it (the writer, or a channel
 * reading one back): `unprobed` on a Ready, `unanswered` on a Starting.
 */
export function beatFlags(
  phase: Phase,
  unprobed: boolean | undefined,
  unanswered: boolean | undefined,
  afterReady?: boolean,
  starved?: boolean,
): Pick<Beat, 'unprobed' | 'unanswered' | 'afterReady' | 'starved'> {
  const hung = unanswered === true && phase === 'Starting';
  return {
    ...(unprobed && phase === 'Ready' ? { unprobed: true } : {}),
    ...(hung ? { unanswered: true } : {}),
    ...(hung && afterReady !== undefined ? { afterReady } : {}),
    ...(hung && starved === true ? { starved: true } : {}),
  };
}

/** One line for logs and timelines: `Code: message`. */
export function reasonText(r: Reason): string {
  return `${r.code}: ${r.message}`;
}

/** The live read that must precede a Silent parent's cover (src/core/silence.ts): asked at `since`; `pending` until answered. */
export interface LiveRead {
  since: number;
  result: 'pending' | 'unchanged' | 'unavailable';
}

/**
 * What the core remembers about a parent. Per-state data sits in the variant of its state: a field
 * that only means something in one state is typed there, and is null (or absent) in every other.
 */
export type ParentState = ParentStateCommon & (SilentData | NotSilentData);

/** Silent: the live read that must precede its cover. Cleared on entering and on leaving Silent, and by any change in the parent's beats. */
export interface SilentData {
  state: 'Silent';
  confirm: LiveRead | null;
}

/** A parent known to be Silent (the step's `case 'Silent'` narrows to it). */
export type SilentState = ParentStateCommon & SilentData;

export interface NotSilentData {
  state: Exclude<ParentStateName, 'Silent'>;
  confirm: null;
}

export interface ParentStateCommon {
  /** `<namespace>/<parent key>` */
  id: string;
  namespace: string;
  key: string;
  policy: ParentPolicy;
  /** Observer time the state was entered. */
  since: number;
  /** Why the state was entered (or last noted): a CamelCase code and a message for humans. */
  reason: Reason;
  /** No silence judgement before this time (fresh start after agent start or api-server return). */
  graceUntil: number;
  /**
   * The node rebooted and the agent has not yet heard whether an api-server answers: the first
   * verdict "unreachable" ends startupGrace at once (initialState). Absent: no such wait.
   */
  graceEndsIfUnreachable?: boolean;
  /**
   * The node rebooted and the agent has not yet heard whether the node's kubelet reached an
   * api-server in this boot: the verdict "it did not" ends startupGrace at once while the agent
   * hears an api-server and nothing of the parent (boot.ts observeKubelet). Absent: no such wait.
   */
  graceEndsIfKubeletBlind?: boolean;
  /** The grace was ended because the node's kubelet could not start the parent (boot.ts); the cover says so. */
  kubeletBlind?: boolean;
  /** Observer time a parent beat was last seen to change, on any channel (null: never). */
  lastChangeAt: number | null;
  /** Observer time a parent beat was last seen to change on the local channel (null: never). */
  lastLocalChangeAt: number | null;
  /** Phase of the parent's most recently changed beat. */
  phase: Phase | null;
  /** That beat's Ready was not probed (`--probe none`); see Beat.unprobed. */
  phaseUnprobed?: boolean;
  /** Holder uid of that beat. */
  holderUid: string | null;
  /** Observer time the parent began its current unbroken run of Starting beats. */
  startingSince: number | null;
  /** Observer time the parent began its current run of Ready beats while Healthy (null: not in one). */
  readySince: number | null;
  /**
   * The last few beat rounds seen (holder uid, sequence, renew time), on any channel. A writer puts
   * one round on every channel; the same round arriving late on another channel (a watch re-list
   * after a stall) is not a new sign of life, and must not undo what a newer round said.
   */
  rounds: string[];
  /** Last beat fingerprint per channel, to detect change. */
  seen: Partial<Record<Channel, string>>;
  /** The interval the parent's latest beat declared (null: none seen, or a writer that does not declare one). */
  declaredIntervalMs: number | null;
  /**
   * The widened window last announced with a WindowBelowInterval Event (null: the policy's window
   * is at least twice the declared interval, nothing to announce).
   */
  windowNotedMs: number | null;
  /** Phase last reported by the checkpoint copy's own heartbeat (visibility only). */
  checkpointPhase: Phase | null;
  checkpoint: CheckpointInfo;
  /** Whether the api-server is reachable, as last told. */
  apiReachable: boolean;
  /** The parent pod the api-server has scheduled here, as last told (null: none or unknown). */
  pod: PodInfo | null;
  /** Observer time the api-server was first seen to have no pod for this key here (null: has one, or unknown). */
  unscheduledSince: number | null;
  /**
   * The pod of this key being deleted on this node while no other is listed, as last told with
   * the pod list (null: none, or a live pod is listed). See deletion.ts.
   */
  deleting: PodRef | null;
  /** Actions handed to actuators and not yet reported, with the time they were asked for. */
  inflight: Partial<Record<ActionKind, number>>;
  /** Spec hash of the capture in flight (so a new spec is not asked for twice). */
  capturingHash: string | null;
  handover: {
    /** Hand-overs tried since the parent was last Healthy. */
    attempts: number;
    /** HandingOver: re-activate if not Ready by then. */
    deadline: number | null;
    /** Active: no hand-over before this time. */
    notBefore: number;
    /** The backoff to apply after the next failed hand-over. */
    nextBackoffMs: number;
  };
  /**
   * No hand-over to a known-bad spec: the parent spec (and pod) that failed a hand-over while it
   * differed from the checkpoint's, last known good, spec, or (handover: overlap) whose container
   * exited while it started beside the port-sharing checkpoint, which cannot have kept it from its
   * ports. The verdict is a probation (src/core/probation.ts): until it ends, the checkpoint keeps
   * the node (an overlap parent's checkpoint holds its ports without sharing); then the spec is
   * tried again, and each new failure doubles the next probation. It ends at once when the
   * api-server's pod here changes spec or the parent reports Ready on its own. A failure of the
   * checkpoint's own spec is a race with the kubelet's back-off, not a verdict: it is not recorded.
   * Persisted with the hand-over record, so an agent restart keeps it (kept after an expiry too:
   * its strikes count towards the next probation of the same spec).
   */
  knownBad: Verdict | null;
  /**
   * Overlap: exits of the parent are counted only beside a copy known to share its ports. Reset
   * on every (re)write of the checkpoint manifest: `notHolder` is the copy that ran before it
   * (its late beats do not count), `ready` is set by a Ready beat of another copy, `base` is the
   * pod's restart count seen since then (null: none yet, or lost to an api-server outage).
   * `since` is when the manifest was written (null: not by this agent's run), `readyAfterMs` how
   * long the copy then took to beat Ready: the same spec, started beside it, binds its ports
   * within about that long, so only an exit that quick reads as "not shared".
   */
  exitWatch: {
    notHolder: string | null;
    ready: boolean;
    base: { uid: string; restarts: number } | null;
    since: number | null;
    readyAfterMs: number | null;
    /** Exits of another spec counted beside this copy towards a verdict (absent: none; src/core/probation.ts). */
    exits?: number;
  };
  /**
   * Overlap that does not work: the parent's container exited while it started beside its
   * port-sharing checkpoint although it runs the checkpoint's own spec, the spec that was Ready. So
   * its ports are not shared (no `--permit-port-sharing`, or a program that does not bind with
   * SO_REUSEPORT) and it could never start beside the copy. Until the parent is Healthy again the
   * hand-over is a release (`announced`: its Warning Event was recorded; null: overlap as the
   * policy says). Not persisted: a restarted agent tries overlap first again and learns it from
   * the next exit.
   */
  overlapFallback: { announced: boolean } | null;
  /** Holder uid of the checkpoint copy's latest beat. */
  checkpointHolder: string | null;
  /**
   * Actuator failures, per action: retry that action no earlier than `at`; `failures` in a row
   * set the back-off (ACTION_RETRY, doubling). A failed capture never delays a needed activation.
   * Cleared when the action succeeds.
   */
  retry: Partial<Record<ActionKind, { at: number; failures: number }>>;
  /** Whose beats count and how far each holder's sequence got (src/core/beats.ts). */
  beatTrust: BeatTrust;
  /** A beat the input just observed refused (reported as a `beatRefused` action by decide, then cleared). */
  beatRefused?: Extract<Action, { type: 'beatRefused' }>;
  /** A beat the input just observed came from a holder no pod list names (a `listPods` action, then cleared). */
  listPods?: Extract<Action, { type: 'listPods' }>;
  /** A hung parent and its fence (src/core/fence.ts). */
  hang: HangState;
  /** `handover: redirect`: the node's redirect to the copy (src/core/redirect.ts). */
  redirect: RedirectState;
  /** The active checkpoint's manifest was found gone or changed, and is not written again yet (src/core/manifest.ts). */
  manifestLost?: ManifestLoss;
}

export interface RedirectState {
  /** Whether the node holds the redirect, as last reported (null: not known since the agent started). */
  on: boolean | null;
  /** When a report first said it stands no more after it stood (null: it never stood in this run). */
  offSince: number | null;
  /** The parent is proven Ready: the redirect goes, the copy's connections drain, then it retires. */
  handingBack: boolean;
  /**
   * When a Ready beat of the copy was first seen since its manifest was last written or removed
   * (null: none, or its latest beat is not Ready). A beat counts once: `copyBeat` is the last one's
   * fingerprint, so a stale Lease listed again is not a new Ready.
   */
  copyReadyAt: number | null;
  /** When a beat of the copy (any phase) not seen before was first seen since its manifest was last written or removed (null: none). */
  copyHeardAt: number | null;
  copyBeat: string | null;
}

/** Inputs: everything the core can be told. */
export type Input =
  /** Time passed; re-evaluate. */
  | { type: 'tick' }
  /** A heartbeat was observed on a channel (watch event, file read, or list). */
  | { type: 'beat'; beat: Beat }
  /** Result of the live read the core asked for with a `confirm` action. */
  | { type: 'confirmed'; outcome: 'unchanged' | 'unavailable' }
  | { type: 'confirmed'; outcome: 'changed'; beat: Beat }
  | { type: 'api'; reachable: boolean }
  /**
   * After a reboot: whether the node's kubelet has reached an api-server in this boot (its node
   * Lease renewed since the boot), asked once the kubelet has had time to (src/agent/observe/kubelet-lease.ts).
   */
  | { type: 'kubelet'; reachedApi: boolean }
  /**
   * The api-server's view of this key on this node: a pod, or none. While it is judged unreachable,
   * only the pods named count, as who may beat for the key (freshness.ts, observeListedWhileUnreachable).
   */
  | {
      type: 'pod';
      pod: PodInfo | null;
      /**
       * With `pod: null`: the pod of this key the api-server still lists on this node with a
       * deletionTimestamp (its kubelet is stopping it; a DaemonSet rollout deletes before it
       * creates). Absent: none is being deleted.
       */
      deleting?: PodRef;
    }
  /**
   * The api-server's word on scheduling can no longer be trusted: the pod watch failed, or the live
   * read made right before a collection failed or found a pod. Stops the GC clock (and cancels a
   * collection not yet done) until the next list says again that no pod is scheduled here.
   */
  | { type: 'schedulingUnknown'; why: string }
  | { type: 'policy'; policy: ParentPolicy }
  /** Actuator reports. */
  | { type: 'captured'; specHash: string }
  | { type: 'activated'; exclusive?: boolean }
  | { type: 'retired' }
  /** The node's redirect to the copy stands (`on`) or not, as carried out or as found at the agent's start. */
  | { type: 'redirected'; on: boolean }
  | { type: 'collected' }
  | { type: 'actionFailed'; action: Action['type']; error: string }
  /** The fence was carried out: `killed` processes of pod `podUid` ended (0: none hung any more, nothing done). */
  | { type: 'fenced'; podUid: string; killed: number; detail: string }
  /** The checkpoint's manifest as the agent read it from the kubelet's folder (src/core/manifest.ts). */
  | { type: 'manifest'; file: ManifestFile };

export type EventType = 'Normal' | 'Warning';

/** Actions: everything the core can ask for. Carried out by actuators (or the simulator). */
export type Action =
  /** Capture (or refresh) the checkpoint from this pod, which has reported Ready. */
  | { type: 'capture'; pod: PodInfo; reason: Reason }
  /** Read the parent's api channels live and report `confirmed`. */
  | { type: 'confirm'; channels: Channel[] }
  /**
   * Put the checkpoint manifest into the kubelet directory (or rewrite it). `exclusive`: without
   * port sharing (the checkpoint holds its ports against a known-bad overlap parent).
   */
  | { type: 'activate'; reason: Reason; exclusive?: boolean }
  /**
   * `handover: redirect`: make the node redirect new connections to the parent's port to its copy's
   * port (`on`), or stop (src/core/redirect.ts).
   */
  | { type: 'redirect'; on: boolean; reason: Reason }
  /** Remove the checkpoint manifest from the kubelet directory (the copy stays on disk). */
  | { type: 'retire'; reason: Reason }
  /** Delete the checkpoint: manifest and stored copy. */
  | { type: 'collect'; reason: Reason }
  /**
   * Take the hung main process of the parent's pod `podUid` off its port (src/core/fence.ts): only
   * that pod's own process, and only if it still does not answer when the fence is carried out.
   */
  | { type: 'fence'; podUid: string; reason: Reason; evenIfStarved?: boolean }
  | { type: 'event'; eventType: EventType; reason: string; message: string }
  /** The state changed; status objects should be rewritten. */
  | { type: 'transition'; from: ParentStateName; to: ParentStateName; reason: Reason }
  /** The reason changed while the state did not (status REASON, the log). */
  | { type: 'note'; state: ParentStateName; reason: Reason }
  /** A beat that is not the parent's own was refused (src/core/beats.ts); `report`: first of its kind for that holder. */
  | { type: 'beatRefused'; channel: Channel; holder: string; holderUid: string; why: 'foreign' | 'frozen'; message: string; report: boolean }
  /**
   * A beat came from a holder no pod list names for the parent (src/core/beats.ts, `unlisted`): the
   * agent's pod list may be behind (a watch that stalled while a surge's new pod started), so list
   * the node's pods afresh; the beat is judged again when that list arrives.
   */
  | { type: 'listPods'; holder: string; holderUid: string };

export interface Decision {
  state: ParentState;
  actions: Action[];
  /** Call `decide` with a tick no later than this (null: nothing pending, wait for inputs). */
  wakeAt: number | null;
}
