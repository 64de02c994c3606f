// The run as a chart, hand-written SVG: per node, a lane for api-server reachability, and per
// parent key lanes for who serves it (parent / checkpoint / nobody), whether its checkpoint is
// active, and (lastseen) the core's state. Faults are vertical marks.
import type { RunResult } from './run.js';

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

export function renderSvg(r: RunResult): string {
  const endMs = r.endedAt * 1000;
  const x = (t: number) => LABEL_W + (t / endMs) * PLOT_W;
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
  const top = 40;
  const height = top + lanes.length * (LANE_H + GAP) + 70;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${LABEL_W + PLOT_W + 20}" height="${height}" font-family="sans-serif" font-size="11">`,
    '<rect width="100%" height="100%" fill="#fff"/>',
    `<text x="10" y="20" font-size="14" font-weight="bold">${esc(`${r.scenario} — strategy ${r.strategy}, seed ${r.seed}`)}</text>`,
  ];
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
  const bottom = top + lanes.length * (LANE_H + GAP);
  for (const l of r.logs) {
    if (l.kind !== 'fault') continue;
    out.push(
      `<line x1="${x(l.t).toFixed(1)}" y1="${top - 6}" x2="${x(l.t).toFixed(1)}" y2="${bottom}" stroke="#000" stroke-width="1.5" stroke-dasharray="4,3"><title>${esc(`${l.node}: ${l.text}`)}</title></line>`,
    );
  }
  for (let t = 0; t <= endMs; t += 60_000) {
    out.push(`<text x="${x(t).toFixed(1)}" y="${bottom + 14}" text-anchor="middle" font-size="9">${t / 60_000}m</text>`);
  }
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
      `<rect x="${LABEL_W + i * 160}" y="${bottom + 28}" width="12" height="12" fill="${COLORS[k]}"/><text x="${LABEL_W + i * 160 + 16}" y="${bottom + 38}">${names[k]}</text>`,
    );
  });
  const o = r.outcome;
  out.push(
    `<text x="10" y="${bottom + 60}">${esc(`served again ${o.servedAt === null ? 'never' : `after ${o.servedAt}s`}; parent itself ${o.parentServedAt === null ? 'never' : `after ${o.parentServedAt}s`}; unserved ${o.unservedSeconds}s`)}</text>`,
  );
  out.push('</svg>');
  return out.join('\n');
}
