// The run as a chart, hand-written SVG: per node, a lane for api-server reachability, and per
// parent key lanes for who serves it (parent / checkpoint / nobody), whether its checkpoint is
// active, and (lastseen) the core's state. Faults are vertical marks, each fault's recovery figures
// (served again, parent itself, unserved) are marked and labelled, and the time axis is broken
// (time-axis.ts): what happens is drawn at a readable scale, quiet stretches shrink to a break.
// Elements carry classes and data-* attributes (seconds) so tests can read the chart.
import type { FaultOutcome } from './outcome.js';
import type { RunResult } from './run.js';
import { formatTick, planAxis, ticks } from './time-axis.js';

const COLORS: Record<string, string> = {
  up: '#4caf50',
  down: '#e53935',
  parent: '#4caf50',
  checkpoint: '#ffb300',
  none: '#e53935',
  'node-down': '#424242',
  active: '#ffb300',
  inactive: '#e0e0e0',
  Pending: '#90a4ae',
  Healthy: '#4caf50',
  Starting: '#81c784',
  Silent: '#ff7043',
  Active: '#ffb300',
  HandingOver: '#29b6f6',
  Orphaned: '#8d6e63',
};

const LABEL_W = 260;
const PLOT_W = 960;
const LANE_H = 18;
const GAP = 6;

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Recovery label rows above the lanes: faults beyond this many share rows (row = index mod rows). */
const MAX_MARK_ROWS = 4;
const MARK_ROW_H = 14;
const SERVED_COLOR = '#2e7d32';
const PARENT_COLOR = '#1565c0';
/** Average width of a character of the 10 px labels, to decide where a label fits. */
const LABEL_CHAR_PX = 5.6;

const secs = (v: number) => `${Number.isInteger(v) ? v : v.toFixed(1)}s`;

/** The recovery of faults at the same moment (they share one window, so one set of figures), in words. */
function recoveryText(group: FaultOutcome[]): string {
  const f = group[0]!;
  const fig = (v: number | null, what: string) => (v === null ? `${what} not within its window` : v === 0 ? `${what} throughout` : `${what} +${secs(v)}`);
  const which = `${group.length > 1 ? 'faults' : 'fault'} ${group.map((g) => g.index).join(', ')} ${[...new Set(group.map((g) => g.type))].join('/')}`;
  return `${which} at ${formatTick(f.at * 1000)}: unserved ${secs(f.unservedSeconds)}; ${fig(f.servedAt, 'served')}; ${fig(f.parentServedAt, 'parent')}`;
}

/** perFault is in the order of `at`; faults at the same moment share a window and a mark. */
function groupByAt(faults: FaultOutcome[]): FaultOutcome[][] {
  const out: FaultOutcome[][] = [];
  for (const f of faults) {
    const last = out[out.length - 1];
    if (last && last[0]!.at === f.at) last.push(f);
    else out.push([f]);
  }
  return out;
}

/** The moments worth a readable scale: every lane change, every fault line, every recovery figure. */
function moments(r: RunResult): number[] {
  const out: number[] = [];
  for (const s of r.series.values()) for (const p of s) out.push(p.t);
  for (const l of r.logs) if (l.kind === 'fault') out.push(l.t);
  for (const f of r.outcome.perFault) {
    for (const v of [f.servedAt, f.parentServedAt]) if (v !== null) out.push((f.at + v) * 1000);
  }
  return out;
}

/**
 * Never broken: each fault's recovery (from the fault to its last figure in its window) and every
 * stretch where a key goes unserved on a node, whose length is the point of the chart.
 */
function unbroken(r: RunResult): Array<[number, number]> {
  const out: Array<[number, number]> = r.outcome.perFault.map((f) => [f.at * 1000, (f.at + Math.max(0, f.servedAt ?? 0, f.parentServedAt ?? 0)) * 1000]);
  const endMs = r.endedAt * 1000;
  for (const [lane, s] of r.series) {
    if (!lane.startsWith('serve/')) continue;
    s.forEach((p, j) => {
      if (p.v === 'none' || p.v === 'node-down') out.push([p.t, s[j + 1]?.t ?? endMs]);
    });
  }
  return out;
}

export function renderSvg(r: RunResult): string {
  return renderRuns([{ run: r, title: null }], `${r.scenario} — strategy ${r.strategy}, seed ${r.seed}`);
}

