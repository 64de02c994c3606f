// Per-request options for client-node's object-parameter API.
//
// Its `patch...` calls send `application/json-patch+json` unless told otherwise. Call-time
// middleware there is observable-style (the object API calls the observable API directly), which
// is what `setHeaderOptions` builds; promise-style middleware fails at run time with
// "callback(...).toPromise is not a function". Appended after the client's own middleware.
import { type ConfigurationOptions, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

/** Options that make a `patch...` call a JSON patch (RFC 6902): a list of operations, `test` among them. */
export function jsonPatchOptions(): ConfigurationOptions {
  return setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
}

/** Options that make a `patch...` call a JSON merge patch (RFC 7386). */
export function mergePatchOptions(): ConfigurationOptions {
  return setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
}
