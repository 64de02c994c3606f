// The real tools the release tests run (the chart's and the components' tests): kubectl from
// scripts/control-plane, helm from scripts/helm, both built once from the Go module proxy. A
// missing tool fails the test that needs it, with the command that gets one: never a skip.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** kustomize and helm render in a second or two; a minute covers a machine shared by several runs. */
const TOOL_TIMEOUT_MS = 60_000;

export function kubectlPath(): string {
  const r = spawnSync(join(ROOT, 'scripts/control-plane'), ['bin-dir'], { encoding: 'utf8' });
  const bin = join(r.stdout.trim(), 'kubectl');
  if (r.status !== 0 || !existsSync(bin)) {
    throw new Error(
      `kubectl is not available (${bin}): ${r.stderr.trim()}\nBuild it once (minutes, cached in ~/.cache/lastseen): scripts/control-plane ensure`,
    );
  }
  return bin;
}

export function helmPath(): string {
  const r = spawnSync(join(ROOT, 'scripts/helm'), ['path'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`helm is not available: ${r.stderr.trim()}\nBuild it once (minutes, cached in ~/.cache/lastseen): scripts/helm ensure`);
  return r.stdout.trim();
}

export function krewValidatorPath(): string {
  const r = spawnSync(join(ROOT, 'scripts/krew'), ['path'], { encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(
      `krew's validate-krew-manifest is not available: ${r.stderr.trim()}\nBuild it once (minutes, cached in ~/.cache/lastseen): scripts/krew ensure`,
    );
  return r.stdout.trim();
}

/** Runs a tool; a non-zero exit throws with its output. */
export function tool(bin: string, args: string[]): string {
  const r = spawnSync(bin, args, { cwd: ROOT, encoding: 'utf8', timeout: TOOL_TIMEOUT_MS });
  if (r.status !== 0) throw new Error(`${bin} ${args.join(' ')} exited ${r.status ?? r.signal}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

export const kustomize = (dir: string) => tool(kubectlPath(), ['kustomize', join(ROOT, dir)]);

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** The objects of a multi-document YAML stream, keyed by kind, namespace and name. */
export function objects(yamlText: string): Map<string, K8sObject> {
  const out = new Map<string, K8sObject>();
  for (const doc of parseAllDocuments(yamlText)) {
    if (doc.errors.length > 0) throw new Error(`YAML: ${doc.errors[0]!.message}`);
    const o = doc.toJS() as K8sObject | null;
    if (!o) continue;
    const key = `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    if (out.has(key)) throw new Error(`${key} appears twice`);
    out.set(key, o);
  }
  return out;
}
