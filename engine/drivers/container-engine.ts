/**
 * How cutover talks to a container engine: its CLI (podman or docker), run as a child process with
 * the driver's settings. Every call of the container driver goes through `runEngine`, so the
 * runtime, the containers.conf and the remote host apply to all of them alike (a `ps` that read
 * another storage than the `run` before it would see nothing).
 */
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import type { ContainerDriverSpec } from '../../core/topology/types.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { spawnFailure } from './spawn-failure.js';
import { PermanentDriverError } from './types.js';

export type EngineName = 'podman' | 'docker';

/** An engine command that says nothing within this long is stopped (a hung engine, a lost ssh). */
export const engineCallTimeoutMs = 60_000;
/** A pull may take a while on a slow link. */
export const enginePullTimeoutMs = 10 * 60_000;
/** Bytes of an engine command's output kept (a `ps` of many containers, an `inspect`). */
const maxOutputBytes = 16 * 1024 * 1024;

/** The engine as one driver configures it: which CLI, and the flags and environment of every call. */
export interface Engine {
  name: EngineName;
  /** Flags before the subcommand: `--runtime`, `--url` (podman). */
  globalArgs: string[];
  /** Flags of `run` that docker takes there rather than globally (`--runtime`). */
  runArgs: string[];
  /** cutover's environment without its secrets, plus CONTAINERS_CONF / DOCKER_HOST. */
  env: NodeJS.ProcessEnv;
  /** The driver, for messages: `driver ctr (podman)`. */
  label: string;
}

/**
 * The engine of a container driver. `engine` unset: podman if it is on the PATH, else docker, else a
 * permanent error saying to install one. `config` resolves against the topology file's directory.
 */
export function engineOf(driverName: string, spec: ContainerDriverSpec, baseDir: string): Engine {
  const name = spec.engine ?? onPath('podman') ?? onPath('docker');
  if (!name) {
    throw new PermanentDriverError(
      `driver ${driverName}: no container engine found: neither podman nor docker is on the PATH; install one, or set drivers.${driverName}.engine`,
    );
  }
  const env = inheritedEnv();
  const globalArgs: string[] = [];
  const runArgs: string[] = [];
  if (spec.config !== undefined) env.CONTAINERS_CONF = path.resolve(baseDir, spec.config);
  if (name === 'podman') {
    // podman --url is podman-remote, which has no --runtime: the remote service runs its own.
    if (spec.runtime !== undefined && spec.host !== undefined) {
      throw new PermanentDriverError(
        `driver ${driverName}: runtime ${spec.runtime} cannot be chosen for a remote podman (host ${spec.host}): the remote service uses its own runtime; set it in that machine's containers.conf ([engine] runtime) and leave drivers.${driverName}.runtime out`,
      );
    }
    if (spec.runtime !== undefined) globalArgs.push('--runtime', spec.runtime);
    if (spec.host !== undefined) globalArgs.push('--url', spec.host);
  } else {
    if (spec.runtime !== undefined) runArgs.push('--runtime', spec.runtime);
    if (spec.host !== undefined) env.DOCKER_HOST = spec.host;
  }
  return { name, globalArgs, runArgs, env, label: `driver ${driverName} (${name})` };
}

function onPath(program: EngineName): EngineName | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    try {
      accessSync(path.join(dir, program), constants.X_OK);
      return program;
    } catch {
      // Not in this directory.
    }
  }
  return undefined;
}

export interface EngineResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface EngineCall {
  signal: AbortSignal;
  timeoutMs?: number;
  /** Added to the engine's environment for this call (values `--env KEY` reads). */
  env?: Record<string, string>;
}

/**
 * Runs `<engine> <global flags> <args>` and returns its exit code and output; rejects only when
 * the engine cannot be run at all (a permanent error naming the program) or the call is aborted.
 */
export function runEngine(engine: Engine, args: readonly string[], call: EngineCall): Promise<EngineResult> {
  call.signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    execFile(
      engine.name,
      [...engine.globalArgs, ...args],
      {
        env: call.env ? { ...engine.env, ...call.env } : engine.env,
        signal: call.signal,
        timeout: call.timeoutMs ?? engineCallTimeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: maxOutputBytes,
        encoding: 'utf8',
      },
      (error, stdout, stderr) => {
        if (!error) return resolve({ code: 0, stdout, stderr });
        const e = error as NodeJS.ErrnoException & { code?: unknown; killed?: boolean };
        if (call.signal.aborted) return reject(call.signal.reason);
        if (typeof e.code === 'string') {
          return reject(
            new PermanentDriverError(
              `${engine.label}: cannot run ${engine.name}: ${spawnFailure(e)}; or set the driver's engine`,
            ),
          );
        }
        if (e.killed) {
          return reject(
            new Error(
              `${engine.label}: ${engine.name} ${args[0]} did not answer within ${Math.round((call.timeoutMs ?? engineCallTimeoutMs) / 1000)}s; is the engine (or its host) reachable?`,
            ),
          );
        }
        resolve({ code: typeof e.code === 'number' ? e.code : 1, stdout, stderr });
      },
    );
  });
}

/** Like runEngine, but a non-zero exit rejects with the engine's last line of stderr. */
export async function engineOk(
  engine: Engine,
  args: readonly string[],
  call: EngineCall,
  what: string,
): Promise<string> {
  const result = await runEngine(engine, args, call);
  if (result.code !== 0) throw new Error(`${engine.label}: ${what} failed: ${lastLine(result.stderr)}`);
  return result.stdout;
}

/** The last non-empty line of an engine's stderr, without its `Error: ` prefix and log fields. */
export function lastLine(text: string): string {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const last = (lines[lines.length - 1] ?? 'no message').trim();
  return last.replace(/^Error: /, '');
}
