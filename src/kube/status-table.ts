// `lastseen status`: one row per parent key and node, joining what the node's agent reported
// (NodeCheckpoint status: state, checkpoint, reason) with what the parent itself last wrote
// (its Lease: phase, renew time, holder).
//
// Pure: takes the objects as the api-server returned them (typed client or raw watch JSON) and
// `now` from the caller. LAST SEEN is the last beat the agent saw, on any channel (its report's
// lastSeen): for a parent the agent finds fresh, as old as it was when the agent wrote its report
// (both times from the agent's clock, so no skew); for any other, aged to the reader's `now`. A
// row no agent reports on shows the Lease's renew time, the writer's clock (a skewed writer shows
// as `0s` rather than a negative age).
//
// A report older than REPORT_STALE_MS is marked stale whatever the agent pod's condition says: an
// agent writes its status at least every minute (src/agent/status.ts STATUS_REFRESH_MS).
import { stringify } from 'yaml';
import { ANNOTATION_PHASE, ANNOTATION_ROLE, ANNOTATION_SEQUENCE, LABEL_NODE, LABEL_PARENT } from '../core/names.js';
import { nodeCheckpointStatusSchema, type ParentStatus } from './nodecheckpoint-types.js';

export type OutputFormat = 'table' | 'wide' | 'json' | 'yaml';
/** Three of the agent's status periods (STATUS_REFRESH_MS, one minute): an older report is stale. */
export const REPORT_STALE_MS = 3 * 60_000;
/** States in which the agent finds the parent's beats fresh: LAST SEEN is as of its report. */
const FRESH_STATES = new Set(['Healthy', 'Starting']);
export type CheckpointCell = 'active' | 'stored' | '-';

export interface StatusRow {
  node: string;
  namespace: string;
  parent: string;
  /** Phase of the parent's latest beat (Lease annotation, else the agent's report); null: none. */
  phase: string | null;
  /** The last beat the agent saw (else, with no report, the Lease's renew time), RFC 3339; null: never seen. */
  lastSeen: string | null;
  /** When the node's agent wrote the report this row comes from (null: no report). */
  reportedAt: string | null;
  /** Whether the agent finds the parent covered (null: not reported), and why (not). */
  covered: boolean | null;
  coverageReason: string;
  coverageMessage: string;
  /** A Lease whose holder pod does not exist (left behind); null: not known. */
  podMissing: boolean | null;
  /** The agent's state for this parent; null when no agent has reported it (no NodeCheckpoint entry). */
  state: string | null;
  checkpoint: CheckpointCell;
  /** The agent's reason code (CamelCase) and its message for people. */
  reason: string;
  message: string;
  /** Wide: the Lease's holder, sequence and name; the agent's transition time and overrides. */
  holder: string | null;
  sequence: number | null;
  lease: string | null;
  lastTransitionTime: string | null;
  overrides: string[];
  /**
   * Whether the node's report can still be believed: `Ready` (a Ready agent pod runs on the node),
   * `NoReadyAgent` (none: the report is as old as its last write), `NodeGone` (no Node object any
   * more); null when not known (the reader may not list nodes or pods).
   */
  agent: AgentCell | null;
}

export type AgentCell = 'Ready' | 'NoReadyAgent' | 'NodeGone';

/**
 * What the cluster says about the reporters: the nodes that exist and the nodes where a Ready
 * lastseen agent pod runs; null for a list the reader could not make.
 */
export interface NodeHealth {
  nodes: ReadonlySet<string> | null;
  readyAgents: ReadonlySet<string> | null;
  /** `namespace/name` of Lease holders found to have no pod (only rows no agent reports on are looked up). */
  missingPods?: ReadonlySet<string> | null;
}

/** The few fields read from a NodeCheckpoint, as a list or a watch returns it. */
export interface NodeCheckpointObject {
  metadata?: { name?: string };
  status?: unknown;
}

