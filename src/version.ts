/** lastseen's release, as package.json says (test/unit/version.test.ts keeps the two equal). */
export const VERSION = '0.1.0';
