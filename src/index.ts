// Library entry: `import { startHeartbeat } from 'lastseen'` runs the heartbeat writer inside a
// Node.js parent process instead of as a sidecar.

export type { Beat, Channel, Phase, Role } from './core/types.js';
export type { ProbeResult } from './heartbeat/beat.js';
export type { BeatWriter, ChannelStats, Clock, Heartbeat, HeartbeatIdentity, HeartbeatOptions } from './heartbeat/heartbeat.js';
export { startHeartbeat } from './heartbeat/heartbeat.js';
export type { Probe, ProbeOptions } from './heartbeat/probe.js';
