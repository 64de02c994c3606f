import { describe, expect, it } from 'vitest';
import { beat, feed, fixtures, POLICY } from './fixtures.test-helpers.js';
import type { ManifestFile } from './manifest.js';
import type { Action, Input } from './types.js';

const kinds = (as: Action[]) => as.map((a) => (a.type === 'event' ? `event:${a.reason}` : a.type));
const events = (as: Action[]) => as.filter((a): a is Extract<Action, { type: 'event' }> => a.type === 'event');

const seen = (file: ManifestFile): Input => ({ type: 'manifest', file });

describe('the manifest folder observed (src/core/manifest.ts)', () => {
  const f = fixtures();
  const active = f.Active!; // written at 6700

  it('Active, the manifest gone: counted inactive, a Warning, and written again at once; the write is announced as restored', () => {
    const lost = feed(active.state, [[8000, seen('absent')]]);
    expect(lost.state.state).toBe('Active');
    expect(lost.state.checkpoint.active).toBe(false);
    expect(kinds(lost.actions)).toEqual(['event:ManifestRemoved', 'activate']);
    const back = feed(lost.state, [[8100, { type: 'activated' }]]);
    expect(back.state.checkpoint.active).toBe(true);
    expect(back.state.manifestLost).toBeUndefined();
    expect(kinds(back.actions)).toEqual(['event:CheckpointRestored']);
    expect(events(back.actions)[0]!.eventType).toBe('Normal');
    expect(events(back.actions)[0]!.message).toMatch(/removed 0\.1s ago, was written again/);
  });

  it('Active, the manifest changed by someone else: written again', () => {
    const changed = feed(active.state, [[8000, seen('changed')]]);
    expect(kinds(changed.actions)).toEqual(['event:ManifestChanged', 'activate']);
    expect(changed.state.checkpoint.active).toBe(false);
  });

  it('Active, the manifest as written: nothing happens, however often it is read', () => {
    const same = feed(active.state, [
      [8000, seen('ours')],
      [9000, seen('ours')],
    ]);
    expect(same.actions).toEqual([]);
    expect(same.state.checkpoint).toEqual(active.state.checkpoint);
  });

  it('a reading while the activation is in flight says nothing (the write has not landed yet)', () => {
    const silent = f.Silent!;
    const asked = feed(silent.state, [[6600, { type: 'confirmed', outcome: 'unchanged' }]]);
    expect(asked.state.inflight.activate).toBeDefined();
    const read = feed(asked.state, [[6650, seen('absent')]]);
    expect(read.actions).toEqual([]);
    expect(read.state.manifestLost).toBeUndefined();
  });

  it('Active, found written though the write was never reported (its report lost): counted active, its retry dropped', () => {
    const failed = feed(f.Silent!.state, [
      [6600, { type: 'confirmed', outcome: 'unchanged' }],
      [6700, { type: 'actionFailed', action: 'activate', error: 'EIO: fsync' }],
    ]);
    expect(failed.state.checkpoint.active).toBe(false);
    expect(failed.state.retry.activate).toBeDefined();
    const found = feed(failed.state, [[6800, seen('ours')]]);
    expect(found.state.checkpoint.active).toBe(true);
    expect(found.state.retry.activate).toBeUndefined();
    expect(found.actions).toEqual([]);
  });

  it('Healthy, a checkpoint manifest appears in the folder: it is retired (a copy beside the parent fights for its ports)', () => {
    const h = f.Healthy!;
    const stray = feed(h.state, [[2500, seen('ours')]]);
    expect(kinds(stray.actions)).toEqual(['event:ManifestUnexpected', 'retire']);
    expect(stray.state.state).toBe('Healthy');
  });

  it('Healthy without a manifest, or with no copy stored: nothing to do', () => {
    expect(feed(f.Healthy!.state, [[2500, seen('absent')]]).actions).toEqual([]);
    const none = { ...f.Healthy!.state, checkpoint: { stored: false, active: false, specHash: null } };
    expect(kinds(feed(none, [[2500, seen('ours')]]).actions)).toEqual(['capture']); // its first copy, nothing about the file
  });
});

