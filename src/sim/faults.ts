// Faults from a scenario's schedule, applied to the world at their time. Each records when it
// ends, for the liveness bounds.
import { manifestFile } from '../core/names.js';
import { T } from './model.js';
import { type Delay, formatDelay, NO_DELAY } from './network.js';
import type { FaultSpec } from './schema.js';
import { specFor, type World } from './world.js';

export function faultEnd(f: FaultSpec): number {
  switch (f.type) {
    case 'reboot':
      return f.at + f.down;
    case 'partition':
    case 'link':
    case 'latency':
    case 'stall-watch':
    case 'hang':
      return f.at + f.duration;
    default:
      return f.at;
  }
}

/** A latency fault's added latency per direction: `toApi`/`fromApi`, else `latency`, else none. */
export function latencyOf(f: Extract<FaultSpec, { type: 'latency' }>): { toApi: Delay; fromApi: Delay } {
  return { toApi: f.toApi ?? f.latency ?? NO_DELAY, fromApi: f.fromApi ?? f.latency ?? NO_DELAY };
}

export function describeFault(f: FaultSpec): string {
  switch (f.type) {
    case 'reboot':
      return `reboot (down ${f.down / 1000}s)`;
    case 'partition':
      return `network partition for ${f.duration / 1000}s`;
    case 'latency': {
      const { toApi, fromApi } = latencyOf(f);
      const same = toApi.minMs === fromApi.minMs && toApi.maxMs === fromApi.maxMs;
      return same
        ? `+${formatDelay(toApi)} latency to and from the api-server for ${f.duration / 1000}s`
        : `+${formatDelay(toApi)} latency to the api-server, +${formatDelay(fromApi)} from it, for ${f.duration / 1000}s`;
    }
    case 'link': {
      const arrow = f.direction === 'both' ? '<->' : f.direction === 'out' ? '->' : '<-';
      return `link ${f.from} ${arrow} ${f.to} cut for ${f.duration / 1000}s`;
    }
    case 'stall-watch':
      return `agent's watch stalls for ${f.duration / 1000}s`;
    case 'delete-pod':
      return `kubectl delete pod (${f.key})`;
    case 'rollout': {
      const pace = Number.parseInt(String(f.maxSurge), 10) > 0 ? `maxSurge ${f.maxSurge}` : `maxUnavailable ${f.maxUnavailable}`;
      return `rollout of ${f.key} (${f.healthy ? 'healthy' : 'never becomes Ready'}; ${pace}${f.minReadySeconds > 0 ? `, minReadySeconds ${f.minReadySeconds}` : ''})`;
    }
    case 'agent-restart':
      return 'agent container killed';
    case 'clock-step':
      return `wall clock steps by ${f.step / 1000}s`;
    case 'kill':
      return `${f.key}'s process killed (no last beat)`;
    case 'hang':
      return f.scope === 'starved' ? `${f.key}'s process starved of CPU for ${f.duration / 1000}s` : `${f.key}'s process hangs for ${f.duration / 1000}s`;
    case 'remove-manifest':
      return f.key ? `${f.key}'s checkpoint manifest removed by hand` : 'every checkpoint manifest removed (the folder)';
  }
}

export function scheduleFaults(w: World): void {
  const faults = w.scenario.spec.faults;
  for (const f of faults) {
    w.lastFaultEnd = Math.max(w.lastFaultEnd, faultEnd(f));
    w.firstFaultAt = w.firstFaultAt === null ? f.at : Math.min(w.firstFaultAt, f.at);
    w.q.at(f.at, () => apply(w, f));
  }
}

