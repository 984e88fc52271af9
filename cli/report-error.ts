import { CutoverError, environmentFault, TopologyInvalidError } from '../core/errors.js';
import { formatDiagnostic } from '../core/topology/diagnostic.js';
import { exitCodes } from './exit-codes.js';

/** Where an error goes: one line of text on stderr, or (with --json) one JSON document on stdout. */
export interface ErrorOutput {
  json: boolean;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/**
 * Prints an error as the CLI shows it and returns the exit code: one clear line per problem, or
 * with --json `{"error": {"code", "message"}}` on stdout (where a caller reading JSON reads), with
 * `diagnostics` for an invalid topology. The exit code is the same either way.
 */
export function reportError(error: unknown, output: ErrorOutput): number {
  const { stdout, stderr } = output;
  const known = error instanceof CutoverError ? error : environmentFault(error);
  if (output.json) {
    const body = known
      ? {
          code: known.code,
          message: known.message,
          ...(known instanceof TopologyInvalidError ? { diagnostics: known.diagnostics } : {}),
        }
      : { code: 'INTERNAL', message: `internal error: ${(error as Error)?.message ?? String(error)}` };
    stdout.write(`${JSON.stringify({ error: body }, null, 2)}\n`);
    if (!known) stderr.write(`${(error as Error)?.stack ?? String(error)}\n`);
    return exitCodes[known?.code ?? 'INTERNAL'];
  }
  if (error instanceof TopologyInvalidError) {
    for (const d of error.diagnostics) stderr.write(`${formatDiagnostic(d)}\n`);
    stderr.write(`cutover: ${error.message}\n`);
    return exitCodes[error.code];
  }
  // A fault of the machine that no layer below named is still one line, with cause and next step.
  if (known) {
    stderr.write(`cutover: ${known.message}\n`);
    return exitCodes[known.code];
  }
  const e = error as Error;
  stderr.write(
    `cutover: internal error: ${e?.stack ?? String(error)}\nThis is a bug in cutover; please report it with the command you ran.\n`,
  );
  return exitCodes.INTERNAL;
}

/** Whether the command line asks for JSON (`--json`, `--format json`), before any `--`. */
export function wantsJson(argv: readonly string[]): boolean {
  const args = argv.slice(2);
  const end = args.indexOf('--');
  const own = end < 0 ? args : args.slice(0, end);
  return own.some(
    (a, i) => a === '--json' || a === '--format=json' || (a === '--format' && own[i + 1] === 'json'),
  );
}
