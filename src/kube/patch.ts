// Per-request options for client-node 1.4's promise API.
//
// Its `patch...` calls send `application/json-patch+json` unless told otherwise, and its own
// `setHeaderOptions` helper returns observable-style middleware that the promise API cannot run
// (rxjsStub `from()` of an Observable). This one is promise-style and appended after the client's
// own middleware. (Its typings ask for observable middleware here; at run time the promise API
// wraps what it is given as promise middleware, hence the cast.)
import { type ConfigurationOptions, PatchStrategy, type RequestContext } from '@kubernetes/client-node';

/** Options that make a `patch...` call a JSON merge patch (RFC 7386). */
export function mergePatchOptions(): ConfigurationOptions {
  const options = {
    middleware: [
      {
        pre: async (ctx: RequestContext): Promise<RequestContext> => {
          ctx.setHeaderParam('Content-Type', PatchStrategy.MergePatch);
          return ctx;
        },
        post: async <T>(rsp: T): Promise<T> => rsp,
      },
    ],
    middlewareMergeStrategy: 'append' as const,
  };
  return options as unknown as ConfigurationOptions;
}
