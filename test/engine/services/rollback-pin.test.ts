/**
 * A reviewed rollback plan (`--plan-id`, or `planId` after a dry run) pinned against layouts that
 * moved on: the refusal must say why in rollback terms, never "the topology file changed" (a
 * rollback has no file).
 */
import { describe, expect, it } from 'vitest';
import type { CurrentLayout } from '../../../core/layout.js';
import { noSecrets } from '../../../engine/secrets/secret-source.js';
import { localService } from '../../../engine/services/local-service.js';
import { writeCurrentLayout, writeJsonAtomic } from '../../../engine/store/layout-store.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { clone, load, shopDoc } from '../../support/builders.js';
import { resourcesPerTest } from '../../support/resources.js';

const resources = resourcesPerTest();

/** Records shop's layout `serial` with web at `version`, as a commit does. */
async function record(stateDir: StateDir, serial: number, version: string): Promise<void> {
  const doc = clone(shopDoc());
  (doc.components.web as Record<string, unknown>).version = version;
  const layout: CurrentLayout = {
    environment: 'shop',
    serial,
    topology: load(doc),
    committedAt: new Date(serial * 1000).toISOString(),
    migrationId: `mig_${String(serial).padStart(26, '0')}`,
    baseDir: '/srv/shop',
  };
  await writeJsonAtomic(stateDir.layoutHistoryFile('shop', serial), layout);
  await writeCurrentLayout(stateDir, layout);
}

describe('a pinned rollback plan whose layouts moved', () => {
  it('is refused in rollback terms: the same --to now names another layout, or the current one moved', async () => {
    const stateDir = StateDir.at(await resources.tempDir('cutover-rollback-pin-'));
    const service = localService(stateDir, noSecrets);
    await record(stateDir, 1, '1.0.0');
    await record(stateDir, 2, '2.0.0');
    const request = { to: { kind: 'previous' } as const, fallbackBaseDir: '/srv/shop' };
    const reviewed = await service.planRollback('shop', request);
    expect(reviewed.target.serial).toBe(1);
    const planId = reviewed.plan.planId;
    await record(stateDir, 3, '3.0.0');

    // `previous` is serial 2 now: not the layout that was reviewed.
    const moved = service.startRollback('shop', { ...request, planId });
    await expect(moved).rejects.toMatchObject({ code: 'PLAN_MISMATCH' });
    const message = ((await moved.catch((e: unknown) => e)) as Error).message;
    expect(message).not.toContain('topology file changed');
    expect(message).toContain('going back to serial 2 from serial 3');
    expect(message).toContain('cutover topology rollback --to previous');

    // The serial that was reviewed: the current layout moved on since (stale).
    const stale = service.startRollback('shop', { ...request, to: { kind: 'serial', serial: 1 }, planId });
    await expect(stale).rejects.toMatchObject({ code: 'PLAN_STALE' });
  });
});
