// `lastseen simulate SCENARIO|--file FILE [--seed N] [--strategy S] [--json] [--svg FILE]` and
// `lastseen simulate random --seeds A..B`: run the deterministic simulator, print the timeline and
// a verdict (or one JSON object), optionally draw the run. `lastseen simulate SCENARIO|--file FILE
// --seeds A..B [--json]` runs one scenario once per seed and prints the spread of its figures.
import { readFile, writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import {
  formatSeedsSummary,
  KUBELET_MODELS,
  type KubeletModelName,
  formatTimeline,
  namedScenario,
  parseScenarioText,
  parseSeedRange,
  randomNetScenario,
  randomScenario,
  renderSvg,
  runScenario,
  runSeeds,
  type RunResult,
  SCENARIO_NAMES,
  STRATEGIES,
  type Scenario,
  type StrategyName,
  timelineEvents,
  seedsExitCode,
  withKubeletModel,
} from '../sim/index.js';
import { CliError } from './errors.js';

/** Exit status: 0 the run passed (or was only recorded), 1 a failed verdict, 2 invalid input. */
const EXIT_FAILED = 1;
const EXIT_INVALID = 2;

const EXIT_HELP = `
Exit status:
  0  the run passed (other strategies than lastseen are recorded, not judged: always 0)
  1  the verdict failed: an invariant was violated or an expectation did not hold
     (with --seeds: some seed violated an invariant)
  2  invalid input: the scenario file cannot be read or is not a valid scenario (each error is
     printed with its field path), an unknown scenario, strategy or kubelet model, a bad option`;

interface Opts {
  file?: string;
  seed?: string;
  strategy: string;
  json?: boolean;
  events?: boolean;
  svg?: string;
  seeds?: string;
  kubelet?: string;
  net?: boolean;
}

/** `--kubelet MODEL`: run the scenario on another kubelet model than the one it names. */
function kubeletOf(s: string | undefined): KubeletModelName | undefined {
  if (s === undefined) return undefined;
  if (!(KUBELET_MODELS as readonly string[]).includes(s))
    throw new CliError(`unknown kubelet model "${s}": use one of ${KUBELET_MODELS.join(', ')}`, 'EKUBELET', EXIT_INVALID);
  return s as KubeletModelName;
}

function onKubelet(s: Scenario, k: KubeletModelName | undefined): Scenario {
  return k === undefined ? s : withKubeletModel(s, k);
}

function strategyOf(s: string): StrategyName {
  if (!(STRATEGIES as readonly string[]).includes(s))
    throw new CliError(`unknown strategy "${s}": use one of ${STRATEGIES.join(', ')}`, 'ESTRATEGY', EXIT_INVALID);
  return s as StrategyName;
}

function seedOf(s: string | undefined): number | undefined {
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s)) throw new CliError(`--seed must be a non-negative integer, got "${s}"`, 'ESEED', EXIT_INVALID);
  return Number(s);
}

async function load(name: string | undefined, file: string | undefined): Promise<Scenario> {
  if (file) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      throw new CliError(`cannot read ${file}: ${(e as Error).message}`, 'EREAD', EXIT_INVALID);
    }
    const r = parseScenarioText(text);
    if (!r.ok) {
      for (const err of r.errors) process.stderr.write(`${file}: ${err.path}: ${err.message}\n`);
      throw new CliError(`${file}: ${r.errors.length} error(s); the scenario was not run`, 'ESCENARIO', EXIT_INVALID);
    }
    return r.scenario;
  }
  if (!name) throw new CliError(`name a scenario (${SCENARIO_NAMES.join(', ')}, random) or pass --file FILE`, 'ENOSCENARIO', EXIT_INVALID);
  const s = namedScenario(name);
  if (!s) throw new CliError(`no scenario named "${name}": known are ${SCENARIO_NAMES.join(', ')}, random`, 'ENOSCENARIO', EXIT_INVALID);
  return s;
}

function jsonOf(r: RunResult, events: boolean): Record<string, unknown> {
  return {
    scenario: r.scenario,
    seed: r.seed,
    strategy: r.strategy,
    verdict: r.verdict,
    invariantViolations: r.invariantViolations,
    expectationFailures: r.expectationFailures,
    outcome: r.outcome,
    simulatedSeconds: r.endedAt,
    events: r.events,
    ...(events ? { timeline: timelineEvents(r) } : {}),
  };
}

async function runRandom(range: string, strategy: StrategyName, json: boolean, kubelet: KubeletModelName | undefined, net: boolean): Promise<void> {
  const seeds = parseSeedRange(range);
  if (!seeds) throw new CliError(`--seeds must look like 1..1000, got "${range}"`, 'ESEEDS', EXIT_INVALID);
  const failing: Array<{ seed: number; violations: RunResult['invariantViolations'] }> = [];
  let runs = 0;
  const t0 = Date.now();
  for (let seed = seeds.from; seed <= seeds.to; seed++) {
    const r = await runScenario(onKubelet((net ? randomNetScenario : randomScenario)(seed), kubelet), { seed, strategy, keepLogs: false });
    runs++;
    if (r.invariantViolations.length > 0) failing.push({ seed, violations: r.invariantViolations });
  }
  const wallSeconds = (Date.now() - t0) / 1000;
  if (json) {
    process.stdout.write(`${JSON.stringify({ strategy, runs, passed: runs - failing.length, failed: failing.length, failing, wallSeconds })}\n`);
  } else {
    process.stdout.write(
      `random${net ? ' --net' : ''} seeds ${seeds.from}..${seeds.to} (${strategy}): ${runs} runs, ${runs - failing.length} passed, ${failing.length} failed, ${wallSeconds.toFixed(1)}s\n`,
    );
    for (const f of failing) {
      const v = f.violations[0]!;
      process.stdout.write(
        `  seed ${f.seed}: ${v.invariant} at ${v.t}s on ${v.node} (${v.key}): ${v.message}\n    replay: lastseen simulate random${net ? ' --net' : ''} --seeds ${f.seed}..${f.seed} (or --seed ${f.seed} with the timeline: lastseen simulate random-one${net ? ' --net' : ''} --seed ${f.seed})\n`,
      );
    }
  }
  if (failing.length > 0 && strategy === 'lastseen') process.exitCode = EXIT_FAILED;
}