/** The few fields read from a Lease; `renewTime` is a Date from the typed client, a string from a watch. */
export interface LeaseObject {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { holderIdentity?: string; renewTime?: Date | string; acquireTime?: Date | string };
}

export interface BuildResult {
  rows: StatusRow[];
  /** NodeCheckpoints whose status did not match the schema (named, so the user can look). */
  invalid: string[];
}

function iso(v: Date | string | undefined | null): string | null {
  if (v === undefined || v === null) return null;
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.toISOString();
  return v === '' ? null : v;
}

function checkpointCell(p: ParentStatus): CheckpointCell {
  if (p.checkpointActive) return 'active';
  if (p.checkpointStored) return 'stored';
  return '-';
}

const rowKey = (node: string, namespace: string, parent: string) => `${node}\u0000${namespace}\u0000${parent}`;

/** Join NodeCheckpoints and Leases into rows sorted by node, namespace and parent. */
export function buildRows(
  checkpoints: readonly NodeCheckpointObject[],
  leases: readonly LeaseObject[],
  health: NodeHealth = { nodes: null, readyAgents: null },
): BuildResult {
  const rows = new Map<string, StatusRow>();
  const invalid: string[] = [];
  const blank = (node: string, namespace: string, parent: string): StatusRow => ({
    node,
    namespace,
    parent,
    phase: null,
    lastSeen: null,
    reportedAt: null,
    covered: null,
    coverageReason: '',
    coverageMessage: '',
    podMissing: null,
    state: null,
    checkpoint: '-',
    reason: '',
    message: '',
    holder: null,
    sequence: null,
    lease: null,
    lastTransitionTime: null,
    overrides: [],
    agent: agentCell(node, health),
  });

  for (const nc of checkpoints) {
    const node = nc.metadata?.name ?? '';
    if (nc.status === undefined) continue;
    const parsed = nodeCheckpointStatusSchema.safeParse(nc.status);
    if (!parsed.success) {
      invalid.push(node);
      continue;
    }
    for (const p of parsed.data.parents ?? []) {
      rows.set(rowKey(node, p.namespace, p.key), {
        ...blank(node, p.namespace, p.key),
        phase: p.phase ? p.phase : null,
        lastSeen: p.lastSeen ?? null,
        reportedAt: parsed.data.observedAt ?? null,
        covered: p.covered ?? null,
        coverageReason: p.coverageReason ?? '',
        coverageMessage: p.coverageMessage ?? '',
        state: p.state,
        checkpoint: checkpointCell(p),
        reason: p.reason ?? '',
        message: p.message ?? '',
        lastTransitionTime: p.lastTransitionTime ?? null,
        overrides: p.policyOverrides ?? [],
      });
    }
  }

  for (const l of leases) {
    const labels = l.metadata?.labels ?? {};
    const annotations = l.metadata?.annotations ?? {};
    const node = labels[LABEL_NODE];
    const parent = labels[LABEL_PARENT];
    const namespace = l.metadata?.namespace;
    // A checkpoint copy's own Lease says how the copy is doing, not the parent: not a row.
    if (!node || !parent || !namespace || annotations[ANNOTATION_ROLE] === 'checkpoint') continue;
    const k = rowKey(node, namespace, parent);
    const row = rows.get(k) ?? blank(node, namespace, parent);
    const sequence = Number.parseInt(annotations[ANNOTATION_SEQUENCE] ?? '', 10);
    const holder = l.spec?.holderIdentity ?? null;
    rows.set(k, {
      ...row,
      // The Lease is the parent's own latest word on its phase; when it beats is the agent's word
      // (it sees every channel), the Lease's renew time only when no agent reports on the parent.
      phase: annotations[ANNOTATION_PHASE] || row.phase,
      lastSeen: row.state === null ? (iso(l.spec?.renewTime) ?? row.lastSeen) : row.lastSeen,
      podMissing: row.state === null && holder !== null && health.missingPods ? health.missingPods.has(`${namespace}/${holder}`) : row.podMissing,
      holder,
      sequence: Number.isFinite(sequence) ? sequence : null,
      lease: l.metadata?.name ?? null,
    });
  }

  const sorted = [...rows.values()].sort((a, b) => a.node.localeCompare(b.node) || a.namespace.localeCompare(b.namespace) || a.parent.localeCompare(b.parent));
  return { rows: sorted, invalid };
}

