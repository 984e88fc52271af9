import path from 'node:path';
import { createLogUpdate } from 'log-update';
import { CutoverError, environmentFault } from '../../core/errors.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type { LogLine } from '../../core/migration/types.js';
import type { Plan } from '../../core/plan/types.js';
import { isEmptyPlan } from '../../core/plan/types.js';
import { planTopologyFile } from '../../engine/api.js';
import { defaultDrivers } from '../../engine/drivers/default-drivers.js';
import type { MigrationService } from '../../engine/services/migration-service.js';
import { createMigration, hostMigration, spawnRunner, summarize } from '../../engine/services/migrations.js';
import { readTopologyFile } from '../../engine/sources/read-topology-file.js';
import { renderLiveView, renderLogLine } from '../../views/render-migration.js';
import { renderPlanText } from '../../views/render-plan-text.js';
import { styleFor } from '../../views/style.js';
import { confirm } from '../confirm.js';
import { type Remote, remoteFor, type ServerOption } from '../remote/client.js';
import { remoteApply, remoteLog, remotePlan, remoteShow } from '../remote/commands.js';
import { resolveStateDir } from '../state-dir.js';

export interface MigrateOptions extends ServerOption {
  file: string;
  yes?: boolean;
  detach?: boolean;
  planId?: string;
  json?: boolean;
}

