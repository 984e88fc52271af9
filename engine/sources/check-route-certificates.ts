import path from 'node:path';
import type { Diagnostic, PathProblem } from '../../core/topology/diagnostic.js';
import { locateProblems } from '../../core/topology/locate.js';
import type { Topology } from '../../core/topology/types.js';
import { PemPairProblem, readPemPair } from '../../platform/pem-pair.js';

/**
 * The certificate files of the topology's TLS routes, checked where the topology was read (its
 * relative paths resolve against `baseDir`): each pair is read, parses, and its key is its
 * certificate's. Located as the loader's own problems are (`topology.yaml:12:15
 * routes.web.tls.certificates[0].key: the key … does not match the certificate …`), so a
 * migration is refused before it starts rather than failing its cutover. The router reads the
 * same files again, with the same check (platform/pem-pair.ts), whenever they change.
 */
export async function routeCertificateProblems(
  topology: Topology,
  source: { text: string; file: string; baseDir: string },
): Promise<Diagnostic[]> {
  const problems: PathProblem[] = [];
  await Promise.all(
    Object.entries(topology.routes).flatMap(([name, route]) =>
      (route.tls?.certificates ?? []).map(async ({ cert, key }, index) => {
        try {
          await readPemPair(path.resolve(source.baseDir, cert), path.resolve(source.baseDir, key));
        } catch (error) {
          if (!(error instanceof PemPairProblem)) throw error;
          const at = ['routes', name, 'tls', 'certificates', index, error.part];
          problems.push({ path: at, message: error.message });
        }
      }),
    ),
  );
  return problems.length === 0 ? [] : locateProblems(source.file, source.text, problems);
}