function agentCell(node: string, h: NodeHealth): AgentCell | null {
  if (h.nodes && !h.nodes.has(node)) return 'NodeGone';
  if (h.readyAgents) return h.readyAgents.has(node) ? 'Ready' : 'NoReadyAgent';
  return null;
}

/** How old the row's report is at `now` (null: no report). */
function reportAgeMs(r: StatusRow, now: number): number | null {
  if (r.reportedAt === null) return null;
  const at = Date.parse(r.reportedAt);
  return Number.isNaN(at) ? null : now - at;
}

/** STATE as printed: the agent's word, marked stale when its report is old or no Ready agent stands behind it. */
function stateCell(r: StatusRow, now: number): string {
  if (r.state === null) return r.podMissing ? `<no report> (no pod ${r.holder}: Lease left behind)` : '<no report>';
  if (r.agent === 'NodeGone') return `${r.state} (node gone)`;
  const age = reportAgeMs(r, now);
  if (age !== null && age > REPORT_STALE_MS) return `${r.state} (stale: report ${humanAge(age)} old)`;
  if (r.agent === 'NoReadyAgent') return `${r.state} (stale: no Ready agent)`;
  return r.state;
}

/** LAST SEEN as an age: as of the report for a parent the agent finds fresh, else at `now`. */
function lastSeenAgeMs(r: StatusRow, now: number): number | null {
  if (r.lastSeen === null) return null;
  const at = Date.parse(r.lastSeen);
  if (Number.isNaN(at)) return null;
  const reported = r.reportedAt === null ? Number.NaN : Date.parse(r.reportedAt);
  const asOf = r.state !== null && FRESH_STATES.has(r.state) && !Number.isNaN(reported) ? Math.min(reported, now) : now;
  return Math.max(0, asOf - at);
}

/** A parent that is not covered (or cannot be known to be), and why, for `status --covered`. */
export interface CoverageProblem {
  row: StatusRow;
  why: string;
}

/**
 * Every parent that is not covered right now, and why. A parent counts as covered only on a current
 * report from its node's agent that says so: a stale report, a node without a Ready agent, an
 * agent that does not report coverage or no report at all are problems too. Orphaned parents (no
 * pod scheduled here any more) are not parents of the node.
 */
export function coverageProblems(rows: readonly StatusRow[], now: number): CoverageProblem[] {
  const out: CoverageProblem[] = [];
  for (const row of rows) {
    if (row.state === 'Orphaned') continue;
    const age = reportAgeMs(row, now);
    let why: string | null = null;
    if (row.state === null) why = row.podMissing ? `a Lease of pod ${row.holder}, which does not exist` : 'no agent has reported on this parent';
    else if (row.agent === 'NodeGone') why = 'the Node no longer exists';
    else if (age !== null && age > REPORT_STALE_MS) why = `the agent's report is ${humanAge(age)} old (stale)`;
    else if (row.agent === 'NoReadyAgent') why = 'no Ready lastseen agent runs on the node';
    else if (row.covered === null) why = 'the agent does not report coverage (an agent older than this lastseen?)';
    else if (!row.covered) why = `${row.coverageReason}: ${row.coverageMessage}`;
    if (why !== null) out.push({ row, why });
  }
  return out;
}

/**
 * Age as kubectl prints it (apimachinery's duration.HumanDuration): `45s`, `3m20s`, `45m`,
 * `3h20m`, `30h`, `3d5h`, `120d`, `2y30d`. Negative ages (a writer's clock ahead of ours) print as `0s`.
 */
