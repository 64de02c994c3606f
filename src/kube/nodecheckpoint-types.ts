// The NodeCheckpoint custom resource (crds/nodecheckpoints.lastseen.dev.yaml) as TypeScript.
//
// Contract for writers (the agent): one object per node, cluster-scoped, named after the node.
// Create it with metadata only, then write `status` through the status subresource (a create
// drops `status` because the CRD has the subresource). `summarize` fills the counts, so that
// `kubectl get nodecheckpoints` and `lastseen status` agree. Keep this file and the CRD in step:
// the zod schema below mirrors the CRD's (enums, required fields) and test/integration checks
// that the api-server accepts what `summarize` builds. zod/mini, as src/policy/schema.ts says why
// (classic zod costs the agent about 10 MiB of RSS).
import { en } from 'zod/locales';
import * as z from 'zod/mini';
import type { ParentStateName, Phase } from '../core/types.js';

export const NODECHECKPOINT_GROUP = 'lastseen.dev';
export const NODECHECKPOINT_VERSION = 'v1alpha1';
export const NODECHECKPOINT_PLURAL = 'nodecheckpoints';
export const NODECHECKPOINT_KIND = 'NodeCheckpoint';
export const NODECHECKPOINT_API_VERSION = `${NODECHECKPOINT_GROUP}/${NODECHECKPOINT_VERSION}`;

export const PARENT_STATES = ['Pending', 'Healthy', 'Starting', 'Silent', 'Active', 'HandingOver', 'Orphaned'] as const satisfies readonly ParentStateName[];
export const PHASES = ['Starting', 'Ready', 'Stopping'] as const satisfies readonly Phase[];

/** States in which the parent is not covered by its own fresh beats (counted by `oldestSilenceSince`). */
const SILENT_STATES: ReadonlySet<ParentStateName> = new Set(['Silent', 'Active', 'HandingOver']);

z.config(en());

const dateTime = z.iso.datetime({ offset: true });
const nonEmpty = () => z.string().check(z.minLength(1));
const count = () => z.int().check(z.minimum(0));

export const parentStatusSchema = z.object({
  namespace: nonEmpty(),
  key: nonEmpty(),
  state: z.enum(PARENT_STATES),
  /** Phase of the most recent beat; '' when none was seen. */
  phase: z.optional(z.enum([...PHASES, ''])),
  /** Wall-clock time the agent last saw the heartbeat change (null: never). */
  lastSeen: z.optional(z.nullable(dateTime)),
  checkpointStored: z.optional(z.boolean()),
  checkpointActive: z.optional(z.boolean()),
  /** Why, as a CamelCase code (Reason.code). */
  reason: z.optional(z.string().check(z.maxLength(128))),
  /** Why, for a person (Reason.message). */
  message: z.optional(z.string().check(z.maxLength(1024))),
  lastTransitionTime: z.optional(dateTime),
  handoverAttempts: z.optional(count()),
  /** While the checkpoint runs: when the first of its copied service-account tokens expires. */
  tokensExpireAt: z.optional(dateTime),
  /** Whether the node could run the parent's copy now (src/agent/coverage.ts), and why not. */
  covered: z.optional(z.boolean()),
  coverageReason: z.optional(z.string().check(z.maxLength(128))),
  coverageMessage: z.optional(z.string().check(z.maxLength(1024))),
  /** Names of the policy overrides applied to this parent, in order. */
  policyOverrides: z.optional(z.array(z.string())),
  policyOverridesSkipped: z.optional(z.array(z.string())),
});

/** metav1.Condition. */
export const conditionSchema = z.object({
  type: nonEmpty(),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.optional(count()),
  lastTransitionTime: dateTime,
  reason: z.string().check(z.regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)),
  message: z.string(),
});

export const nodeCheckpointStatusSchema = z.object({
  node: z.optional(z.string()),
  observedAt: z.optional(dateTime),
  parentCount: z.optional(count()),
  activeCount: z.optional(count()),
  silentCount: z.optional(count()),
  oldestSilenceSince: z.optional(z.nullable(dateTime)),
  parents: z.optional(z.array(parentStatusSchema)),
  conditions: z.optional(z.array(conditionSchema)),
});

export type ParentStatus = z.infer<typeof parentStatusSchema>;
export type Condition = z.infer<typeof conditionSchema>;
export type NodeCheckpointStatus = z.infer<typeof nodeCheckpointStatusSchema>;

export interface NodeCheckpoint {
  apiVersion: typeof NODECHECKPOINT_API_VERSION;
  kind: typeof NODECHECKPOINT_KIND;
  metadata: { name: string; resourceVersion?: string; uid?: string; creationTimestamp?: string; ownerReferences?: NodeOwner[] };
  spec?: Record<string, never>;
  status?: NodeCheckpointStatus;
}

