import { readFile, stat } from 'node:fs/promises';
import { CutoverError, environmentFault } from '../../core/errors.js';
import { defaultMaxTopologyBytes } from '../../core/topology/load-topology.js';

/** Reads a topology file, refusing a missing file or one over the size limit before reading it. */
/** `name`: the file as the user named it, in messages (a front end may read it at another path). */
export async function readTopologyFile(
  file: string,
  maxBytes = defaultMaxTopologyBytes,
  name = file,
): Promise<string> {
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new CutoverError('TOPOLOGY_NOT_FOUND', `${name}: no such file (pass the topology with -f FILE)`);
    }
    throw environmentFault(error, `reading ${name}`) ?? error;
  }
  if (size > maxBytes) {
    throw new CutoverError('TOPOLOGY_TOO_LARGE', `${name}: ${size} bytes; the limit is ${maxBytes}`);
  }
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    // A read's error names no file (EISDIR comes from read(2), after the open): name it here.
    throw environmentFault(error, `reading ${name}`) ?? error;
  }
}