export function humanAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const m = Math.floor(s / 60);
  const h = Math.floor(s / 3600);
  const d = Math.floor(h / 24);
  if (s < 120) return `${s}s`;
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (h < 3) return `${m}m`;
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  if (h < 192) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (d < 365 * 2) return `${d}d`;
  const y = Math.floor(d / 365);
  return d % 365 === 0 ? `${y}y` : `${y}y${d % 365}d`;
}

function ageOf(t: string | null, now: number): string {
  if (t === null) return '<never>';
  const at = Date.parse(t);
  return Number.isNaN(at) ? '<invalid>' : humanAge(now - at);
}

const HEADERS = ['NODE', 'NAMESPACE', 'PARENT', 'PHASE', 'LAST SEEN', 'STATE', 'CHECKPOINT', 'REASON'];
const WIDE_HEADERS = ['HOLDER', 'SEQUENCE', 'LEASE', 'TRANSITION', 'OVERRIDES', 'AGENT', 'COVERED'];

/** Columns aligned with three spaces, like kubectl; no trailing spaces. */
function align(lines: string[][]): string {
  const widths: number[] = [];
  for (const l of lines) {
    for (const [i, c] of l.entries()) widths[i] = Math.max(widths[i] ?? 0, c.length);
  }
  return lines
    .map((l) =>
      l
        .map((c, i) => (i === l.length - 1 ? c : c.padEnd(widths[i]!)))
        .join('   ')
        .trimEnd(),
    )
    .join('\n');
}

export function renderTable(rows: readonly StatusRow[], now: number, wide = false): string {
  if (rows.length === 0) return 'No parents found.\n';
  // MESSAGE, the longest cell, goes last in both forms.
  const lines = [wide ? [...HEADERS, ...WIDE_HEADERS, 'MESSAGE'] : [...HEADERS, 'MESSAGE']];
  for (const r of rows) {
    const seen = lastSeenAgeMs(r, now);
    const cells = [
      r.node,
      r.namespace,
      r.parent,
      r.phase ?? '-',
      seen === null ? (r.lastSeen === null ? '<never>' : '<invalid>') : humanAge(seen),
      stateCell(r, now),
      r.checkpoint,
      r.reason || '-',
    ];
    if (wide) {
      cells.push(
        r.holder ?? '-',
        r.sequence === null ? '-' : String(r.sequence),
        r.lease ?? '-',
        r.lastTransitionTime === null ? '-' : ageOf(r.lastTransitionTime, now),
        r.overrides.length > 0 ? r.overrides.join(',') : '-',
        r.agent ?? '-',
        r.covered === null ? '-' : r.covered ? 'yes' : `no (${r.coverageReason})`,
      );
    }
    cells.push(r.message || '-');
    lines.push(cells);
  }
  return `${align(lines)}\n`;
}

/** Machine-readable form: the rows plus each row's age in seconds at `now`. */
export function toDocument(
  rows: readonly StatusRow[],
  now: number,
): { kind: 'ParentStatusList'; items: Array<StatusRow & { lastSeenSeconds: number | null }> } {
  return {
    kind: 'ParentStatusList',
    items: rows.map((r) => {
      const age = lastSeenAgeMs(r, now);
      return { ...r, lastSeenSeconds: age === null ? null : Math.floor(age / 1000) };
    }),
  };
}

export function render(rows: readonly StatusRow[], format: OutputFormat, now: number): string {
  switch (format) {
    case 'json':
      return `${JSON.stringify(toDocument(rows, now), null, 2)}\n`;
    case 'yaml':
      return stringify(toDocument(rows, now));
    case 'wide':
      return renderTable(rows, now, true);
    default:
      return renderTable(rows, now, false);
  }
}

/** What a watch re-print cares about: a renewal alone (new renew time, sequence) is not a change. */
export function significant(rows: readonly StatusRow[]): string {
  return JSON.stringify(
    rows.map((r) => [
      r.node,
      r.namespace,
      r.parent,
      r.phase,
      r.state,
      r.checkpoint,
      r.reason,
      r.message,
      r.holder,
      r.overrides,
      r.agent,
      r.covered,
      r.podMissing,
    ]),
  );
}
