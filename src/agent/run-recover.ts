// Recovery at start (a piece of `runAgent`, and of the simulator's agent): what is on disk says
// which parents have a stored checkpoint, which of those are active right now (and whether the
// running copy was written without port sharing), and which hand-overs (or known-bad verdicts)
// were in force when the last agent stopped. The loop starts from that, not from nothing.
//
// Written once over two ports: a `CheckpointDisk` (the node's store and manifest folder:
// `nodeCheckpointDisk` below; the simulator's node disk) and the hand-over record (handovers.ts).
import { readdir, readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errnoCode } from '../checkpoint/fs.js';
import type { ManifestDir } from '../checkpoint/manifests.js';
import { canonicalJson } from '../checkpoint/sanitize.js';
import type { Store } from '../checkpoint/store.js';
import type { ManifestFile } from '../core/manifest.js';
import { sharesPorts, withoutPortSharing } from './actuators.js';
import type { Agent } from './agent.js';
import type { HandoverRecords } from './handovers.js';
import type { ManifestCheck } from './observe/manifests.js';
import { isAgentCopy } from './self.js';

/** A checkpoint in the store, as recovery needs it. */
export interface StoredCheckpointInfo {
  id: string;
  specHash: string;
  /** The copy's pod labels (the agent's own copy is told by them; the parent's policy selects by them). */
  labels: Record<string, string>;
}

/** The node's checkpoints as they are on disk. */
export interface CheckpointDisk {
  /** Every usable stored checkpoint, and the folders that are not usable with why (nothing thrown for those). */
  stored(): Promise<{ checkpoints: StoredCheckpointInfo[]; problems: Array<{ id: string; reason: string }> }>;
  /** The checkpoints whose manifest is in the kubelet's folder, by id: `exclusive` when written without port sharing. */
  active(): Promise<Map<string, { exclusive: boolean }>>;
  /**
   * What the kubelet's folder holds for these parents, by id, compared with their stored copies as
   * the agent writes them (src/agent/observe/manifests.ts: `ManifestReader.manifests`).
   */
  manifests(checks: ReadonlyArray<ManifestCheck>): Promise<Map<string, ManifestFile>>;
}

const FOLDER_GONE = new Set(['ENOENT', 'ENOTDIR']);

/** The node's store and manifest folder. */
/** The production disk; the actuator tells it what it wrote (`written`), which is what a reading is compared with. */
export interface NodeCheckpointDisk extends CheckpointDisk {
  /** The actuator wrote `manifest` for `id` (canonical JSON is compared, not bytes). */
  written(id: string, manifest: V1Pod): void;
}

export function nodeCheckpointDisk(store: Store, manifests: ManifestDir): NodeCheckpointDisk {
  let stored: Map<string, V1Pod> = new Map();
  // What this process last wrote, by id. Before its first write (an agent restarted under an active
  // copy) a manifest is compared with the stored copy, shared or not, kept while its spec hash stands.
  const wrote = new Map<string, string>();
  const fromStore = new Map<string, { specHash: string; shared: string; exclusive: string }>();
  const expectedFor = async (c: ManifestCheck) => {
    const known = fromStore.get(c.id);
    if (known?.specHash === c.specHash) return known;
    const copy = await store.load(c.id);
    const e = copy ? { specHash: c.specHash, shared: canonicalJson(copy.manifest), exclusive: canonicalJson(withoutPortSharing(copy.manifest)) } : null;
    if (e) fromStore.set(c.id, e);
    return e;
  };
  return {
    async stored() {
      const listed = await store.list();
      stored = new Map(listed.checkpoints.map((c) => [c.id, c.capture.manifest]));
      return {
        checkpoints: listed.checkpoints.map((c) => ({ id: c.id, specHash: c.capture.specHash, labels: c.capture.manifest.metadata?.labels ?? {} })),
        problems: listed.problems,
      };
    },
    async active() {
      const scan = await manifests.scan();
      const out = new Map<string, { exclusive: boolean }>();
      for (const id of scan.active) {
        const running = scan.manifests.get(id);
        const copy = stored.get(id);
        // Exclusive: the stored copy shares its ports and the manifest in the folder does not.
        out.set(id, { exclusive: copy !== undefined && running !== undefined && sharesPorts(copy) && !sharesPorts(running) });
      }
      return out;
    },
    async manifests(checks) {
      const out = new Map<string, ManifestFile>();
      if (checks.length === 0) return out;
      let names: Set<string>;
      try {
        names = new Set(await readdir(manifests.dir));
      } catch (e) {
        // No folder holds no manifest (the next activation creates it); any other error is no reading.
        if (!FOLDER_GONE.has(errnoCode(e) ?? '')) throw e;
        for (const c of checks) out.set(c.id, 'absent');
        return out;
      }
      for (const c of checks) {
        const path = manifests.pathOf(c.id);
        if (!names.has(basename(path))) {
          out.set(c.id, 'absent');
          continue;
        }
        let text: string;
        try {
          text = canonicalJson(JSON.parse(await readFile(path, 'utf8')));
        } catch (e) {
          if (e instanceof SyntaxError) out.set(c.id, 'changed');
          else if (FOLDER_GONE.has(errnoCode(e) ?? '')) out.set(c.id, 'absent');
          else throw e;
          continue;
        }
        // Compared as canonical JSON, not bytes: how the file is laid out is not what it runs.
        const want = await expectedFor(c);
        if (want === null) continue; // no stored copy to compare with: no reading
        out.set(c.id, text === wrote.get(c.id) || text === want.shared || text === want.exclusive ? 'ours' : 'changed');
      }
      return out;
    },
    written(id, manifest) {
      wrote.set(id, canonicalJson(manifest));
    },
  };
}

/** Feed the agent what the disk holds; returns how many checkpoints were restored. */
export async function recoverFromDisk(d: { agent: Agent; disk: CheckpointDisk; handovers: HandoverRecords; log: Logger }): Promise<number> {
  const handoverProblem = await d.handovers.load();
  if (handoverProblem) d.log.warn({ reason: handoverProblem }, 'hand-over file unreadable');
  const listed = await d.disk.stored();
  for (const p of listed.problems) d.log.warn({ checkpoint: p.id, reason: p.reason }, 'checkpoint on disk is not usable');
  const active = await d.disk.active();
  let restored = 0;
  for (const c of listed.checkpoints) {
    // The agent's own copy is kept by SelfCheckpoint, always active, never judged by the core.
    if (isAgentCopy(c.labels)) continue;
    const [namespace, key] = c.id.split('/') as [string, string];
    const a = active.get(c.id);
    d.agent.restore(
      namespace,
      key,
      { stored: true, active: a !== undefined, specHash: c.specHash, exclusive: a?.exclusive === true },
      c.labels,
      d.handovers.recovered(c.id),
    );
    restored++;
  }
  d.log.info({ checkpoints: listed.checkpoints.length, active: [...active.keys()] }, 'recovered from the state folder');
  return restored;
}