function apply(w: World, f: FaultSpec): void {
  const node = 'node' in f ? w.nodes.get(f.node)! : null;
  w.log(node?.name ?? (f.type === 'link' ? f.from : 'cluster'), 'fault', describeFault(f), 'key' in f ? f.key : undefined);
  switch (f.type) {
    case 'reboot': {
      const n = node!;
      n.up = false;
      w.touch(n);
      n.bootId++;
      const down = n.bootId;
      n.ports.clear();
      n.redirects.clear();
      n.files.clear();
      w.invariants.nodeRebooted(n);
      w.kubelets.delete(n.name);
      w.agents.delete(n.name);
      w.q.at(f.at + f.down, () => {
        // A second reboot while still down owns the power-on: this one's is void.
        if (n.bootId !== down) return;
        n.up = true;
        w.touch(n);
        n.bootId++;
        n.clock.bootAt = w.q.now;
        w.log(n.name, 'fault', 'node is up again');
        const boot = n.bootId;
        w.q.after(T.kubeletStartMs, () => {
          if (n.bootId === boot) w.startKubelet(n);
        });
      });
      return;
    }
    case 'partition':
      node!.net.partitioned = true;
      w.touch(node!);
      w.q.at(f.at + f.duration, () => {
        node!.net.partitioned = false;
        w.touch(node!);
        w.log(node!.name, 'fault', 'partition healed');
      });
      return;
    case 'link': {
      // Any node's reachability may change (World.afterEvent looks at every node while a link is
      // cut, and at the event that cuts or heals one); the two ends are touched as well.
      const ends = () => {
        for (const e of [f.from, f.to]) {
          const n = w.nodes.get(e);
          if (n) w.touch(n);
        }
      };
      w.net.cut(f.from, f.to, f.direction, 1);
      ends();
      w.q.at(f.at + f.duration, () => {
        w.net.cut(f.from, f.to, f.direction, -1);
        ends();
        w.log(f.from, 'fault', `link ${f.from} - ${f.to} healed (${f.direction})`);
      });
      return;
    }
    case 'latency': {
      const { toApi, fromApi } = latencyOf(f);
      w.net.setLatency(node!, toApi, fromApi);
      w.touch(node!);
      w.q.at(f.at + f.duration, () => {
        w.net.setLatency(node!, NO_DELAY, NO_DELAY);
        w.touch(node!);
        w.log(node!.name, 'fault', 'latency back to normal');
      });
      return;
    }
    case 'stall-watch':
      node!.net.watchStalled = true;
      w.q.at(f.at + f.duration, () => {
        node!.net.watchStalled = false;
        w.log(node!.name, 'fault', 'watch resumes (watchdog restarted it)');
        w.agents.get(node!.name)?.onWatchResumed?.();
      });
      return;
    case 'delete-pod': {
      const pod = w.api.podFor(f.node, f.key);
      if (!w.api.available()) w.log('cluster', 'fault', 'kubectl delete failed: no api-server available');
      else if (pod) w.api.deletePod(pod.uid);
      return;
    }
    case 'rollout': {
      const def = w.parentDef(f.key);
      const gen = (w.api.desired.get(f.key)?.generation ?? 0) + 1;
      const { maxUnavailable, maxSurge, minReadySeconds } = f;
      // A rollout's own bindTime is the beds' silent spec: bound, it answers nothing until it starts.
      const spec = { ...specFor(def, gen, f.healthy, f.startTime ?? def.startMs, f.bindTime), ...(f.bindTime !== undefined ? { silentStart: true } : {}) };
      w.api.rollout(w.scenario.spec.faults.indexOf(f), f.crashes > 0 ? { ...spec, crashes: f.crashes } : spec, { maxUnavailable, maxSurge, minReadySeconds });
      return;
    }
    case 'agent-restart': {
      const k = w.kubelets.get(node!.name);
      const agent = k && [...k.pods.values()].find((p) => p.role === 'agent');
      if (k && agent) k.exit(agent, 'killed (fault)');
      w.agents.delete(node!.name);
      return;
    }
    case 'clock-step':
      node!.clock.skewMs += f.step;
      return;
    case 'kill':
    case 'hang': {
      const k = w.kubelets.get(node!.name);
      const p = k && [...k.pods.values()].find((q) => q.role === 'parent' && q.spec?.key === f.key && !q.removed && q.state !== 'waiting');
      if (!k || !p) {
        w.log(node!.name, 'fault', `no running ${f.key} process to ${f.type}`, f.key);
        return;
      }
      if (f.type === 'kill') k.exit(p, 'killed (SIGKILL, no last beat)');
      else k.hang(p, f.duration, f.scope === 'pod', f.scope === 'starved');
      return;
    }
    case 'remove-manifest': {
      // Checkpoint manifests only: the agent's own copy is not modelled as a checkpoint lastseen restores.
      const n = node!;
      const def = f.key ? w.parentDef(f.key) : null;
      const file = def ? manifestFile(def.namespace, def.key) : null;
      const gone = [...n.disk.manifests].filter(([name, m]) => m.role === 'checkpoint' && (file === null || name === file)).map(([name]) => name);
      for (const name of gone) n.disk.manifests.delete(name);
      if (gone.length === 0) w.log(n.name, 'fault', 'no checkpoint manifest to remove', f.key);
      // The folder's change notice (inotify) to the agent's manifest observer.
      w.agents.get(n.name)?.onManifestsChanged?.();
      return;
    }
  }
}
