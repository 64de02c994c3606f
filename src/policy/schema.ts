// The policy document kept in the `lastseen-policy` ConfigMap (key `policy.yaml`).
//
// Promise: `parsePolicy` either returns a fully validated policy (every duration in ms, every
// cross-field rule holding for the defaults and for every override merged onto them) or the
// complete list of problems, each naming its field path. Nothing half-valid escapes.
import { z } from 'zod';
import { parseDuration } from './duration.js';

export const POLICY_API_VERSION = 'lastseen.dev/v1alpha1';
export const POLICY_KIND = 'Policy';

export const CHANNELS = ['lease', 'annotation', 'local'] as const;
export type Channel = (typeof CHANNELS)[number];
export type WhenApiUnreachable = 'activate' | 'hold';

/** Lower bound for any interval: below this a heartbeat is a load test, not a liveness signal. */
export const MIN_INTERVAL_MS = 100;
/** Upper bound for any duration field: a day. Anything longer is almost surely a typo (e.g. "5h" for "5m"). */
export const MAX_DURATION_MS = 24 * 3_600_000;

const duration = z.string({ error: 'must be a duration string such as 15s, 1m30s, 500ms or PT15S' }).transform((text, ctx) => {
  const r = parseDuration(text);
  if (!r.ok) {
    ctx.addIssue({ code: 'custom', message: r.error });
    return z.NEVER;
  }
  if (r.ms <= 0) {
    ctx.addIssue({ code: 'custom', message: `"${text}" must be longer than zero` });
    return z.NEVER;
  }
  if (r.ms > MAX_DURATION_MS) {
    ctx.addIssue({ code: 'custom', message: `"${text}" is longer than the 24h limit` });
    return z.NEVER;
  }
  return r.ms;
});

const channels = z
  .array(z.enum(CHANNELS, { error: `must be one of ${CHANNELS.join(', ')}` }))
  .min(1, 'at least one channel is needed')
  .refine((cs) => new Set(cs).size === cs.length, 'channels must not repeat');

const fields = {
  interval: duration,
  window: duration,
  startupGrace: duration,
  startTimeout: duration,
  handoverTimeout: duration,
  handoverBackoff: z.strictObject({ initial: duration, max: duration }),
  gcGrace: duration,
  whenApiUnreachable: z.enum(['activate', 'hold'], { error: 'must be "activate" or "hold"' }),
  handover: z.enum(['release', 'overlap'], { error: 'must be "release" or "overlap"' }),
  channels,
};

const partialFields = z
  .strictObject({
    ...fields,
    handoverBackoff: z.strictObject({ initial: duration.optional(), max: duration.optional() }),
  })
  .partial();

const labelSelector = z.strictObject({
  namespaces: z.array(z.string().min(1)).optional(),
  parentKeys: z.array(z.string().min(1)).optional(),
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z
    .array(
      z.strictObject({
        key: z.string().min(1),
        operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
        values: z.array(z.string()).optional(),
      }),
    )
    .optional(),
});

export const policyDocument = z.strictObject({
  apiVersion: z.literal(POLICY_API_VERSION, { error: `must be ${POLICY_API_VERSION}` }),
  kind: z.literal(POLICY_KIND, { error: `must be ${POLICY_KIND}` }),
  defaults: partialFields.optional(),
  overrides: z.array(z.strictObject({ name: z.string().min(1), selector: labelSelector, policy: partialFields })).optional(),
});

export type PolicyDocumentInput = z.input<typeof policyDocument>;
export type PartialParentPolicyRaw = z.output<typeof partialFields>;
export type Selector = z.output<typeof labelSelector>;
