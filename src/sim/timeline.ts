// The readable timeline: virtual time, node, what happened and why, then a verdict.
import type { RunResult } from './run.js';
import type { LogEntry } from './world.js';

export function formatTime(ms: number): string {
  const s = ms / 1000;
  const m = Math.floor(s / 60);
  const rest = s - m * 60;
  return `${String(m).padStart(3, ' ')}m${rest.toFixed(1).padStart(4, '0')}s`;
}

const KIND_WIDTH = 9;

export function formatEntry(e: LogEntry, nodeWidth: number): string {
  return `${formatTime(e.t)}  ${e.node.padEnd(nodeWidth)}  ${e.kind.padEnd(KIND_WIDTH)} ${e.text}`;
}

const sec = (v: number | null) => (v === null ? 'never' : `${v}s`);
/** A per-fault figure: null means not before the fault's window closed. */
const inWindow = (v: number | null, until: number) => (v === null ? `not by ${until}s` : `after ${v}s`);

/** The checkpoint's figures, when it served at all: the generations and the time beside a live parent (should be 0). */
function checkpointFigures(f: { checkpointGenerations: number[]; checkpointWhileParentAliveSeconds: number }): string {
  if (f.checkpointGenerations.length === 0 && f.checkpointWhileParentAliveSeconds === 0) return '';
  const gens = f.checkpointGenerations.length === 0 ? 'none' : f.checkpointGenerations.join(', ');
  return `; checkpoint served generation ${gens}, ${f.checkpointWhileParentAliveSeconds}s beside a live parent`;
}

export function verdictLines(r: RunResult): string[] {
  const o = r.outcome;
  const lines = [
    `scenario ${r.scenario}  seed ${r.seed}  strategy ${r.strategy}  (${r.endedAt}s simulated, ${r.events} events)`,
    o.faultAt === null
      ? 'no fault scheduled'
      : `after the fault at ${o.faultAt}s: served again after ${sec(o.servedAt)}; parent itself serving (checkpoint retired) after ${sec(o.parentServedAt)}; unserved ${o.unservedSeconds}s in total; at the end served by ${o.finalServedBy ?? 'nobody'}`,
  ];
  if (o.perFault.length > 1) {
    for (const f of o.perFault) {
      lines.push(
        `  fault ${f.index} (${f.type} at ${f.at}s, until ${f.until}s): served again ${inWindow(f.servedAt, f.until)}; parent itself ${inWindow(f.parentServedAt, f.until)}; unserved ${f.unservedSeconds}s; ${f.activations} activation(s), ${f.handoverAttempts} hand-over attempt(s)${checkpointFigures(f)}`,
      );
    }
  }
  if (o.faultAt !== null)
    lines.push(
      `whole run: unserved ${o.totals.unservedSeconds}s after the key first served; ${o.totals.activations} activation(s), ${o.totals.handoverAttempts} hand-over attempt(s)${checkpointFigures(o.totals)}`,
    );
  for (const v of r.invariantViolations) lines.push(`invariant violated at ${v.t}s on ${v.node} (${v.key}): ${v.invariant}: ${v.message}`);
  for (const f of r.expectationFailures) lines.push(`expectation failed: ${f}`);
  if (r.strategy !== 'lastseen') {
    lines.push(
      o.parentServedAt === null
        ? `verdict: the parent never served again under ${r.strategy} (invariants are recorded, not enforced, for this strategy)`
        : `verdict: recorded (invariants are not enforced for ${r.strategy})`,
    );
  } else {
    lines.push(r.verdict === 'pass' ? 'verdict: PASS' : `verdict: FAIL (replay with --seed ${r.seed})`);
  }
  return lines;
}

/** A timeline line as an object (`simulate --json --events`): the same fields the text line prints. */
export interface TimelineEvent {
  /** Virtual seconds. */
  t: number;
  node: string;
  kind: LogEntry['kind'];
  text: string;
  /** The parent key the line is about, when it is about one. */
  key?: string;
}

export function timelineEvents(r: RunResult): TimelineEvent[] {
  return r.logs.map((e) => ({ t: e.t / 1000, node: e.node, kind: e.kind, text: e.text, ...(e.key !== undefined ? { key: e.key } : {}) }));
}

export function formatTimeline(r: RunResult): string {
  const width = Math.max(7, ...r.nodes.map((n) => n.length));
  return [...r.logs.map((e) => formatEntry(e, width)), '', ...verdictLines(r)].join('\n');
}
