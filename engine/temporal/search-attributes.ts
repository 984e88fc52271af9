/**
 * The custom search attributes cutover's migration workflows carry: `migration list` filters on
 * them, `show` finds a migration by them, and every start sets them. A namespace without them
 * refuses those calls with a bare "Failed to start Workflow", so clients and workers check once, on
 * connecting, and name what is missing and the command that adds it.
 */
import { CutoverError } from '../../core/errors.js';
import {
  connectTimeoutMs,
  isNamespaceNotFound,
  noNamespace,
  type TemporalSettings,
  unreachable,
  withDeadline,
} from './connection.js';

/** Each of type Keyword. */
export const cutoverSearchAttributes = ['CutoverEnvironment', 'CutoverMigrationId', 'CutoverState'] as const;

/** The one call needed, as both the client's Connection and the worker's NativeConnection offer it. */
export interface SearchAttributeLister {
  listSearchAttributes(request: {
    namespace: string;
  }): Promise<{ customAttributes?: Record<string, unknown> | null }>;
}

/** gRPC codes for "you may not ask" and "this server has no such call": the check cannot tell. */
const permissionDenied = 7;
const unimplemented = 12;

/**
 * Resolves when the namespace has all of cutover's search attributes; rejects with one line naming
 * the missing ones and the `temporal` command that adds them. A Temporal that does not let this
 * client list them is given the benefit of the doubt: its own refusal comes later.
 */
export async function requireSearchAttributes(
  operator: SearchAttributeLister,
  settings: TemporalSettings,
): Promise<void> {
  let defined: string[];
  try {
    const listed = await withDeadline(
      operator.listSearchAttributes({ namespace: settings.namespace }),
      connectTimeoutMs,
    );
    defined = Object.keys(listed.customAttributes ?? {});
  } catch (error) {
    if (isNamespaceNotFound(error)) throw noNamespace(settings);
    const code = (error as { code?: unknown }).code;
    if (code === permissionDenied || code === unimplemented) return;
    throw unreachable(settings, error);
  }
  const missing = cutoverSearchAttributes.filter((name) => !defined.includes(name));
  if (missing.length > 0) throw missingSearchAttributes(settings, missing);
}

function missingSearchAttributes(settings: TemporalSettings, missing: readonly string[]): CutoverError {
  const { address, namespace } = settings;
  const one = missing.length === 1;
  // One command per attribute: the CLI's --name repeats, but its one --type then adds the first only.
  const command = missing
    .map(
      (name) =>
        `temporal operator search-attribute create --address ${address} --namespace ${namespace} --name ${name} --type Keyword`,
    )
    .join(' && ');
  const secured =
    settings.tls || settings.apiKey ? ' (with the TLS or API key options you connect with)' : '';
  return new CutoverError(
    'ENVIRONMENT_FAULT',
    `Temporal namespace ${namespace} (WORKFLOW_HOST=${address}) lacks the search attribute${one ? '' : 's'} ${missing.join(', ')} that cutover needs; add ${one ? 'it' : 'them'}: ${command}${secured}`,
  );
}
