/**
 * The one rule for where a topology's relative paths (scripts, build contexts, config files,
 * secrets-file checks, observed slots) resolve: the directory of its file, the file's path taken
 * relative to the directory the front end works in (the CLI's working directory, a server's
 * `--workdir`, a watcher's work tree). It is decided once, where a topology enters the engine, and
 * carried in the `TopologySource` from there: planning and applying the same topology can then
 * never resolve it against two directories.
 */
import path from 'node:path';
import type { TopologySource, TopologyText } from '../services/service-types.js';

/** The directory the relative paths of the topology named `file` resolve against. */
export function baseDirOf(file: string, workdir: string = process.cwd()): string {
  return path.dirname(path.resolve(workdir, file));
}

/** A topology's text and name, with the directory its relative paths resolve against. */
export function topologySource(topology: TopologyText, workdir: string = process.cwd()): TopologySource {
  return { text: topology.text, file: topology.file, baseDir: baseDirOf(topology.file, workdir) };
}