/**
 * The same scenario under several strategies, one above the other on one time axis (the axis keeps
 * every run's busy stretches readable), so what lastseen changes is one look: lastseen first, then
 * the kubelet-pods baseline (the earlier checkpointer). `kubelet` names the kubelet model both ran on.
 */
export function renderComparisonSvg(runs: readonly RunResult[], kubelet: string): string {
  const r0 = runs[0]!;
  const heading = `${r0.scenario}, seed ${r0.seed}, on the kubelet ${kubelet} model: ${runs.map((r) => r.strategy).join(' vs ')}, one time axis`;
  return renderRuns(
    runs.map((run) => ({ run, title: STRATEGY_TITLES[run.strategy] ?? `strategy ${run.strategy}` })),
    heading,
  );
}

/** What each strategy is, for a comparison's block titles. */
const STRATEGY_TITLES: Record<string, string> = {
  lastseen: 'with lastseen: heartbeats the agent measures itself, hand-over with a deadline',
  'kubelet-pods': "kubelet-pods baseline: the earlier checkpointer, trusting the kubelet's /pods list",
};

/** Room below a block's lanes for its ticks and break labels, and before the next block. */
const BLOCK_SPACING = 46;
/** Height of a block's title line. */
const BLOCK_TITLE_H = 18;
/** Rows of fault labels (reboots and the like) above a block's lanes, and their height. */
const FAULT_LABEL_ROWS = 3;
const FAULT_LABEL_H = 12;
/** Average width of a character of the 9 px fault labels. */
const FAULT_CHAR_PX = 5;

function renderRuns(blocks: ReadonlyArray<{ run: RunResult; title: string | null }>, heading: string): string {
  const endMs = Math.max(...blocks.map((b) => b.run.endedAt * 1000));
  const axis = planAxis(
    blocks.flatMap((b) => moments(b.run)),
    endMs,
    LABEL_W,
    PLOT_W,
    blocks.flatMap((b) => unbroken(b.run)),
  );
  const body: string[] = [];
  let y = 34;
  let bottom = y;
  for (const b of blocks) {
    bottom = drawRun(body, b.run, axis, y, b.title);
    y = bottom + BLOCK_SPACING;
  }
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${LABEL_W + PLOT_W + 20}" height="${bottom + 90 + (blocks.length - 1) * 16}" font-family="sans-serif" font-size="11">`,
    '<rect width="100%" height="100%" fill="#fff"/>',
    `<text x="10" y="20" font-size="14" font-weight="bold">${esc(heading)}</text>`,
    ...body,
  ];
  drawLegend(out, bottom, blocks);
  out.push('</svg>');
  return out.join('\n');
}

