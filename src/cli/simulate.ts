// `lastseen simulate SCENARIO|--file FILE [--seed N] [--strategy S] [--json] [--svg FILE]` and
// `lastseen simulate random --seeds A..B`: run the deterministic simulator, print the timeline and
// a verdict (or one JSON object), optionally draw the run. `lastseen simulate SCENARIO|--file FILE
// --seeds A..B [--json]` runs one scenario once per seed and prints the spread of its figures.
import { readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import {
  formatSeedsSummary,
  formatTimeline,
  KUBELET_MODELS,
  type KubeletModelName,
  namedScenario,
  parseScenarioText,
  parseSeedRange,
  type RunResult,
  randomNetScenario,
  randomScenario,
  renderComparisonSvg,
  renderSvg,
  runScenario,
  runSeeds,
  SCENARIO_NAMES,
  type Scenario,
  STRATEGIES,
  type StrategyName,
  seedsExitCode,
  timelineEvents,
  withKubeletModel,
} from '../sim/index.js';
import { CliError, usageError } from './errors.js';

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
  compare?: string;
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

/** Every problem with the command line (each check also stands alone where the value is used). */
async function flagProblems(name: string | undefined, opts: Opts): Promise<string[]> {
  const out: string[] = [];
  const check = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      if (e instanceof CliError) out.push(e.message);
      else throw e;
    }
  };
  check(() => strategyOf(opts.strategy));
  check(() => kubeletOf(opts.kubelet));
  check(() => seedOf(opts.seed));
  if (opts.seeds !== undefined && !parseSeedRange(opts.seeds)) out.push(`--seeds must look like 1..200, got "${opts.seeds}"`);
  if (opts.events && !opts.json) out.push('--events adds the timeline to the JSON output: use it with --json (the text output is the timeline)');
  if (opts.events && (name === 'random' || opts.seeds !== undefined)) out.push('--events belongs to one run; it cannot be used with --seeds');
  if (opts.net && name !== 'random' && name !== 'random-one') out.push('--net draws random network schedules: use it with random or random-one');
  if (opts.seeds !== undefined && name === 'random-one') out.push('random-one draws its scenario from --seed; use `random --seeds A..B` for a range');
  if (opts.seeds !== undefined && opts.seed !== undefined) out.push('pass either --seed N (one run) or --seeds A..B (a run per seed), not both');
  if (opts.svg && (opts.seeds !== undefined || name === 'random')) out.push('--svg draws one run; it cannot be used with --seeds');
  if (opts.compare !== undefined) {
    check(() => strategyOf(opts.compare!));
    if (!opts.svg) out.push('--compare draws a second run beside the first: use it with --svg');
  }
  if (opts.file === undefined && name !== undefined && name !== 'random' && name !== 'random-one' && !namedScenario(name))
    out.push(`no scenario named "${name}": known are ${SCENARIO_NAMES.join(', ')}, random, random-one`);
  if (name === undefined && opts.file === undefined) out.push(`name a scenario (${SCENARIO_NAMES.join(', ')}, random) or pass --file FILE`);
  // The chart's folder must exist before a run of minutes ends in ENOENT.
  if (opts.svg) {
    const dir = dirname(resolve(opts.svg));
    const ok = await stat(dir).then(
      (st) => st.isDirectory(),
      () => false,
    );
    if (!ok) out.push(`--svg ${opts.svg}: the folder ${dir} does not exist`);
  }
  return out;
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
    .option('--compare <strategy>', `with --svg: run the scenario again with this strategy (e.g. kubelet-pods) and draw both on one time axis`)
    .option('--net', 'with random / random-one: draw network schedules (links, latency per direction, slow beats, reboots, partitions, hangs, kills)')
    .addHelpText('after', EXIT_HELP)
    .action(async (name: string | undefined, opts: Opts) => {
      // Every problem with the flags at once, before anything runs.
      const problems = await flagProblems(name, opts);
      if (problems.length > 0) throw usageError(problems);
      const strategy = strategyOf(opts.strategy);
      const kubelet = kubeletOf(opts.kubelet);
      if (name === 'random') return runRandom(opts.seeds ?? '1..100', strategy, !!opts.json, kubelet, !!opts.net);
      if (opts.seeds !== undefined) {
        return runScenarioSeeds(onKubelet(await load(name, opts.file), kubelet), opts.seeds, strategy, !!opts.json);
      }
      const seed = seedOf(opts.seed);
      const scenario = onKubelet(name === 'random-one' ? (opts.net ? randomNetScenario : randomScenario)(seed ?? 1) : await load(name, opts.file), kubelet);
      const r = await runScenario(scenario, { seed, strategy });
      if (opts.json) process.stdout.write(`${JSON.stringify(jsonOf(r, !!opts.events), null, 2)}\n`);
      else process.stdout.write(`${formatTimeline(r)}\nkubelet model: ${scenario.kubelet.name} (docs/simulator-kubelet.md)\n`);
      const other = opts.compare !== undefined ? await runScenario(scenario, { seed, strategy: strategyOf(opts.compare) }) : null;
      if (other && !opts.json) {
        const o = other.outcome;
        process.stdout.write(
          `${other.strategy} on the same scenario and seed: served again ${o.servedAt === null ? 'never' : `after ${o.servedAt}s`}; unserved ${o.unservedSeconds}s (lastseen: ${r.outcome.unservedSeconds}s)\n`,
        );
      }
      if (opts.svg) {
        const chart = other ? renderComparisonSvg([r, other], scenario.kubelet.name) : renderSvg(r);
        await writeFile(opts.svg, chart).catch((e: Error) => {
          throw new CliError(`cannot write the chart to ${opts.svg}: ${e.message}`, 'ESVG', EXIT_INVALID);
        });
        if (!opts.json) process.stdout.write(`chart written to ${opts.svg}\n`);
      }
      if (r.verdict === 'fail') process.exitCode = EXIT_FAILED;
    });
}
