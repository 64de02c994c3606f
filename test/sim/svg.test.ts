// The chart, read back as a document: parsed (well-formed, tags balanced), then its elements found
// by class and data-* attributes, as a reader of the chart would find them by eye.
import { describe, expect, it } from 'vitest';
import { namedScenario, renderSvg, runScenario } from '../../src/sim/index.js';

interface El {
  name: string;
  attrs: Record<string, string>;
  children: El[];
  text: string;
}

/** A strict little XML reader for the chart's subset: elements, attributes, text; throws on any imbalance. */
function parseXml(xml: string): El {
  const root: El = { name: '#root', attrs: {}, children: [], text: '' };
  const stack = [root];
  const re = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"]*")*)\s*(\/?)>|([^<]+)/gy;
  let m: RegExpExecArray | null;
  let at = 0;
  while (at < xml.length) {
    re.lastIndex = at;
    m = re.exec(xml);
    if (!m) throw new Error(`not well-formed at ${at}: ${xml.slice(at, at + 40)}`);
    at = re.lastIndex;
    const top = stack[stack.length - 1]!;
    if (m[5] !== undefined) {
      if (/&(?!(amp|lt|gt|quot);)/.test(m[5])) throw new Error(`bare & in text: ${m[5]}`);
      top.text += m[5].replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
      continue;
    }
    if (m[1]) {
      if (top.name !== m[2]) throw new Error(`</${m[2]}> closes <${top.name}>`);
      stack.pop();
      continue;
    }
    const attrs: Record<string, string> = {};
    for (const a of m[3]!.matchAll(/([\w:-]+)="([^"]*)"/g)) attrs[a[1]!] = a[2]!;
    const el: El = { name: m[2]!, attrs, children: [], text: '' };
    top.children.push(el);
    if (!m[4]) stack.push(el);
  }
  if (stack.length !== 1) throw new Error(`unclosed <${stack[stack.length - 1]!.name}>`);
  expect(root.children.length).toBe(1);
  return root.children[0]!;
}

function all(el: El, pred: (e: El) => boolean, out: El[] = []): El[] {
  if (pred(el)) out.push(el);
  for (const c of el.children) all(c, pred, out);
  return out;
}
const byClass = (el: El, cls: string) => all(el, (e) => e.attrs.class === cls);
const num = (e: El, a: string) => Number(e.attrs[a]);

async function chart(name: string) {
  const run = await runScenario(namedScenario(name)!);
  const svg = parseXml(renderSvg(run));
  const [plot] = byClass(svg, 'plot-area');
  return { run, svg, x0: num(plot!, 'x'), width: num(plot!, 'width') };
}

describe('the chart', () => {
  it('master-reboot-overlap (30 min, one reboot at 3m): the recovery gets most of the width, quiet stretches are breaks', async () => {
    const { run, svg, x0, width } = await chart('master-reboot-overlap');
    expect(svg.name).toBe('svg');
    const f = run.outcome.perFault[0]!;
    const [g] = all(svg, (e) => e.attrs.class === 'fault' && e.attrs['data-faults'] === '0');
    expect(g).toBeDefined();
    const [faultLine] = all(svg, (e) => e.attrs.class === 'fault-event' && Number(e.attrs['data-t']) === 180);
    const [served] = byClass(g!, 'served-at');
    const [parent] = byClass(g!, 'parent-served-at');
    expect(num(served!, 'data-t')).toBeCloseTo(f.at + f.servedAt!, 6);
    expect(num(parent!, 'data-t')).toBeCloseTo(f.at + f.parentServedAt!, 6);
    const fx = num(faultLine!, 'x1');
    const sx = num(served!, 'x1');
    const px = num(parent!, 'x1');
    expect(fx < sx && sx < px && px <= x0 + width).toBe(true);
    // From the fault to the parent serving again: about 2 of 30 minutes, at least 40% of the width
    // (a linear axis gives it 7%).
    expect((px - fx) / width).toBeGreaterThanOrEqual(0.4);
    // The figures are labelled beside the mark.
    const [label] = byClass(g!, 'recovery');
    expect(label!.text).toBe(`fault 0 reboot at 3m: unserved ${f.unservedSeconds}s; served +${f.servedAt}s; parent +${f.parentServedAt}s`);
    expect(num(g!, 'data-unserved')).toBe(f.unservedSeconds);
    // Quiet stretches before the fault and after the recovery are breaks, marked with their length.
    const breaks = byClass(svg, 'break');
    expect(breaks.some((b) => num(b, 'data-to') <= 180)).toBe(true);
    expect(breaks.some((b) => num(b, 'data-from') >= f.at + f.parentServedAt! && num(b, 'data-to') === run.endedAt)).toBe(true);
    for (const b of breaks) expect(all(b, (e) => e.name === 'text')[0]!.text).toMatch(/^(\d+h)?(\d+m)?(\d+s)? quiet$|^≈$/);
    // No break inside the recovery.
    for (const b of breaks) expect(num(b, 'data-to') <= f.at || num(b, 'data-from') >= f.at + f.parentServedAt!).toBe(true);
  });

  it('every lane tiles the plot in time order, and ticks grow left to right', async () => {
    const { svg, x0, width } = await chart('agent-restart-mid-handover');
    const rects = all(svg, (e) => e.name === 'rect' && e.children.some((c) => c.name === 'title'));
    expect(rects.length).toBeGreaterThan(10);
    const lanes = new Map<string, El[]>();
    for (const r of rects) lanes.set(r.attrs.y!, [...(lanes.get(r.attrs.y!) ?? []), r]);
    for (const lane of lanes.values()) {
      expect(num(lane[0]!, 'x')).toBeGreaterThanOrEqual(x0);
      // Each rect starts where the one before ends (coordinates are written to 0.1 px; a sliver is 0.5 px wide at least).
      const ends = (r: El) => num(r, 'x') + num(r, 'width');
      for (let i = 1; i < lane.length; i++) expect(Math.abs(num(lane[i]!, 'x') - ends(lane[i - 1]!))).toBeLessThanOrEqual(0.6);
      expect(Math.abs(ends(lane[lane.length - 1]!) - (x0 + width))).toBeLessThanOrEqual(0.6);
    }
    const ticks = byClass(svg, 'tick');
    for (let i = 1; i < ticks.length; i++) {
      expect(num(ticks[i]!, 'data-t')).toBeGreaterThan(num(ticks[i - 1]!, 'data-t'));
      expect(num(ticks[i]!, 'x')).toBeGreaterThan(num(ticks[i - 1]!, 'x'));
    }
    // Two faults at different moments: two marks, each with its own label.
    const groups = byClass(svg, 'fault');
    expect(groups.map((g) => g.attrs['data-faults'])).toEqual(['0', '1']);
    expect(byClass(groups[0]!, 'recovery')[0]!.text).toMatch(
      /^fault 0 reboot at 3m: unserved [\d.]+s; served \+[\d.]+s; parent (\+[\d.]+s|not within its window)$/,
    );
  });

  it('faults at the same moment share one mark and one label', async () => {
    const { run, svg } = await chart('full-cluster-reboot');
    const groups = byClass(svg, 'fault');
    expect(groups.map((g) => g.attrs['data-faults'])).toEqual(['0,1,2']);
    expect(byClass(groups[0]!, 'recovery')[0]!.text).toMatch(
      new RegExp(`^faults 0, 1, 2 reboot at 3m: unserved ${run.outcome.perFault[0]!.unservedSeconds}s;`),
    );
  });
});
