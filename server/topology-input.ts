/**
 * A topology in a request: YAML text, or the same document as a JSON object; and where it lives,
 * which names it in diagnostics and is where its relative paths resolve.
 */
import path from 'node:path';
import { TopologyInvalidError, type TopologySource, topologySource } from '../engine/api.js';
import { diagnosticsToErrors, HttpProblem } from './problems.js';

export interface TopologyInput {
  /** Its relative paths resolve beside `path`, taken relative to the server's --workdir. */
  source: TopologySource;
  /** Text has lines and columns to report; an object does not. */
  located: boolean;
}

/** Objects nested deeper than this are refused before any other work (no topology needs 10). */
export const maxObjectDepth = 64;

export function topologyInput(
  value: unknown,
  given: string | undefined,
  workdir: string,
  field: string,
  /** Refuse a path outside `workdir`: the topology is to run (apply), and runs where it lies. */
  confine = false,
): TopologyInput {
  const name = given ?? 'topology.yaml';
  if (confine) confined(workdir, name, field);
  if (typeof value === 'string')
    return { source: topologySource({ text: value, file: name }, workdir), located: true };
  if (depthExceeds(value, maxObjectDepth)) {
    throw new HttpProblem('BAD_REQUEST', `${field} is nested deeper than ${maxObjectDepth} levels`, {
      errors: [{ path: `body/${field}`, message: `nested deeper than ${maxObjectDepth} levels` }],
    });
  }
  // JSON is YAML: the loader validates the object exactly as it would the file.
  return { source: topologySource({ text: JSON.stringify(value), file: name }, workdir), located: false };
}

/**
 * The topology's path, resolved in `--workdir`, or BAD_REQUEST when it lies outside: its directory
 * is where the topology's commands run, so an apply (or a saved plan's `topology.file`) naming
 * `/elsewhere/topology.yaml` or `../../x` would run programs the server was never given. (Validate
 * and plan run nothing of the request's: there the path only names the topology in messages.)
 */
function confined(workdir: string, name: string, field: string): string {
  const root = path.resolve(workdir);
  const resolved = path.resolve(root, name);
  if (resolved.startsWith(`${root}${path.sep}`)) return resolved;
  const named =
    field === 'plan.topology' ? 'plan.topology.file' : field === 'against' ? 'againstPath' : 'path';
  throw new HttpProblem(
    'BAD_REQUEST',
    `${named} ${JSON.stringify(name)} lies outside the server's --workdir, where every topology's relative paths must resolve; give a path inside it (relative, without ..)`,
    { errors: [{ path: `body/${named.replaceAll('.', '/')}`, message: "outside the server's --workdir" }] },
  );
}

/** Iterative, so that a hostile depth cannot overflow the stack. */
function depthExceeds(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop() as [unknown, number];
    if (node === null || typeof node !== 'object') continue;
    if (depth > limit) return true;
    for (const inner of Object.values(node)) stack.push([inner, depth + 1]);
  }
  return false;
}

/** Runs `fn`; a topology's problems come back with lines only when it was sent as text. */
export async function withTopology<T>(input: TopologyInput, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof TopologyInvalidError && !input.located) {
      throw new HttpProblem('TOPOLOGY_INVALID', error.message, {
        errors: diagnosticsToErrors(error.diagnostics, false),
      });
    }
    throw error;
  }
}
