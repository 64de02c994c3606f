// docs/scenario-format.md documents every field of the scenario schema: this walks the zod schema
// (src/sim/schema.ts) and fails for a field, or a fault type, the document does not list, so a new
// field without docs fails CI. A field is listed when its section (a heading naming the object's
// path in backticks) has a table row for it: "| `field` |".
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { scenarioSchema } from '../../src/sim/schema.js';

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  element?: z.ZodType;
  in?: z.ZodType;
  options?: z.ZodType[];
  discriminator?: string;
  values?: unknown[];
}
const def = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;

/** Through defaults, optionals and pipes (a duration is a pipe), to the schema that has the shape. */
function unwrap(s: z.ZodType): z.ZodType {
  const d = def(s);
  if (d.innerType && (d.type === 'default' || d.type === 'optional' || d.type === 'prefault' || d.type === 'nullable')) return unwrap(d.innerType);
  if (d.type === 'pipe' && d.in) return unwrap(d.in);
  return s;
}

/** Each object of the schema, by its section title (`kubelet`, `nodes[]`, `faults[]`, `type: reboot`, …), with its fields. */
function sections(s: z.ZodType, title: string, out: Map<string, string[]>): Map<string, string[]> {
  const d = def(unwrap(s));
  if (d.type === 'array' && d.element) return sections(d.element, `${title}[]`, out);
  if (d.type === 'union' && d.discriminator && d.options) {
    const key = d.discriminator;
    // The discriminator and the fields every option shares are the list's own section.
    const shapes = d.options.map((o) => def(unwrap(o)).shape!);
    const common = Object.keys(shapes[0]!).filter((f) => shapes.every((sh) => f in sh));
    out.set(title, common);
    for (const sh of shapes) {
      const value = def(unwrap(sh[key]!)).values![0];
      out.set(
        `${key}: ${String(value)}`,
        Object.keys(sh).filter((f) => !common.includes(f)),
      );
      for (const [f, fs] of Object.entries(sh)) sections(fs, `${title}.${f}`, out);
    }
    return out;
  }
  if (d.type !== 'object' || !d.shape) return out;
  out.set(title, Object.keys(d.shape));
  for (const [f, fs] of Object.entries(d.shape)) sections(fs, title === '' ? f : `${title}.${f}`, out);
  return out;
}

/** The lines under the heading that names `title` in backticks (the top level: "Top level"), up to the next heading. */
function section(doc: string, title: string): string[] | null {
  const lines = doc.split('\n');
  const start = lines.findIndex((l) => /^#{2,3} /.test(l) && (title === '' ? /^## Top level$/.test(l) : l.includes(`\`${title}\``)));
  if (start < 0) return null;
  const end = lines.findIndex((l, i) => i > start && /^#/.test(l));
  return lines.slice(start + 1, end < 0 ? undefined : end);
}

const DOC = 'docs/scenario-format.md';

describe(DOC, () => {
  const schemaSections = sections(scenarioSchema, '', new Map());
  const doc = readFileSync(DOC, 'utf8');

  it('the walk finds every part of the schema (so the check below cannot pass vacuously)', () => {
    expect([...schemaSections.keys()]).toEqual(
      expect.arrayContaining(['', 'kubelet', 'nodes[]', 'parents[]', 'faults[]', 'type: reboot', 'type: hang', 'focus', 'expect', 'expect.faults[]']),
    );
    expect(schemaSections.get('faults[]')).toEqual(['type', 'at']);
    expect(schemaSections.get('type: reboot')).toEqual(['node', 'down']);
    expect(schemaSections.get('expect.faults[]')).toContain('checkpointServedGeneration');
  });

  it.each([...sections(scenarioSchema, '', new Map())].map(([title, fields]) => [title === '' ? 'top level' : title, title, fields] as const))(
    'documents every field of %s',
    (_name, title, fields) => {
      const lines = section(doc, title);
      expect(lines, `${DOC} has no section whose heading names \`${title}\``).not.toBeNull();
      const missing = fields.filter((f) => !lines!.some((l) => l.startsWith(`| \`${f}\` |`)));
      expect(missing, `fields of ${title || 'the top level'} without a row in its section of ${DOC}`).toEqual([]);
    },
  );

  it('the README links the format from its simulator section', () => {
    const readme = readFileSync('README.md', 'utf8');
    const sim = readme.slice(readme.indexOf('## The simulator'), readme.indexOf('\n## ', readme.indexOf('## The simulator') + 1));
    expect(sim).toContain('(docs/scenario-format.md)');
  });
});
