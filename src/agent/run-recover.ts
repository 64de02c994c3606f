// Recovery at start (a piece of `runAgent`): what is on disk says which parents have a stored
// checkpoint, which of those are active right now, and which hand-overs (or known-bad verdicts)
// were in force when the last agent stopped. The loop starts from that, not from nothing.
import type { Logger } from 'pino';
import type { ManifestDir } from '../checkpoint/manifests.js';
import type { Store } from '../checkpoint/store.js';
import type { Agent } from './agent.js';
import type { HandoverFile } from './handovers.js';
import { isAgentCopy } from './self.js';

export async function recoverFromDisk(d: { agent: Agent; store: Store; manifests: ManifestDir; handovers: HandoverFile; log: Logger }): Promise<void> {
  const handoverProblem = await d.handovers.load();
  if (handoverProblem) d.log.warn({ reason: handoverProblem }, 'hand-over file unreadable');
  const listed = await d.store.list();
  for (const p of listed.problems) d.log.warn({ checkpoint: p.id, reason: p.reason }, 'checkpoint on disk is not usable');
  const active = new Set(await d.manifests.active());
  for (const c of listed.checkpoints) {
    // The agent's own copy is kept by SelfCheckpoint, always active, never judged by the core.
    if (isAgentCopy(c.capture.manifest.metadata?.labels)) continue;
    const [namespace, key] = c.id.split('/') as [string, string];
    d.agent.restore(
      namespace,
      key,
      { stored: true, active: active.has(c.id), specHash: c.capture.specHash },
      c.capture.manifest.metadata?.labels ?? {},
      d.handovers.recovered(c.id),
    );
  }
  d.log.info({ checkpoints: listed.checkpoints.length, active: [...active] }, 'recovered from the state folder');
}
