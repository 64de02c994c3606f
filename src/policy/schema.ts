// The policy document kept in the `lastseen-policy` ConfigMap (key `policy.yaml`).
//
// Promise: `parsePolicy` either returns a fully validated policy (every duration in ms, every
// cross-field rule holding for the defaults and for every override merged onto them) or the
// complete list of problems, each naming its field path. Nothing half-valid escapes.
//
// zod/mini, not zod's classic API: the same checks and messages (the English locale is set below,
// as classic sets it on import), but classic puts every method on every schema instance, which
// costs the agent and the heartbeat sidecar about 10 MiB of RSS at import. Measured (while cutting the
// agent's idle footprint, Node 24, this schema bundled alone): classic 56.8 MiB, mini 46.9, an empty bundle 44.3.
import { en } from 'zod/locales';
import * as z from 'zod/mini';
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

z.config(en());

const duration = z.pipe(
  z.string({ error: 'must be a duration string such as 15s, 1m30s, 500ms or PT15S' }),
  z.transform((text: string, ctx) => {
    const fail = (message: string) => {
      ctx.issues.push({ code: 'custom', message, input: text });
      return z.NEVER;
    };
    const r = parseDuration(text);
    if (!r.ok) return fail(r.error);
    if (r.ms <= 0) return fail(`"${text}" must be longer than zero`);
    if (r.ms > MAX_DURATION_MS) return fail(`"${text}" is longer than the 24h limit`);
    return r.ms;
  }),
);

const channels = z.array(z.enum(CHANNELS, { error: `must be one of ${CHANNELS.join(', ')}` })).check(
  z.minLength(1, 'at least one channel is needed'),
  z.refine((cs) => new Set(cs).size === cs.length, 'channels must not repeat'),
);
const nonEmpty = () => z.string().check(z.minLength(1));

const fields = {
  interval: duration,
  window: duration,
  startupGrace: duration,
  startTimeout: duration,
  handoverTimeout: duration,
  handoverBackoff: z.strictObject({ initial: duration, max: duration }),
  gcGrace: duration,
  whenApiUnreachable: z.enum(['activate', 'hold'], { error: 'must be "activate" or "hold"' }),
  handover: z.enum(['release', 'overlap', 'redirect'], { error: 'must be "release", "overlap" or "redirect"' }),
  /**
   * For `handover: redirect`: the parent's port, the port its copy serves on instead, and the
   * loopback address that always reaches the parent itself (its probes go there).
   */
  redirect: z.strictObject({
    port: z.int().check(z.minimum(1), z.maximum(65_535)),
    copyPort: z.int().check(z.minimum(1), z.maximum(65_535)),
    exceptAddress: z.optional(z.ipv4().check(z.refine((a) => a.startsWith('127.'), 'must be a loopback address (127.0.0.0/8)'))),
  }),
  channels,
};

const partialFields = z.partial(
  z.strictObject({
    ...fields,
    handoverBackoff: z.strictObject({ initial: z.optional(duration), max: z.optional(duration) }),
  }),
);

const labelSelector = z.strictObject({
  namespaces: z.optional(z.array(nonEmpty())),
  parentKeys: z.optional(z.array(nonEmpty())),
  matchLabels: z.optional(z.record(z.string(), z.string())),
  matchExpressions: z.optional(
    z.array(
      z.strictObject({
        key: nonEmpty(),
        operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
        values: z.optional(z.array(z.string())),
      }),
    ),
  ),
});

export const policyDocument = z.strictObject({
  apiVersion: z.literal(POLICY_API_VERSION, { error: `must be ${POLICY_API_VERSION}` }),
  kind: z.literal(POLICY_KIND, { error: `must be ${POLICY_KIND}` }),
  defaults: z.optional(partialFields),
  overrides: z.optional(z.array(z.strictObject({ name: nonEmpty(), selector: labelSelector, policy: partialFields }))),
});

export type PolicyDocumentInput = z.input<typeof policyDocument>;
export type PolicyDocumentOutput = z.output<typeof policyDocument>;
export type PartialParentPolicyRaw = z.output<typeof partialFields>;
export type Selector = z.output<typeof labelSelector>;
