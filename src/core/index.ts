export * from './decide.js';
export * from './names.js';
export * from './types.js';