describe('claims only once the result is known (src/core/manifest.ts)', () => {
  const f = fixtures();

  it('CheckpointActivated comes with the report that the manifest was written, not with the decision to write it', () => {
    const decided = feed(f.Silent!.state, [[6600, { type: 'confirmed', outcome: 'unchanged' }]]);
    expect(decided.state.state).toBe('Active');
    expect(kinds(decided.actions)).not.toContain('event:CheckpointActivated');
    const written = feed(decided.state, [[6700, { type: 'activated' }]]);
    expect(kinds(written.actions)).toEqual(['event:CheckpointActivated']);
    expect(events(written.actions)[0]).toMatchObject({
      eventType: 'Normal',
      message: expect.stringMatching(/confirmed by a live read; the checkpoint's manifest is written/),
    });
  });

  it('a failed activation is a Warning ActivationFailed with the error, once per run of failures, never CheckpointActivated', () => {
    const decided = feed(f.Silent!.state, [[6600, { type: 'confirmed', outcome: 'unchanged' }]]);
    const failed = feed(decided.state, [
      [6700, { type: 'actionFailed', action: 'activate', error: "ENOENT: no such file or directory, open '/etc/kubernetes/manifests/.x'" }],
    ]);
    expect(kinds(failed.actions)).toEqual(['event:ActivationFailed']);
    expect(events(failed.actions)[0]).toMatchObject({ eventType: 'Warning', message: expect.stringMatching(/ENOENT.*not covered, trying again in 5s/) });
    const again = feed(failed.state, [
      [11_700, { type: 'tick' }],
      [11_800, { type: 'actionFailed', action: 'activate', error: 'ENOENT' }],
    ]);
    expect(kinds(again.actions)).toEqual(['activate']);
    const written = feed(again.state, [
      [21_800, { type: 'tick' }],
      [21_900, { type: 'activated' }],
    ]);
    expect(kinds(written.actions)).toEqual(['activate', 'event:CheckpointActivated']);
  });

  it('a rewrite of a running copy (port sharing toggled) or a copy found active at a restart is no new activation', () => {
    const active = f.Active!;
    const rewrite = feed({ ...active.state, inflight: { activate: 8000 } }, [[8100, { type: 'activated', exclusive: true }]]);
    expect(kinds(rewrite.actions)).not.toContain('event:CheckpointActivated');
    const found = feed(f.Silent!.state, [[6600, { type: 'activated' }]]);
    expect(kinds(found.actions)).not.toContain('event:CheckpointActivated');
  });

  it('CheckpointCollected only after the collection; a collection refused by its live read says nothing of it', () => {
    const o = f.Orphaned!; // gcGrace passed at 63000: the collection is asked for
    expect(o.state.state).toBe('Orphaned');
    const asked = o.all.flatMap((d) => d.actions);
    expect(kinds(asked)).toContain('collect');
    expect(kinds(asked)).not.toContain('event:CheckpointCollected');
    const refused = feed(o.state, [[63_100, { type: 'schedulingUnknown', why: 'the live read found a pod' }]]);
    expect(kinds(refused.actions)).not.toContain('event:CheckpointCollected');
    expect(kinds(refused.actions)).toContain('event:CollectionCancelled');
    const collected = feed(o.state, [[63_100, { type: 'collected' }]]);
    expect(kinds(collected.actions)).toEqual(['event:CheckpointCollected']);
    expect(collected.state.checkpoint).toEqual({ stored: false, active: false, specHash: null });
  });
});

describe('a restored manifest runs under the uid of the copy before it', () => {
  // A static pod's uid is a hash of its manifest: the copy written again after a removal has the
  // uid of the one the kubelet stopped. Its beats must count (its Ready opens the exit watch and
  // the hang watch), or an overlap parent's exits and hangs beside it are never judged.
  const overlap = fixtures({ ...POLICY, handover: 'overlap' }).Active!;
  const copy = (phase: 'Starting' | 'Ready') => beat(phase, { role: 'checkpoint', holder: 'copy', holderUid: 'copy-1' });

  it('removed and written again: the same uid beating Ready counts as the new copy', () => {
    const ready = feed(overlap.state, [[7000, { type: 'beat', beat: copy('Ready') }]]);
    expect(ready.state.exitWatch.ready).toBe(true);
    const restored = feed(ready.state, [
      [8000, seen('absent')],
      [8100, { type: 'activated' }],
    ]);
    expect(restored.state.checkpoint.active).toBe(true);
    expect(restored.state.exitWatch.ready).toBe(false);
    const again = feed(restored.state, [
      [9000, { type: 'beat', beat: copy('Starting') }],
      [9500, { type: 'beat', beat: copy('Ready') }],
    ]);
    expect(again.state.exitWatch.ready).toBe(true);
    expect(again.state.hang.copyReadyAt).toBe(9500);
  });
});
