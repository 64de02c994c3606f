// `lastseen status`: one row per parent key and node, joining what the node's agent reported
// (NodeCheckpoint status: state, checkpoint, reason) with what the parent itself last wrote
// (its Lease: phase, renew time, holder).
//
// Pure: takes the objects as the api-server returned them (typed client or raw watch JSON) and
// `now` from the caller. Ages are display only: LAST SEEN compares the writer's renew time with
// the reader's clock, which the agent itself never does (clocks disagree); a skewed writer shows
// as `0s` rather than a negative age.
import { stringify } from 'yaml';
import { ANNOTATION_PHASE, ANNOTATION_ROLE, ANNOTATION_SEQUENCE, LABEL_NODE, LABEL_PARENT } from '../core/names.js';
import { nodeCheckpointStatusSchema, type ParentStatus } from './nodecheckpoint-types.js';

export type OutputFormat = 'table' | 'wide' | 'json' | 'yaml';
export type CheckpointCell = 'active' | 'stored' | '-';

export interface StatusRow {
  node: string;
  namespace: string;
  parent: string;
  /** Phase of the parent's latest beat (Lease annotation, else the agent's report); null: none. */
  phase: string | null;
  /** The parent's Lease renew time (else the agent's lastSeen), RFC 3339; null: never seen. */
  lastSeen: string | null;
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
    rows.set(k, {
      ...row,
      // The Lease is the parent's own latest word; the agent's report is only as fresh as its last transition.
      phase: annotations[ANNOTATION_PHASE] || row.phase,
      lastSeen: iso(l.spec?.renewTime) ?? row.lastSeen,
      holder: l.spec?.holderIdentity ?? null,
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

/** STATE as printed: the agent's word, marked stale when no Ready agent stands behind it. */
function stateCell(r: StatusRow): string {
  const state = r.state ?? '<no report>';
  if (r.agent === 'NodeGone') return `${state} (node gone)`;
  if (r.agent === 'NoReadyAgent' && r.state !== null) return `${state} (stale: no Ready agent)`;
  return state;
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
const WIDE_HEADERS = ['HOLDER', 'SEQUENCE', 'LEASE', 'TRANSITION', 'OVERRIDES', 'AGENT'];

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
    const cells = [r.node, r.namespace, r.parent, r.phase ?? '-', ageOf(r.lastSeen, now), stateCell(r), r.checkpoint, r.reason || '-'];
    if (wide) {
      cells.push(
        r.holder ?? '-',
        r.sequence === null ? '-' : String(r.sequence),
        r.lease ?? '-',
        r.lastTransitionTime === null ? '-' : ageOf(r.lastTransitionTime, now),
        r.overrides.length > 0 ? r.overrides.join(',') : '-',
        r.agent ?? '-',
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
      const at = r.lastSeen === null ? Number.NaN : Date.parse(r.lastSeen);
      return { ...r, lastSeenSeconds: Number.isNaN(at) ? null : Math.max(0, Math.floor((now - at) / 1000)) };
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
  return JSON.stringify(rows.map((r) => [r.node, r.namespace, r.parent, r.phase, r.state, r.checkpoint, r.reason, r.message, r.holder, r.overrides, r.agent]));
}
