// The demo's picture: lastseen and the kubelet-pods baseline on one time axis, the kubelet model
// named, reboots labelled in the picture (not only in tooltips). Read back from the SVG text by
// class and data-* attributes, as a reader finds them by eye.
import { describe, expect, it } from 'vitest';
import { namedScenario, renderComparisonSvg, runScenario } from '../../src/sim/index.js';

/** Every element with `class="cls"`, as its attributes (and text, for <text>). */
function byClass(svg: string, cls: string): Array<Record<string, string> & { text: string }> {
  const out: Array<Record<string, string> & { text: string }> = [];
  for (const m of svg.matchAll(new RegExp(`<(\\w+)([^>]*\\bclass="${cls}"[^>]*)>([^<]*)`, 'g'))) {
    const attrs: Record<string, string> = {};
    for (const a of m[2]!.matchAll(/([\w-]+)="([^"]*)"/g)) attrs[a[1]!] = a[2]!;
    out.push({ ...attrs, text: m[3]! });
  }
  return out;
}

describe('the comparison chart (npm run demo)', () => {
  it('draws lastseen and kubelet-pods on one axis, names the kubelet model, labels the reboot in the picture', async () => {
    const scenario = namedScenario('master-reboot')!;
    const runs = [await runScenario(scenario, { strategy: 'lastseen' }), await runScenario(scenario, { strategy: 'kubelet-pods' })];
    const svg = renderComparisonSvg(runs, scenario.kubelet.name);
    expect(svg.match(/<svg\b/g)).toHaveLength(1);
    expect(svg).toContain('on the kubelet v1.5 model');

    // Two blocks, lastseen first, each titled with what it is and its unserved time.
    const titles = byClass(svg, 'block-title');
    expect(titles.map((t) => t['data-strategy'])).toEqual(['lastseen', 'kubelet-pods']);
    expect(titles[0]!.text).toContain(`unserved ${runs[0]!.outcome.unservedSeconds}s`);
    expect(titles[1]!.text).toMatch(/kubelet-pods baseline.*\/pods/);
    const plots = byClass(svg, 'plot-area');
    expect(plots.map((p) => p['data-strategy'])).toEqual(['lastseen', 'kubelet-pods']);
    expect(Number(plots[1]!.y)).toBeGreaterThan(Number(plots[0]!.y) + Number(plots[0]!.height));
    // One axis: the same plot width, and every tick at the same x in both blocks.
    expect(plots[0]!.x).toBe(plots[1]!.x);
    expect(plots[0]!.width).toBe(plots[1]!.width);
    const ticks = byClass(svg, 'tick');
    const xAt = new Map<string, Set<string>>();
    for (const t of ticks) xAt.set(t['data-t']!, (xAt.get(t['data-t']!) ?? new Set()).add(t.x!));
    expect(ticks.length).toBeGreaterThan(4);
    for (const [t, xs] of xAt) expect([...xs], `tick at ${t}s`).toHaveLength(1);

    // The reboot is labelled in each block, at the fault's own line.
    const labels = byClass(svg, 'fault-label').filter((l) => l.text.includes('reboot'));
    expect(labels).toHaveLength(2);
    const faultLines = byClass(svg, 'fault-event').filter((l) => l['data-t'] === labels[0]!['data-t']);
    expect(faultLines).toHaveLength(2);
    for (const l of labels) expect(Number(l.x)).toBeCloseTo(Number(faultLines[0]!.x1) + 3, 0);

    // The point of the picture: the baseline leaves the api-server unserved far longer.
    expect(runs[1]!.outcome.unservedSeconds).toBeGreaterThan(5 * runs[0]!.outcome.unservedSeconds);
  });
});
