// Whose beat is it? The one rule every channel (Lease, annotation, local file) goes through before a
// parent beat counts as a sign of life (called from freshness.ts's observeBeat). Pure: no I/O, no
// clock, plain data in and out.
//
// A beat counts only if it is the parent's own:
// - Identity. Its holder (pod name and uid) is a pod the api-server lists for the parent key on this
//   node: the one the agent tracks, or, during a surge rollout, the other live pod of the same key
//   (PodInfo.alsoListed). A holder accepted before and no longer listed (a rollout's old pod, a
//   deleted pod's last Stopping beat) stays the parent's. A holder uid of '' (a writer that does
//   not know its uid) matches on the name alone. Anything else is foreign: refused, counted,
//   reported once per holder. The first beat of a holder no list names is held instead (verdict
//   `unlisted`): a new pod may beat before the pod watch lists it, or while that watch is behind
//   (the agent then lists the pods afresh: the `listPods` action), and is judged again on the
//   next list.
//   While no pod is known (no api-server, right after the agent starts), the first holder whose
//   beat *changes* becomes the parent's, provisionally, until a pod list names the real one: a
//   first sighting proves nothing (it may be a leftover), and without an api-server no new pod can
//   appear on the node, so the pod beating then is the one the kubelet already runs. A slow
//   api-server (one the probe calls unreachable, whose pod watch still answers) can start new pods:
//   the pods its identity-only lists name (`listedOnly`) are then who may beat, as a full list's.
// - Order. Each holder numbers its rounds (one sequence for all channels of a round). On one
//   channel the sequence must move forward: the same sequence with another renew time or phase is
//   not a beat (a frozen writer, or a copy that only refreshes renewTime) and is refused; a lower
//   one is a writer restart: its first round (sequence 1, where every run starts) counts; any
//   other lower number below a counted round (a replay, a writer counting down) is refused, below a
//   first sighting (the last run's numbers, after a reboot) it is a new baseline. Across
//   channels, a round counts only if it is newer than every round already counted from that
//   holder: a Lease write that surfaces late (queued in a frozen api-server, a slow etcd) is older
//   than what the local file already showed and cannot revive a parent the local channel has seen
//   die. A round 1 whose renew time is that of the run's first round already counted on another
//   channel is that round again (a first write queued in a slow api-server, applied after later
//   rounds; the annotation writer's first write is unconditional), not a new run. First sightings
//   never raise that mark: after a reboot the Lease still holds the last run's higher numbers, and
//   the new run must not be held back by them.
// - Two live pods of one key (a surge rollout). Both are the parent; the parent's phase is the best
//   among the holders whose beats changed within the window (Ready, then Starting, then Stopping),
//   so the Stopping of the outgoing pod does not read as a deliberate stop while the other beats
//   Ready; once it is the only one left beating, its Stopping counts, unless the api-server lists
//   another pod of the key on this node that has not said Stopping itself (`listedSuccessor`): a
//   surge's new pod whose beats the agent has not counted yet (both pods write the one local beat
//   file, and the old pod's write can replace the new one's before the agent reads it; its Lease
//   writes may be slow). That Stopping is a pod being replaced, not the parent stopping: the
//   parent is judged by its silence instead, one window later at most.
import type { Beat, Channel, Phase } from './types.js';

export interface Holder {
  uid: string;
  name: string;
}

export interface HolderRecord {
  uid: string;
  name: string;
  /** Accepted as the parent's own (listed by the api-server, or adopted while no pod was known). */
  trusted: boolean;
  /** Highest sequence of the holder's current run counted as a change, on any channel (0: none). */
  high: number;
  /** Last sequence seen per channel. */
  seq: Partial<Record<Channel, number>>;
  /** Channels whose last sequence was a first sighting (not counted: it may be a run long over). */
  firstSeen?: Channel[];
  /**
   * The renew time of the first round (sequence 1) of its run as last counted on any channel: the
   * same round arriving later on another channel (a first write queued in a slow api-server) is
   * that round again, not a new run. Compared for equality only.
   */
  runStart?: string;
  /** Phase of its latest counted change, whether that Ready was unprobed, and when (observer time). */
  phase: Phase | null;
  unprobed: boolean;
  changedAt: number | null;
}

/** What the rule remembers per parent (ParentState.beatTrust). */
export interface BeatTrust {
  holders: HolderRecord[];
  /** Channels that have shown a beat that was not refused (the first one on a channel is a baseline). */
  channels: Channel[];
  /** Refusals already reported (`<why>:<uid>/<name>`), so each holder is reported once. */
  reported: string[];
  /**
   * Holders refused once, silently: a new pod's first beat may arrive before the pod watch lists
   * it (the watches are independent). Its next refusal is counted and reported.
   */
  suspects: string[];
  /** The latest such first beat, judged again when the next pod list arrives (replayUnlisted). */
  pending: Beat | null;
  /**
   * The pods an identity-only list named (one heard while the api-server is judged unreachable)
   * while no full list has told the agent its pod yet: an agent that starts during a slow
   * api-server still knows a surge's new pod for the parent's (freshness.ts). Unset once a full
   * list comes.
   */
  listedOnly?: Holder[];
}