/** The Node that owns a NodeCheckpoint (garbage-collected with it). */
export interface NodeOwner {
  apiVersion: 'v1';
  kind: 'Node';
  name: string;
  uid: string;
}

/** A new NodeCheckpoint for `node` (metadata only: status is written through the subresource). */
export function newNodeCheckpoint(node: string, owner?: NodeOwner): NodeCheckpoint {
  return { apiVersion: NODECHECKPOINT_API_VERSION, kind: NODECHECKPOINT_KIND, metadata: { name: node, ...(owner ? { ownerReferences: [owner] } : {}) } };
}

/**
 * A complete status for `node`: parents sorted by namespace and key, counts filled in.
 * `observedAt` is the writer's wall clock (an ISO string), passed in: time is never read here.
 */
/**
 * The most parents a NodeCheckpoint lists. At about 0.8 kB a parent (162 kB measured at 200), 500
 * keep the object near 400 kB, well inside etcd's 1.5 MiB request limit (and the CRD's maxItems of
 * 1000). Beyond it the status lists the parents that most need a look (not Healthy first), keeps
 * the counts of all of them, and says so in a `ParentsListed` condition.
 */
export const MAX_STATUS_PARENTS = 500;
/**
 * The most bytes (JSON) the listed parents may take. A parent's entry can reach about 3 kB with
 * every field at the CRD's longest (two 1024-character messages, a 253-character key), so 500 of
 * them could near etcd's 1.5 MiB limit on their own; a status write that big is refused whole and
 * the node reports nothing. The parents are listed, most urgent first, until this is used; the
 * rest are left out (counted, and named in `ParentsListed`). 1 MiB leaves a third of the limit for
 * the object's metadata, conditions and the api-server's own fields.
 */
export const MAX_STATUS_PARENT_BYTES = 1024 * 1024;

export function summarize(node: string, parents: ParentStatus[], conditions: Condition[], observedAt: string): NodeCheckpointStatus {
  const all = [...parents].sort((a, b) => a.namespace.localeCompare(b.namespace) || a.key.localeCompare(b.key));
  const sorted = listed(all);
  if (sorted.length < all.length) {
    const left = all.length - sorted.length;
    const leftNotHealthy = all.filter((p) => p.state !== 'Healthy').length - sorted.filter((p) => p.state !== 'Healthy').length;
    const why =
      all.length > MAX_STATUS_PARENTS && sorted.length === MAX_STATUS_PARENTS
        ? `more than the ${MAX_STATUS_PARENTS} a NodeCheckpoint lists`
        : `the listed ones fill the ${MAX_STATUS_PARENT_BYTES / 1024} KiB a NodeCheckpoint's parents may take`;
    conditions = [
      ...conditions,
      {
        type: 'ParentsListed',
        status: 'False',
        lastTransitionTime: observedAt,
        reason: 'TooManyParents',
        message:
          `${all.length} parents on this node, ${why}: ${left} ${leftNotHealthy === 0 ? 'Healthy ones are' : `are (${leftNotHealthy} of them not Healthy)`} left out ` +
          '(the counts cover all of them; lastseen_parents has every state)',
      },
    ];
  }
  let oldest: string | null = null;
  for (const p of all) {
    if (!SILENT_STATES.has(p.state)) continue;
    // A silent parent never seen since the agent started counts from its transition instead.
    const since = p.lastSeen ?? p.lastTransitionTime ?? null;
    if (since !== null && (oldest === null || Date.parse(since) < Date.parse(oldest))) oldest = since;
  }
  return {
    node,
    observedAt,
    parentCount: all.length,
    activeCount: all.filter((p) => p.checkpointActive === true).length,
    silentCount: all.filter((p) => SILENT_STATES.has(p.state)).length,
    oldestSilenceSince: oldest,
    parents: sorted,
    conditions,
  };
}

/**
 * The parents a status lists: all of them when they fit; else at most MAX_STATUS_PARENTS and
 * MAX_STATUS_PARENT_BYTES of them, those not Healthy first, in id order.
 */
function listed(all: ParentStatus[]): ParentStatus[] {
  const size = (p: ParentStatus) => Buffer.byteLength(JSON.stringify(p)) + 1;
  let bytes = 0;
  for (const p of all) bytes += size(p);
  if (all.length <= MAX_STATUS_PARENTS && bytes <= MAX_STATUS_PARENT_BYTES) return all;
  const keep = new Set<ParentStatus>();
  bytes = 0;
  for (const p of [...all.filter((p) => p.state !== 'Healthy'), ...all.filter((p) => p.state === 'Healthy')]) {
    if (keep.size >= MAX_STATUS_PARENTS) break;
    const b = size(p);
    if (bytes + b > MAX_STATUS_PARENT_BYTES) break;
    bytes += b;
    keep.add(p);
  }
  return all.filter((p) => keep.has(p));
}
