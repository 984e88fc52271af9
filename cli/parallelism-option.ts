import { type Command, InvalidArgumentError } from 'commander';

/** The largest `--parallelism` (as the topology schema's strategy.parallelism). */
const maxParallelism = 1000;

/** `--parallelism N`: how many driver calls a migration runs at once, overriding the topology's. */
export function addParallelismOption(command: Command): Command {
  return command.option(
    '--parallelism <n>',
    "how many driver calls run at once (default: the topology's strategy.parallelism, else 10)",
    parseParallelism,
  );
}

export function parseParallelism(value: string): number {
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || n < 1 || n > maxParallelism) {
    throw new InvalidArgumentError(
      `expected a whole number from 1 to ${maxParallelism}, e.g. --parallelism 4.`,
    );
  }
  return n;
}