export type BeatVerdict =
  /** First sighting on a channel, or of a holder before any pod is known: recorded, proves nothing. */
  | { kind: 'baseline' }
  /** The sequence went back on this channel: a writer restart (or a replay). New baseline, no change. */
  | { kind: 'restart' }
  /** A new round from the parent's own holder: a sign of life. */
  | { kind: 'change' }
  /** Not newer than a round already counted from this holder (the same round on another channel, or a late write). */
  | { kind: 'old' }
  /** Not the parent's beat. `report`: the first refusal of this kind for this holder. */
  | { kind: 'refused'; why: 'foreign' | 'frozen'; message: string; report: boolean }
  /** Not (yet) the parent's: the first beat of a holder no pod list names. Not counted, not reported. */
  | { kind: 'unlisted' };

/** Holders remembered per parent: the pod, a rollout's other pod, a couple of former ones. */
export const MAX_HOLDERS = 4;
/** Refusals remembered as reported; older ones may be reported again. */
export const MAX_REPORTED = 16;

export function emptyTrust(): BeatTrust {
  return { holders: [], channels: [], reported: [], suspects: [], pending: null };
}

export function copyTrust(t: BeatTrust): BeatTrust {
  return {
    holders: t.holders.map((h) => ({ ...h, seq: { ...h.seq } })),
    channels: [...t.channels],
    reported: [...t.reported],
    suspects: [...t.suspects],
    pending: t.pending,
    ...(t.listedOnly ? { listedOnly: [...t.listedOnly] } : {}),
  };
}

const who = (b: { holder: string; holderUid: string }) => `${b.holderUid || '(no uid)'}/${b.holder}`;

function matches(h: Holder, b: Beat): boolean {
  return b.holder === h.name && (b.holderUid === h.uid || b.holderUid === '');
}

/**
 * Judge one parent beat (role `parent`; a beat whose fingerprint did not change is not asked).
 * `listed`: the pods the api-server lists for the key on this node (null: none known). Returns the
 * new memory and the verdict; `t` is not changed.
 */
export function judgeBeat(t: BeatTrust, b: Beat, listed: Holder[] | null, now: number): { trust: BeatTrust; verdict: BeatVerdict } {
  const trust = copyTrust(t);
  let rec = trust.holders.find((h) => h.uid === b.holderUid && h.name === b.holder);
  const refuse = (why: 'foreign' | 'frozen', message: string): { trust: BeatTrust; verdict: BeatVerdict } => {
    const tag = `${why}:${who(b)}`;
    if (why === 'foreign' && !trust.suspects.includes(who(b)) && !trust.reported.includes(tag)) {
      trust.suspects = [...trust.suspects, who(b)].slice(-MAX_REPORTED);
      trust.pending = b;
      if (!trust.channels.includes(b.channel)) trust.channels = [...trust.channels, b.channel];
      return { trust, verdict: { kind: 'unlisted' } };
    }
    const report = !trust.reported.includes(tag);
    if (report) trust.reported = [...trust.reported, tag].slice(-MAX_REPORTED);
    // The channel has shown a beat: whatever the parent writes there next is a change, not a first sighting.
    if (!trust.channels.includes(b.channel)) trust.channels = [...trust.channels, b.channel];
    return { trust, verdict: { kind: 'refused' as const, why, message, report } };
  };

  let listedNow = false;
  if (listed !== null && listed.length > 0) {
    listedNow = listed.some((h) => matches(h, b));
    if (!listedNow && rec?.trusted !== true) {
      const sameUid = b.holderUid !== '' ? listed.find((h) => h.uid === b.holderUid) : undefined;
      return refuse(
        'foreign',
        sameUid
          ? `${b.channel} beat names holder ${b.holder}, but pod ${sameUid.uid} is ${sameUid.name}: not the parent's own beat`
          : `${b.channel} beat of holder ${who(b)} is not from a pod the api-server lists for this parent here (${listed.map(who2).join(', ')}): not the parent's own beat`,
      );
    }
  } else if (rec?.trusted !== true && trust.holders.some((h) => h.trusted)) {
    const adopted = trust.holders.filter((h) => h.trusted).map(who2);
    return refuse(
      'foreign',
      `${b.channel} beat of holder ${who(b)}: no pod is known for this parent yet, and the holder beating first (${adopted.join(', ')}) is taken as the parent until one is`,
    );
  }

  if (!rec) {
    rec = { uid: b.holderUid, name: b.holder, trusted: false, high: 0, seq: {}, phase: null, unprobed: false, changedAt: null };
    trust.holders = pruned([...trust.holders, rec]);
  }
  if (listedNow) rec.trusted = true;
  const before = rec.seq[b.channel];
  rec.seq[b.channel] = b.sequence;
  const fromFirstSighting = rec.firstSeen?.includes(b.channel) === true;
  rec.firstSeen = (rec.firstSeen ?? []).filter((c) => c !== b.channel);

  // Round 1 of the run already counted on another channel: the same round surfacing late there (a
  // first write queued in a frozen api-server, applied after the writer's later rounds), not a
  // writer restart: it must not start the count afresh and read as the parent beating again.
  if (b.sequence === 1 && rec.runStart === b.renewTime && before !== undefined && before > 1) return { trust, verdict: { kind: 'old' } };
  if (!trust.channels.includes(b.channel)) {
    trust.channels = [...trust.channels, b.channel];
    rec.firstSeen = [...rec.firstSeen, b.channel];
    return { trust, verdict: { kind: 'baseline' } };
  }
  if (before !== undefined && b.sequence === before) {
    rec.seq[b.channel] = before;
    return refuse('frozen', `${b.channel} beat of holder ${who(b)} changed but its sequence ${b.sequence} did not: not a new beat (a frozen or copied writer)`);
  }
  if (before !== undefined && b.sequence < before) {
    // A new run. Its first round (sequence 1) is a sign of life. A lower number below a first
    // sighting is a new run seen late (after a reboot the Lease still holds the last run's
    // numbers): a new baseline. Below a counted round it is a writer counting down (or a replay):
    // refused and reported, though it is still the baseline the next round is compared with.
    rec.high = b.sequence - 1;
    if (b.sequence !== 1) {
      rec.high = b.sequence;
      if (fromFirstSighting) return { trust, verdict: { kind: 'restart' } };
      return refuse(
        'frozen',
        `${b.channel} beat of holder ${who(b)} went back from sequence ${before} to ${b.sequence}: not a new beat (a writer restart starts at 1)`,
      );
    }
  }
  if (b.sequence <= rec.high) return { trust, verdict: { kind: 'old' } };
  // Only a counted round 1 marks the run's start: a first sighting proves nothing, and after a
  // reboot the Lease's round 1 must still count when the empty local folder showed it first.
  if (b.sequence === 1) rec.runStart = b.renewTime;
  rec.high = b.sequence;
  rec.trusted = true;
  rec.phase = b.phase;
  rec.unprobed = b.unprobed === true;
  rec.changedAt = now;
  return { trust, verdict: { kind: 'change' } };
}

