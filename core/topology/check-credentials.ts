import { credentialShapesInHeader, credentialShapesInUrl } from '../redact.js';
import type { PathProblem } from './diagnostic.js';
import type { TopologyFile } from './file-types.js';
import { hookPoints } from './hook-types.js';

/**
 * A hook's or a notify target's URL written with a credential in it (`https://user:pw@…`,
 * `?token=…`, a Slack webhook's path) is refused: the topology that runs is recorded as written
 * (the journal's first line, the layouts), so such a URL would be kept in files and shown to
 * whoever reads them. `{ secret: NAME }` takes its place: read where the migration runs, in no file.
 * The same holds for an http hook's header written in plain text that carries a credential
 * (`Authorization: Bearer …`, `X-Api-Key`).
 */
export function checkInlineCredentials(file: TopologyFile): PathProblem[] {
  const problems: PathProblem[] = [];
  const refuse = (shapes: string[], path: (string | number)[], field: string) => {
    if (shapes.length === 0) return;
    problems.push({
      path,
      message: `holds a credential in plain text (${shapes.join(', ')}), which the record of the topology would keep; write ${field}: { secret: NAME } and set NAME where migrations run ($CUTOVER_SECRET_NAME or the secrets file)`,
    });
  };
  const check = (url: unknown, path: (string | number)[]) => {
    if (typeof url === 'string') refuse(credentialShapesInUrl(url), path, 'url');
  };
  for (const [name, target] of Object.entries(file.notify ?? {})) {
    if (target.type !== 'command') check(target.url, ['notify', name, 'url']);
  }
  for (const point of hookPoints) {
    (file.strategy?.hooks?.[point] ?? []).forEach((hook, i) => {
      check(hook.http?.url, ['strategy', 'hooks', point, i, 'http', 'url']);
      for (const [name, value] of Object.entries(hook.http?.headers ?? {})) {
        if (typeof value !== 'string') continue;
        const path = ['strategy', 'hooks', point, i, 'http', 'headers', name];
        refuse(credentialShapesInHeader(name, value), path, name);
      }
    });
  }
  return problems;
}