/** `cutover topology migrate`, loaded only when that command runs (it pulls in the whole engine). */
export async function runMigrate(options: MigrateOptions): Promise<void> {
  const remote = remoteFor(options);
  if (remote) return runMigrateElsewhere(options, remoteOps(remote));
  if (process.env.WORKFLOW_HOST) {
    const { openMigrationService } = await import('../../engine/services/migration-service.js');
    const service = await openMigrationService('');
    try {
      return await runMigrateElsewhere(options, serviceOps(service));
    } finally {
      await service.close();
    }
  }
  const stateDir = resolveStateDir({ file: options.file });
  const style = styleFor(process.stderr);
  const plan = await planTopologyFile({ file: options.file, against: { kind: 'recorded' } });
  if (!options.json) process.stderr.write(renderPlanText(plan, { style }));
  if (isEmptyPlan(plan)) {
    if (options.json) process.stdout.write(`${JSON.stringify({ migration: null, plan: plan.planId })}\n`);
    process.exitCode = 0;
    return;
  }
  if (options.planId !== undefined && options.planId !== plan.planId) {
    // createMigration says whether the plan is stale or differs; ask it without creating anything.
    await createMigration({ file: options.file, stateDir, planId: options.planId });
  }
  if (!(await confirmed(options, plan.environment))) return;
  // Pin the plan that was shown: if the layout moved meanwhile, this refuses rather than surprises.
  const created = await createMigration({
    file: options.file,
    stateDir,
    planId: options.planId ?? plan.planId,
  });
  if (!created.created) return;
  if (created.notice) process.stderr.write(`cutover: ${created.notice}\n`);
  const { id, environment } = created.spec;
  const hint = options.file === 'topology.yaml' ? '' : ` -f ${options.file}`;
  if (options.detach) {
    const pid = await spawnRunner(stateDir, environment, id);
    if (options.json) process.stdout.write(`${JSON.stringify({ migration: id, runnerPid: pid })}\n`);
    else process.stdout.write(`${id}\n`);
    process.stderr.write(
      `Migration ${id} runs in the background (pid ${pid}). Follow it with:\n  cutover topology migration logs ${id} --follow${hint}\n`,
    );
    return;
  }
  process.stderr.write(
    `\nMigration ${id} started. From another terminal: cutover topology migration pause|rollback|… ${id}${hint}\n\n`,
  );
  const live = process.stderr.isTTY && !options.json;
  const recent: LogLine[] = [];
  const update = live ? createLogUpdate(process.stderr) : null;
  const hosted = await hostMigration(stateDir, environment, id, defaultDrivers(), (line, state) => {
    if (update) {
      recent.push(line);
      if (recent.length > 20) recent.shift();
      update(renderLiveView(state, recent, style));
    } else if (!options.json) {
      process.stderr.write(`${renderLogLine(line, style)}\n`);
    }
  });
  const onSignal = () => {
    // The migration must not die with this terminal: hand it to a background runner.
    void hosted
      .stop()
      .then(async () => {
        update?.done();
        const pid = await spawnRunner(stateDir, environment, id);
        process.stderr.write(`\nInterrupted: ${id} goes on in the background (pid ${pid}).\n`);
        process.exit(130);
      })
      .catch((error: unknown) => {
        process.stderr.write(
          `\ncutover: interrupted, and no background runner could take ${id} over: ${(environmentFault(error) ?? (error as Error)).message.split('\n')[0]}; \`cutover topology migration resume ${id}\` picks it up\n`,
        );
        process.exit(1);
      });
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const final = await hosted.runner.done();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  update?.done();
  const summary = summarize({ stateDir, environment, id }, final);
  if (options.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else process.stdout.write(`${id}: ${summary.status}\n`);
  process.exitCode = final.lifecycle === 'completed' ? 0 : 1;
}

/** What a migration needs from where it runs when that is not this process. */
interface MigrateOps {
  /** For messages: `--server URL`, or `WORKFLOW_HOST=…`. */
  where: string;
  /** The option that reaches it again from another terminal ('' when the environment does). */
  hint: string;
  plan(file: string): Promise<Plan>;
  apply(file: string, planId: string): Promise<MigrationSummary | null>;
  logs(id: string): AsyncGenerator<LogLine>;
  summary(id: string): Promise<MigrationSummary>;
}

function remoteOps(remote: Remote): MigrateOps {
  return {
    where: `on ${remote.base.origin}`,
    hint: ` --server ${remote.base.origin}`,
    plan: (file) => remotePlan(remote, file, { kind: 'recorded' }),
    apply: (file, planId) => remoteApply(remote, file, planId),
    logs: (id) => remoteLog(remote, id, true),
    summary: async (id) => (await remoteShow(remote, id)).summary,
  };
}

function serviceOps(service: MigrationService): MigrateOps {
  return {
    where: `on Temporal (${service.where})`,
    hint: '',
    plan: (file) =>
      planTopologyFile({
        file,
        against: { kind: 'recorded' },
        recordedLayout: (env) => service.currentLayout(env),
      }),
    async apply(file, planId) {
      const started = await service.start({
        text: await readTopologyFile(file),
        file,
        baseDir: path.dirname(path.resolve(file)),
        planId,
      });
      return started.created ? started.summary : null;
    },
    logs: (id) => service.logs(id, { follow: true }),
    summary: async (id) => (await service.show(id)).summary,
  };
}

/** The same, where the migration does not run in this process: a cutover server, or Temporal. */
async function runMigrateElsewhere(options: MigrateOptions, ops: MigrateOps): Promise<void> {
  const style = styleFor(process.stderr);
  const plan = await ops.plan(options.file);
  if (!options.json) process.stderr.write(renderPlanText(plan, { style }));
  if (isEmptyPlan(plan)) {
    if (options.json) process.stdout.write(`${JSON.stringify({ migration: null, plan: plan.planId })}\n`);
    process.exitCode = 0;
    return;
  }
  if (options.planId !== undefined && options.planId !== plan.planId) {
    // Refused with the reason (stale, or a different plan); nothing is started.
    await ops.apply(options.file, options.planId);
  }
  if (!(await confirmed(options, plan.environment))) return;
  const started = await ops.apply(options.file, options.planId ?? plan.planId);
  if (!started) return;
  const { id } = started;
  if (options.detach) {
    if (options.json)
      process.stdout.write(`${JSON.stringify({ migration: id, runnerPid: started.runnerPid })}\n`);
    else process.stdout.write(`${id}\n`);
    process.stderr.write(
      `Migration ${id} runs ${ops.where}. Follow it with:\n  cutover topology migration logs ${id} --follow${ops.hint}\n`,
    );
    return;
  }
  process.stderr.write(
    `\nMigration ${id} started ${ops.where}. From another terminal: cutover topology migration pause|rollback|… ${id}${ops.hint}\n\n`,
  );
  const onSignal = () => {
    process.stderr.write(`\nInterrupted: ${id} goes on ${ops.where}.\n`);
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  for await (const line of ops.logs(id)) {
    if (!options.json) process.stderr.write(`${renderLogLine(line, style)}\n`);
  }
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  const summary = await ops.summary(id);
  if (options.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else process.stdout.write(`${id}: ${summary.status}\n`);
  process.exitCode = summary.lifecycle === 'completed' ? 0 : 1;
}

/** --yes, or a yes on the terminal; false (exit 1) when declined. */
async function confirmed(options: MigrateOptions, environment: string): Promise<boolean> {
  if (options.yes) return true;
  if (!process.stdin.isTTY) {
    throw new CutoverError(
      'USAGE',
      'refusing to migrate without confirmation: standard input is not a terminal; pass --yes',
    );
  }
  if (await confirm(`\nMigrate environment ${environment} with this plan?`)) return true;
  process.stderr.write('Migration not started.\n');
  process.exitCode = 1;
  return false;
}