async function runScenarioSeeds(scenario: Scenario, range: string, strategy: StrategyName, json: boolean): Promise<void> {
  const seeds = parseSeedRange(range);
  if (!seeds) throw new CliError(`--seeds must look like 1..200, got "${range}"`, 'ESEEDS', EXIT_INVALID);
  const { violatingSeeds, ...summary } = await runSeeds(scenario, seeds.from, seeds.to, strategy);
  if (json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    process.stdout.write(`${formatSeedsSummary(summary)}\n`);
    if (violatingSeeds.length > 0) {
      const shown = violatingSeeds.slice(0, 10).join(', ');
      process.stdout.write(`  seeds with violations: ${shown}${violatingSeeds.length > 10 ? ', ...' : ''} (replay one with --seed N)\n`);
    }
  }
  process.exitCode = seedsExitCode(summary);
}

export function register(program: Command): void {
  program
    .command('simulate')
    .argument('[scenario]', `${SCENARIO_NAMES.join(', ')}, random (with --seeds) or random-one (with --seed)`)
    .description('run the deterministic simulator on a named scenario or a scenario file')
    .option('-f, --file <file>', 'a scenario file (YAML or JSON)')
    .option('--seed <n>', 'seed (a seed replays a run exactly)')
    .option('--seeds <A..B>', 'run once per seed in the range: `random` reports failing seeds, a scenario the spread of its figures')
    .option('--strategy <name>', `checkpointing strategy: ${STRATEGIES.join(', ')}`, 'lastseen')
    .option('--kubelet <model>', `kubelet model, overriding the scenario's: ${KUBELET_MODELS.join(', ')} (docs/simulator-kubelet.md)`)
    .option('--json', 'print one JSON object instead of the timeline')
    .option('--events', 'with --json (one run): include the timeline, one object per line ({t, node, kind, text, key}), as `timeline`')
    .option('--svg <file>', 'draw the run as an SVG chart')
    .option('--net', 'with random / random-one: draw network schedules (links, latency per direction, slow beats, reboots, partitions, hangs, kills)')
    .addHelpText('after', EXIT_HELP)
    // Commander's own usage errors (an unknown option, a missing value) are invalid input too.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT_INVALID))
    .action(async (name: string | undefined, opts: Opts) => {
      const strategy = strategyOf(opts.strategy);
      const kubelet = kubeletOf(opts.kubelet);
      if (opts.events && !opts.json)
        throw new CliError('--events adds the timeline to the JSON output: use it with --json (the text output is the timeline)', 'EEVENTS', EXIT_INVALID);
      if (opts.events && (name === 'random' || opts.seeds !== undefined))
        throw new CliError('--events belongs to one run; it cannot be used with --seeds', 'EEVENTS', EXIT_INVALID);
      if (opts.net && name !== 'random' && name !== 'random-one')
        throw new CliError('--net draws random network schedules: use it with random or random-one', 'ENET', EXIT_INVALID);
      if (name === 'random') return runRandom(opts.seeds ?? '1..100', strategy, !!opts.json, kubelet, !!opts.net);
      if (opts.seeds !== undefined) {
        if (name === 'random-one')
          throw new CliError('random-one draws its scenario from --seed; use `random --seeds A..B` for a range', 'ESEEDS', EXIT_INVALID);
        if (opts.seed !== undefined) throw new CliError('pass either --seed N (one run) or --seeds A..B (a run per seed), not both', 'ESEEDS', EXIT_INVALID);
        if (opts.svg) throw new CliError('--svg draws one run; it cannot be used with --seeds', 'ESEEDS', EXIT_INVALID);
        return runScenarioSeeds(onKubelet(await load(name, opts.file), kubelet), opts.seeds, strategy, !!opts.json);
      }
      const seed = seedOf(opts.seed);
      const scenario = onKubelet(name === 'random-one' ? (opts.net ? randomNetScenario : randomScenario)(seed ?? 1) : await load(name, opts.file), kubelet);
      const r = await runScenario(scenario, { seed, strategy });
      if (opts.json) process.stdout.write(`${JSON.stringify(jsonOf(r, !!opts.events), null, 2)}\n`);
      else process.stdout.write(`${formatTimeline(r)}\n`);
      if (opts.svg) {
        await writeFile(opts.svg, renderSvg(r));
        if (!opts.json) process.stdout.write(`chart written to ${opts.svg}\n`);
      }
      if (r.verdict === 'fail') process.exitCode = EXIT_FAILED;
    });
}
