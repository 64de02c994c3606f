export { namedScenario, NAMED, SCENARIO_NAMES } from './scenarios.js';
export { parseScenario, parseScenarioText, type Scenario, type ScenarioInput } from './schema.js';
export { runScenario, type RunOptions, type RunResult } from './run.js';
export { formatTimeline, verdictLines } from './timeline.js';
export { renderSvg } from './svg.js';
export { randomScenario, parseSeedRange } from './random.js';
export { measureSpeed } from './speed.js';
export { STRATEGIES, type StrategyName } from './strategies.js';
export { formatSeedsSummary, percentileOrNever, runSeeds, type SeedsSummary, seedsExitCode, type Spread, spreadOf, summarizeRuns } from './distribution.js';