function drawRun(out: string[], r: RunResult, axis: ReturnType<typeof planAxis>, y0: number, title: string | null): number {
  const endMs = r.endedAt * 1000;
  const x = (t: number) => axis.x(t);
  const lanes: Array<{ label: string; id: string }> = [];
  for (const n of r.nodes) {
    lanes.push({ label: `${n} api-server reachable`, id: `api/${n}` });
    for (const k of r.keys) {
      if (!r.series.has(`serve/${n}/${k}`)) continue;
      lanes.push({ label: `${n} ${k} served by`, id: `serve/${n}/${k}` });
      lanes.push({ label: `${n} ${k} checkpoint`, id: `checkpoint/${n}/${k}` });
      if (r.series.has(`core/${n}/${k}`)) lanes.push({ label: `${n} ${k} core state`, id: `core/${n}/${k}` });
    }
  }
  const groups = groupByAt(r.outcome.perFault);
  const rows = Math.min(groups.length, MAX_MARK_ROWS);
  if (title !== null) {
    out.push(
      `<text class="block-title" data-strategy="${esc(r.strategy)}" x="10" y="${y0 + 12}" font-size="12" font-weight="bold">${esc(`${title} — unserved ${secs(r.outcome.unservedSeconds)}`)}</text>`,
    );
  }
  const marksTop = y0 + (title !== null ? BLOCK_TITLE_H : 0);
  const faults = r.logs.filter((l) => l.kind === 'fault').length;
  const top = marksTop + rows * MARK_ROW_H + 10 + Math.min(Math.max(faults, 1), FAULT_LABEL_ROWS) * FAULT_LABEL_H;
  const bottom = top + lanes.length * (LANE_H + GAP);
  out.push(`<rect class="plot-area" data-strategy="${esc(r.strategy)}" x="${LABEL_W}" y="${top}" width="${PLOT_W}" height="${bottom - top}" fill="none"/>`);
  lanes.forEach((lane, i) => {
    const y = top + i * (LANE_H + GAP);
    out.push(`<text x="10" y="${y + 13}">${esc(lane.label)}</text>`);
    const s = r.series.get(lane.id) ?? [];
    s.forEach((p, j) => {
      const t1 = j + 1 < s.length ? s[j + 1]!.t : endMs;
      const w = Math.max(0.5, x(t1) - x(p.t));
      out.push(
        `<rect x="${x(p.t).toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${LANE_H}" fill="${COLORS[p.v] ?? '#bdbdbd'}"><title>${esc(`${p.v} from ${(p.t / 1000).toFixed(1)}s`)}</title></rect>`,
      );
      if (lane.id.startsWith('core/') && w > 40) out.push(`<text x="${(x(p.t) + 3).toFixed(1)}" y="${y + 13}" font-size="10">${esc(p.v)}</text>`);
    });
  });
  // Breaks: a white band with the classic double slash over the lanes, its length on the axis.
  for (const s of axis.segments) {
    if (!s.quiet) continue;
    const mid = (s.x0 + s.x1) / 2;
    const w = s.x1 - s.x0;
    const label = `${formatTick(s.toMs - s.fromMs)} quiet`;
    out.push(`<g class="break" data-from="${s.fromMs / 1000}" data-to="${s.toMs / 1000}">`);
    out.push(`<title>${esc(`${formatTick(s.fromMs)} to ${formatTick(s.toMs)}: nothing changes (compressed)`)}</title>`);
    out.push(
      `<rect x="${(s.x0 + w * 0.3).toFixed(1)}" y="${top - 4}" width="${(w * 0.4).toFixed(1)}" height="${bottom - top + 8}" fill="#fff" opacity="0.85"/>`,
    );
    for (const dx of [-0.2, 0.2]) {
      out.push(
        `<line x1="${(mid + dx * w - 4).toFixed(1)}" y1="${bottom + 4}" x2="${(mid + dx * w + 4).toFixed(1)}" y2="${top - 4}" stroke="#757575" stroke-width="1"/>`,
      );
    }
    out.push(`<text x="${mid.toFixed(1)}" y="${bottom + 26}" text-anchor="middle" font-size="8" fill="#757575">${esc(w >= 30 ? label : '≈')}</text>`);
    out.push('</g>');
  }
  // Each fault labelled in the picture, not only in a tooltip (a reader sees where the node
  // rebooted); a label that would run into the one before it goes on the next of FAULT_LABEL_ROWS rows.
  const rowEnds: number[] = [];
  for (const l of r.logs) {
    if (l.kind !== 'fault') continue;
    const label = shortFault(l.node, l.text);
    const lx = x(l.t) + 3;
    let row = rowEnds.findIndex((end) => end <= lx);
    if (row < 0) row = rowEnds.length < FAULT_LABEL_ROWS ? rowEnds.length : rowEnds.indexOf(Math.min(...rowEnds));
    rowEnds[row] = lx + label.length * FAULT_CHAR_PX + 4;
    out.push(
      `<text class="fault-label" data-t="${l.t / 1000}" x="${lx.toFixed(1)}" y="${top - 5 - row * FAULT_LABEL_H}" font-size="9" fill="#000">${esc(label)}</text>`,
    );
    out.push(
      `<line class="fault-event" data-t="${l.t / 1000}" x1="${x(l.t).toFixed(1)}" y1="${top - 6}" x2="${x(l.t).toFixed(1)}" y2="${bottom}" stroke="#000" stroke-width="1.5" stroke-dasharray="4,3"><title>${esc(`${l.node}: ${l.text}`)}</title></line>`,
    );
  }
  // Each fault's recovery: its mark, a line from the fault to the last figure on its row, a vertical
  // line per figure across the lanes, and its label.
  groups.forEach((group, i) => {
    const f = group[0]!;
    const y = marksTop + (i % Math.max(1, rows)) * MARK_ROW_H;
    const at = f.at * 1000;
    const fx = x(at);
    const figures = [
      { cls: 'served-at', v: f.servedAt, color: SERVED_COLOR, what: 'served again' },
      { cls: 'parent-served-at', v: f.parentServedAt, color: PARENT_COLOR, what: 'parent itself serving' },
    ].filter((m) => m.v !== null && m.v > 0);
    const lastX = Math.max(fx, ...figures.map((m) => x(at + m.v! * 1000)));
    const text = recoveryText(group);
    out.push(`<g class="fault" data-faults="${group.map((g) => g.index).join(',')}" data-at="${f.at}" data-unserved="${f.unservedSeconds}">`);
    out.push(`<title>${esc(text)}</title>`);
    out.push(`<line class="fault-span" x1="${fx.toFixed(1)}" y1="${y + 4}" x2="${lastX.toFixed(1)}" y2="${y + 4}" stroke="#e53935" stroke-width="3"/>`);
    out.push(`<path class="fault-mark" d="M${fx.toFixed(1)} ${y + 8} l-4 -7 h8 z" fill="#000"/>`);
    for (const m of figures) {
      const mx = x(at + m.v! * 1000).toFixed(1);
      out.push(
        `<line class="${m.cls}" data-t="${f.at + m.v!}" x1="${mx}" y1="${y}" x2="${mx}" y2="${bottom}" stroke="${m.color}" stroke-width="1.2"><title>${esc(`fault ${group.map((g) => g.index).join(', ')}: ${m.what} after ${secs(m.v!)}`)}</title></line>`,
      );
    }
    // Right of the last figure if it fits, else left of the fault, else over the span at the right edge.
    const textW = text.length * LABEL_CHAR_PX;
    const [tx, anchor] = lastX + 6 + textW <= LABEL_W + PLOT_W + 16 ? [lastX + 6, 'start'] : fx - 6 - textW >= 10 ? [fx - 6, 'end'] : [LABEL_W + PLOT_W, 'end'];
    out.push(`<text class="recovery" x="${tx.toFixed(1)}" y="${y + 8}" text-anchor="${anchor}" font-size="10" fill="#000">${esc(text)}</text>`);
    out.push('</g>');
  });
  for (const t of ticks(axis)) {
    out.push(`<text class="tick" data-t="${t / 1000}" x="${x(t).toFixed(1)}" y="${bottom + 14}" text-anchor="middle" font-size="9">${formatTick(t)}</text>`);
  }
  return bottom;
}

