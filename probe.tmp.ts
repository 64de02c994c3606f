import { parseScenario, runScenario, formatTimeline } from './src/sim/index.js';
const r = parseScenario({ name: 'x', duration: '12m', nodes: [{ name: 'm1', master: true }, { name: 'w1' }],
  parents: [{ key: 'kube-apiserver', kind: 'apiserver', policy: { whenApiUnreachable: 'activate' } }, { key: 'cni', kind: 'app', policy: { whenApiUnreachable: 'activate', channels: ['lease'] } }],
  faults: [{ type: 'partition', at: '3m', node: 'w1', duration: '5m' }], focus: { node: 'w1', key: 'cni' } });
if (!r.ok) throw new Error(JSON.stringify(r.errors));
for (const strategy of ['lastseen', 'kubelet-pods', 'runtime-poll'] as const) {
const run = await runScenario(r.scenario, {strategy});
console.log(strategy, run.verdict, JSON.stringify(run.outcome.totals), JSON.stringify(run.invariantViolations));
if (strategy==='lastseen') console.log(formatTimeline(run).split('\n').filter(l=>/w1/.test(l)&&/cni/.test(l)).slice(0,30).join('\n'));
}
