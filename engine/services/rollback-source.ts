/**
 * `cutover topology rollback --to …`: which recorded layout to go back to, as a topology that an
 * ordinary migration starts from. Going back is a migration like any other (planned against the
 * current layout, green-blue, committed as a new serial): history is never rewritten, and every
 * guarantee of a migration (the gate, zero failed requests, rollback before the commit) holds.
 * Works in every mode whose service can read earlier layouts (`MigrationService.layoutAt`).
 */
import { CutoverError } from '../../core/errors.js';
import type { CurrentLayout } from '../../core/layout.js';
import { topologyText } from '../../core/topology/render-topology.js';
import { shortPlanId } from './migration-common.js';
import type { MigrationService, RollbackTarget, StartRequest } from './service-types.js';

export type { RollbackTarget };

/** What a service needs to find a recorded layout. */
type Layouts = Pick<MigrationService, 'where' | 'currentLayout' | 'layoutAt' | 'find' | 'show'>;

/** The earlier layout found, and the topology (text, name, base directory) to migrate to. */
export interface RollbackSource {
  target: CurrentLayout & { topology: NonNullable<CurrentLayout['topology']> };
  current: CurrentLayout;
  request: Pick<StartRequest, 'text' | 'file' | 'baseDir'>;
}

const serialPattern = /^serial:(\d{1,15})$/;

/** `--to` as written: `previous`, `serial:<n>` or the migration id (the wire form of a server's API). */
export function formatRollbackTarget(to: RollbackTarget): string {
  switch (to.kind) {
    case 'previous':
      return 'previous';
    case 'serial':
      return `serial:${to.serial}`;
    case 'migration':
      return to.id;
  }
}

/**
 * `planRollback` and `startRollback` of a service that can read its recorded layouts (local,
 * Temporal): find the layout, then plan or start it as a topology like any other.
 */
export function rollbackOperations(
  service: Layouts & Pick<MigrationService, 'plan' | 'start'>,
): Pick<MigrationService, 'planRollback' | 'startRollback'> {
  return {
    async planRollback(environment, request) {
      const source = await rollbackSource(service, environment, request.to, request.fallbackBaseDir);
      const { serial, migrationId, committedAt } = source.target;
      return {
        plan: await service.plan(source.request, { kind: 'recorded' }),
        target: {
          serial,
          ...(migrationId === undefined ? {} : { migrationId }),
          ...(committedAt === undefined ? {} : { committedAt }),
        },
        currentSerial: source.current.serial,
      };
    },
    async startRollback(environment, request) {
      const source = await rollbackSource(service, environment, request.to, request.fallbackBaseDir);
      try {
        return await service.start({
          ...source.request,
          ...(request.planId === undefined ? {} : { planId: request.planId }),
          ...(request.attach === undefined ? {} : { attach: request.attach }),
          ...(request.startedBy === undefined ? {} : { startedBy: request.startedBy }),
          // Recorded with it: show, list and the API say what it went back to.
          rolledBackTo: {
            serial: source.target.serial,
            ...(source.target.migrationId === undefined ? {} : { migrationId: source.target.migrationId }),
          },
        });
      } catch (error) {
        if (
          request.planId === undefined ||
          !(error instanceof CutoverError) ||
          error.code !== 'PLAN_MISMATCH'
        ) {
          throw error;
        }
        // The message of `migrate` blames an edited file; a rollback has none: `--to` (e.g.
        // `previous`) names another layout now than when the plan was reviewed.
        const to = formatRollbackTarget(request.to);
        throw new CutoverError(
          'PLAN_MISMATCH',
          `plan ${shortPlanId(request.planId)} is not the plan of going back to serial ${source.target.serial} from serial ${source.current.serial}: --to ${to} named another layout when it was reviewed, or the layouts changed since; run \`cutover topology rollback --to ${to}\` again and review its plan`,
        );
      }
    },
  };
}

/** `previous`, `serial:<n>`, or anything else as a migration id (or a unique prefix of one). */
export function parseRollbackTarget(to: string): RollbackTarget {
  if (to === 'previous') return { kind: 'previous' };
  const serial = serialPattern.exec(to);
  if (serial) return { kind: 'serial', serial: Number(serial[1]) };
  if (to.startsWith('serial:')) {
    throw new CutoverError('USAGE', `--to ${to}: a serial is a whole number, e.g. --to serial:3`);
  }
  if (to.trim() === '') {
    throw new CutoverError('USAGE', '--to is empty: give previous, a migration id or serial:<n>');
  }
  return { kind: 'migration', id: to };
}

