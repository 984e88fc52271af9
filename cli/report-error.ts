import { CutoverError, environmentFault, TopologyInvalidError } from '../core/errors.js';
import { formatDiagnostic } from '../core/topology/diagnostic.js';
import { exitCodes } from './exit-codes.js';

/** Prints an error as the CLI shows it and returns the exit code: one clear line per problem. */
export function reportError(error: unknown, stderr: NodeJS.WritableStream = process.stderr): number {
  if (error instanceof TopologyInvalidError) {
    for (const d of error.diagnostics) stderr.write(`${formatDiagnostic(d)}\n`);
    stderr.write(`cutover: ${error.message}\n`);
    return exitCodes[error.code];
  }
  if (error instanceof CutoverError) {
    stderr.write(`cutover: ${error.message}\n`);
    return exitCodes[error.code];
  }
  // A fault of the machine that no layer below named: still one line, with cause and next step.
  const fault = environmentFault(error);
  if (fault) {
    stderr.write(`cutover: ${fault.message}\n`);
    return exitCodes[fault.code];
  }
  const e = error as Error;
  stderr.write(
    `cutover: internal error: ${e?.stack ?? String(error)}\nThis is a bug in cutover; please report it with the command you ran.\n`,
  );
  return exitCodes.INTERNAL;
}
