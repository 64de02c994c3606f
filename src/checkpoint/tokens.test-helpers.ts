// JWT-shaped tokens for the tests of copied tokens: unsigned, only the `iat`/`exp` claims matter.

/** A token issued at `iatMs` that lives `lifetimeS`; `tag` makes two mints differ. */
export function jwt(iatMs: number, lifetimeS: number, tag = 'x'): Buffer {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return Buffer.from(`${part({ alg: 'RS256' })}.${part({ iat: Math.floor(iatMs / 1000), exp: Math.floor(iatMs / 1000) + lifetimeS, sub: tag })}.sig`);
}