function who2(h: Holder): string {
  return `${h.uid || '(no uid)'}/${h.name}`;
}

/** Keep the most recently changed holders, untrusted ones first to go. */
function pruned(holders: HolderRecord[]): HolderRecord[] {
  if (holders.length <= MAX_HOLDERS) return holders;
  const rank = (h: HolderRecord) => (h.trusted ? 1e15 : 0) + (h.changedAt ?? -1);
  const drop = holders.reduce((a, h) => (rank(h) < rank(a) ? h : a));
  return holders.filter((h) => h !== drop);
}

/**
 * A new pod list arrived: the beat held as unlisted, if its holder is now listed, is to be observed
 * again (returned); else it is dropped. The memory is changed in place (the caller's copy).
 */
export function takePending(t: BeatTrust, listed: Holder[] | null): Beat | null {
  const b = t.pending;
  t.pending = null;
  if (b === null || listed === null || !listed.some((h) => matches(h, b))) return null;
  t.suspects = t.suspects.filter((x) => x !== who(b));
  return b;
}

const PHASE_RANK: Record<Phase, number> = { Ready: 3, Starting: 2, Stopping: 1 };

/**
 * The parent's phase after a counted change: the best among its holders whose beats changed within
 * `windowMs` of `now` (Ready, then Starting, then Stopping; the latest change breaks a tie), and the
 * holder and unprobed mark that go with it. With one holder, that holder's latest beat.
 */
export function leadingBeat(t: BeatTrust, now: number, windowMs: number): { phase: Phase; holderUid: string; unprobed: boolean } | null {
  let best: HolderRecord | null = null;
  for (const h of t.holders) {
    if (!h.trusted || h.phase === null || h.changedAt === null || now - h.changedAt > windowMs) continue;
    if (best === null || PHASE_RANK[h.phase] > PHASE_RANK[best.phase!] || (PHASE_RANK[h.phase] === PHASE_RANK[best.phase!] && h.changedAt > best.changedAt!))
      best = h;
  }
  return best === null ? null : { phase: best.phase!, holderUid: best.uid, unprobed: best.unprobed };
}

/**
 * A pod of the key the api-server lists on this node besides the holder `leadUid` whose Stopping
 * leads, and not itself known to have said Stopping: a rollout's new pod (null: none). A pod
 * listed but never heard still counts: its beats may not have been seen yet. A stale list can only
 * delay the cover by the window the silence rule then takes.
 */
export function listedSuccessor(t: BeatTrust, listed: Holder[] | null, leadUid: string): Holder | null {
  if (listed === null) return null;
  const lead = t.holders.find((h) => h.uid === leadUid && h.phase === 'Stopping');
  if (lead === undefined) return null;
  return (
    listed.find((h) => {
      // The leaving pod itself (a writer without a uid is known by its name alone).
      if (h.name === lead.name && (h.uid === lead.uid || h.uid === '' || lead.uid === '')) return false;
      const rec = t.holders.find((r) => r.uid === h.uid && r.name === h.name);
      return rec?.phase !== 'Stopping';
    }) ?? null
  );
}
