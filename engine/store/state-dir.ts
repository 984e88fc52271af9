import path from 'node:path';

/** The state directory: `CUTOVER_STATE_DIR`, else `.cutover/` beside the topology file. */
export function stateDirFor(topologyFile: string, env: NodeJS.ProcessEnv = process.env): string {
  const override = env.CUTOVER_STATE_DIR;
  if (override) return path.resolve(override);
  return path.join(path.dirname(path.resolve(topologyFile)), '.cutover');
}