/** A fault's label in the picture: the node and the first words of what happened. */
function shortFault(node: string, text: string): string {
  const t = text.length > 36 ? `${text.slice(0, 35)}…` : text;
  return `${node}: ${t}`;
}

function drawLegend(out: string[], bottom: number, blocks: ReadonlyArray<{ run: RunResult; title: string | null }>): void {
  const legend = ['parent', 'checkpoint', 'none', 'node-down', 'HandingOver', 'Silent'];
  const names: Record<string, string> = {
    parent: 'parent serves / reachable',
    checkpoint: 'checkpoint serves / active',
    none: 'nobody / unreachable',
    'node-down': 'node down',
    HandingOver: 'handing over',
    Silent: 'silent',
  };
  legend.forEach((k, i) => {
    out.push(
      `<rect x="${LABEL_W + i * 160}" y="${bottom + 36}" width="12" height="12" fill="${COLORS[k]}"/><text x="${LABEL_W + i * 160 + 16}" y="${bottom + 46}">${names[k]}</text>`,
    );
  });
  out.push(
    `<line x1="${LABEL_W}" y1="${bottom + 62}" x2="${LABEL_W + 20}" y2="${bottom + 62}" stroke="${SERVED_COLOR}" stroke-width="1.5"/><text x="${LABEL_W + 24}" y="${bottom + 66}">served again</text>`,
    `<line x1="${LABEL_W + 160}" y1="${bottom + 62}" x2="${LABEL_W + 180}" y2="${bottom + 62}" stroke="${PARENT_COLOR}" stroke-width="1.5"/><text x="${LABEL_W + 184}" y="${bottom + 66}">parent itself serving, checkpoint retired</text>`,
    `<text x="${LABEL_W + 480}" y="${bottom + 66}" fill="#757575">// : a quiet stretch, compressed</text>`,
  );
  blocks.forEach(({ run }, i) => {
    const o = run.outcome;
    const who = blocks.length > 1 ? `${run.strategy}: ` : '';
    out.push(
      `<text class="summary" x="10" y="${bottom + 84 + i * 16}">${esc(`${who}served again ${o.servedAt === null ? 'never' : `after ${o.servedAt}s`}; parent itself ${o.parentServedAt === null ? 'never' : `after ${o.parentServedAt}s`}; unserved ${o.unservedSeconds}s`)}</text>`,
    );
  });
}
