export * from './duration.js';
export * from './policy.js';
export * from './schema.js';