/**
 * Finds the recorded layout `to` names in `environment` and renders its topology as a file that
 * loads back to the same model, with the directory its relative paths resolved against when it
 * was recorded (`fallbackBaseDir` for a layout that recorded none).
 */
export async function rollbackSource(
  service: Layouts,
  environment: string,
  to: RollbackTarget,
  fallbackBaseDir: string,
): Promise<RollbackSource> {
  const current = await service.currentLayout(environment);
  if (current.serial === 0) {
    throw new CutoverError(
      'LAYOUT_NOT_FOUND',
      `environment ${environment} has no recorded layout in ${service.where}: nothing was ever migrated there, so there is nothing to roll back to`,
    );
  }
  const { serial, migrationId } = await serialOf(service, environment, to, current);
  if (serial === 0) {
    throw new CutoverError(
      'LAYOUT_NOT_FOUND',
      `${environment}: there is no layout before serial 1, the first one recorded; \`cutover topology down\` stops everything`,
    );
  }
  const layout = await service.layoutAt(environment, serial);
  if (layout === null) {
    throw new CutoverError(
      'LAYOUT_NOT_FOUND',
      `${environment}: layout serial ${serial} is no longer kept (only the last ones are; see CUTOVER_KEEP_LAYOUTS); pick a later one from \`cutover topology migration list --all\``,
    );
  }
  if (migrationId !== undefined && layout.migrationId !== migrationId) {
    throw new CutoverError(
      'STATE_CORRUPT',
      `${environment}: layout serial ${serial} was recorded by ${layout.migrationId ?? 'a take-down'}, not by ${migrationId}; roll back to it by serial (--to serial:${serial}) if it is the one you want`,
    );
  }
  if (layout.topology === null) {
    throw new CutoverError(
      'LAYOUT_NOT_FOUND',
      `${environment}: layout serial ${serial} is the empty layout \`cutover topology down\` recorded; to stop everything again run \`cutover topology down\`, or pick another layout`,
    );
  }
  const file = `${environment}@serial:${serial}`;
  return {
    target: { ...layout, topology: layout.topology },
    current,
    request: {
      text: topologyText(
        layout.topology,
        `layout serial ${serial} of ${environment}, committed ${layout.committedAt ?? ''}`,
      ),
      file,
      baseDir: layout.baseDir ?? fallbackBaseDir,
    },
  };
}

/**
 * The serial `to` names, checked against the current one (0: before the first), and for a
 * migration its full id.
 */
async function serialOf(
  service: Layouts,
  environment: string,
  to: RollbackTarget,
  current: CurrentLayout,
): Promise<{ serial: number; migrationId?: string }> {
  switch (to.kind) {
    case 'previous':
      return { serial: current.serial - 1 };
    case 'serial':
      if (to.serial >= current.serial) {
        throw new CutoverError(
          'LAYOUT_NOT_FOUND',
          to.serial === current.serial
            ? `${environment}: serial ${to.serial} is the current layout; there is nothing to roll back to (try --to previous)`
            : `${environment}: there is no serial ${to.serial}; the current layout is serial ${current.serial}`,
        );
      }
      return { serial: to.serial };
    case 'migration': {
      const id = await service.find(to.id);
      const { state } = await service.show(id);
      if (state.spec.environment !== environment) {
        throw new CutoverError(
          'ENVIRONMENT_MISMATCH',
          `${id} migrated environment ${state.spec.environment}, not ${environment}; give the topology file of ${state.spec.environment} with -f`,
        );
      }
      if (state.committedAt === null) {
        throw new CutoverError(
          'LAYOUT_NOT_FOUND',
          `${id} never committed (it is ${state.lifecycle.replace('_', ' ')}), so it recorded no layout; \`cutover topology migration list --all\` shows the completed ones`,
        );
      }
      const serial = state.spec.base.serial + 1;
      if (serial === current.serial) {
        throw new CutoverError(
          'LAYOUT_NOT_FOUND',
          `${environment}: ${id} committed the current layout (serial ${serial}); there is nothing to roll back to (try --to previous)`,
        );
      }
      return { serial, migrationId: id };
    }
  }
}
