// Ground truth about service, measured from the outside (kubelet container states, not anyone's
// belief): who serves a parent key on a node, and the figures a run reports for its focus key.
import { manifestFile } from '../core/names.js';
import type { World } from './world.js';

export type ServedBy = 'parent' | 'checkpoint' | null;

export function servedBy(world: World, node: string, key: string): ServedBy {
  const k = world.kubelets.get(node);
  if (!k || !world.nodes.get(node)!.up) return null;
  let by: ServedBy = null;
  for (const p of k.pods.values()) {
    if (p.spec?.key !== key || !k.serving(p)) continue;
    if (p.role === 'parent') return 'parent';
    if (p.role === 'checkpoint') by = 'checkpoint';
  }
  return by;
}

/** The checkpoint is active: its manifest is in the folder or its copy still runs. */
const manifestNames = new WeakMap<object, string>();

export function checkpointActive(world: World, node: string, key: string): boolean {
  const n = world.nodes.get(node)!;
  const def = world.parentDef(key);
  // Called for every parent on every node after every event: no allocation on this path.
  let file = manifestNames.get(def);
  if (file === undefined) {
    file = manifestFile(def.namespace, key);
    manifestNames.set(def, file);
  }
  if (n.disk.manifests.has(file)) return true;
  const k = world.kubelets.get(node);
  if (!k) return false;
  for (const p of k.pods.values()) if (p.role === 'checkpoint' && p.spec?.key === key && !p.removed) return true;
  return false;
}

/** The parent itself serves and its checkpoint is retired. */
export function parentServes(world: World, node: string, key: string): boolean {
  return servedBy(world, node, key) === 'parent' && !checkpointActive(world, node, key);
}

export interface OutcomeFigures {
  /** Virtual seconds of the first fault (null: no fault). */
  faultAt: number | null;
  /** Seconds from the fault until the key was served again (0: never unserved; null: not again). */
  servedAt: number | null;
  /** Seconds until the parent itself served with the checkpoint retired (same conventions). */
  parentServedAt: number | null;
  unservedSeconds: number;
  /** Who served the focus key at the end. */
  finalServedBy: ServedBy;
}

export class Outcome {
  private lastT: number | null = null;
  private lastServed = true;
  private unservedMs = 0;
  private everUnserved = false;
  private everNotParent = false;
  private servedAgainAt: number | null = null;
  private parentAgainAt: number | null = null;

  constructor(private readonly world: World) {}

  afterEvent(): void {
    const w = this.world;
    if (w.keepLogs) {
      for (const def of w.scenario.parents) {
        for (const n of def.nodes) {
          const by = servedBy(w, n, def.key);
          w.record(`serve/${n}/${def.key}`, by ?? (w.nodes.get(n)!.up ? 'none' : 'node-down'));
          w.record(`checkpoint/${n}/${def.key}`, checkpointActive(w, n, def.key) ? 'active' : 'inactive');
        }
      }
    }
    const at = w.firstFaultAt;
    if (at === null || w.q.now < at) return;
    const { node, key } = w.scenario.focus;
    const now = w.q.now;
    if (this.lastT !== null && !this.lastServed) this.unservedMs += now - this.lastT;
    const served = servedBy(w, node, key) !== null;
    const parent = parentServes(w, node, key);
    if (!served) this.everUnserved = true;
    if (!parent) this.everNotParent = true;
    if (served && this.everUnserved && this.servedAgainAt === null) this.servedAgainAt = now;
    if (parent && this.everNotParent && this.parentAgainAt === null) this.parentAgainAt = now;
    this.lastT = now;
    this.lastServed = served;
  }

  figures(endAt: number): OutcomeFigures {
    const w = this.world;
    const at = w.firstFaultAt;
    const sec = (t: number | null) => (t === null || at === null ? null : Math.round((t - at) / 100) / 10);
    const tail = this.lastT !== null && !this.lastServed ? endAt - this.lastT : 0;
    return {
      faultAt: at === null ? null : at / 1000,
      servedAt: !this.everUnserved ? 0 : sec(this.servedAgainAt),
      parentServedAt: !this.everNotParent ? 0 : sec(this.parentAgainAt),
      unservedSeconds: Math.round((this.unservedMs + tail) / 100) / 10,
      finalServedBy: servedBy(w, w.scenario.focus.node, w.scenario.focus.key),
    };
  }
}
