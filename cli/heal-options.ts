import type { Command } from 'commander';
import { CutoverError } from '../core/errors.js';
import { parseDuration } from '../core/topology/duration.js';

/** `--self-heal`, `--heal-interval`, `--heal-max-repairs`, as commander gives them. */
export interface HealCommandOptions {
  selfHeal?: boolean;
  healInterval: string;
  healMaxRepairs: string;
}

/** Shortest look interval: each look observes every driver of every environment. */
const minHealIntervalMs = 100;

/** Adds the self-heal options to `watch` or `server`; `what`: the environments it keeps. */
export function addHealOptions(command: Command, what: string): Command {
  return command
    .option(
      '--self-heal',
      `keep ${what} as recorded: on an interval, repair drift (a dead replica, a route not served) with a migration of its recorded topology`,
    )
    .option('--heal-interval <duration>', 'with --self-heal, how often to look for drift', '10s')
    .option(
      '--heal-max-repairs <n>',
      'with --self-heal, repairs of one environment per hour; one more stops healing it, and says so',
      '6',
    );
}

/** The options checked, or undefined without --self-heal. */
export function healOptions(
  options: HealCommandOptions,
): { intervalMs: number; maxRepairsPerHour: number } | undefined {
  if (!options.selfHeal) return undefined;
  const intervalMs = parseDuration(options.healInterval);
  if (intervalMs === undefined || intervalMs < minHealIntervalMs) {
    throw new CutoverError(
      'USAGE',
      `--heal-interval: expected a duration of at least ${minHealIntervalMs}ms like 10s or 1m, not ${options.healInterval}`,
    );
  }
  const maxRepairsPerHour = Number(options.healMaxRepairs);
  if (!Number.isInteger(maxRepairsPerHour) || maxRepairsPerHour < 1) {
    throw new CutoverError(
      'USAGE',
      `--heal-max-repairs: expected an integer ≥ 1, not ${options.healMaxRepairs}`,
    );
  }
  return { intervalMs, maxRepairsPerHour };
}
