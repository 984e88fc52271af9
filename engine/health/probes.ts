import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { type HostPort, parseHostPort } from '../../core/host-port.js';
import { formatDuration } from '../../core/topology/duration.js';
import { spawnFailure } from '../drivers/spawn-failure.js';

/** The outcome of one probe of one target. */
export interface ProbeResult {
  ok: boolean;
  /** What a person reads after "last:": `503`, `connection refused`, `exit 1: db not ready`. */
  summary: string;
  /** The target refused the connection: nothing listens yet. */
  refused: boolean;
}

/** One thing the gate probes: a replica (http, tcp) or the whole slot (command). */
export interface Probe {
  /** Who is probed, as named in messages: `127.0.0.1:41234`, `command ./check-health`. */
  target: string;
  /** What is done to it: `GET /healthz`, `TCP connect`; empty for a command, whose target says it. */
  action: string;
  /** Resolves with the result, or undefined when `signal` aborted the probe first. Never rejects. */
  run(timeoutMs: number, signal: AbortSignal): Promise<ProbeResult | undefined>;
}

/** A health endpoint's body is read up to this many bytes; bodyMatch sees only these. */
export const maxBodyBytes = 64 * 1024;
/** How much of a mismatching body a message quotes. */
const quotedBodyChars = 60;

function describeError(error: unknown): ProbeResult {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') return { ok: false, summary: 'connection refused', refused: true };
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, summary: code ? `${code} (${message})` : message, refused: false };
}

/**
 * Settles a probe once: with a result, or with undefined when the gate stops it. `start` receives
 * `finish` and returns the cleanup that destroys its socket or process; every way of settling (a
 * result, the probe's timeout, the gate's signal) ends in that cleanup, and later events are ignored.
 */
function settleOnce(
  timeoutMs: number,
  signal: AbortSignal,
  start: (finish: (result: ProbeResult) => void) => () => void,
): Promise<ProbeResult | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    let done = false;
    let cleanup: (() => void) | undefined;
    const settle = (result: ProbeResult | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      cleanup?.();
      resolve(result);
    };
    const onAbort = () => settle(undefined);
    const timer = setTimeout(() => {
      settle({ ok: false, summary: `no answer within ${formatDuration(timeoutMs)}`, refused: false });
    }, timeoutMs);
    signal.addEventListener('abort', onAbort, { once: true });
    cleanup = start(settle);
    if (done) cleanup();
  });
}

export function httpProbe(
  address: string,
  spec: { path: string; expectStatus: number; bodyMatch?: RegExp },
  agent: http.Agent,
): Probe {
  const { host, port } = parseHostPort(address) as HostPort;
  return {
    target: address,
    action: `GET ${spec.path}`,
    run: (timeoutMs, signal) =>
      settleOnce(timeoutMs, signal, (finish) => {
        const request = http.get({ host, port, path: spec.path, agent }, (response) => {
          const status = response.statusCode ?? 0;
          if (status !== spec.expectStatus) {
            response.resume();
            finish({ ok: false, summary: String(status), refused: false });
            return;
          }
          if (!spec.bodyMatch) {
            response.resume();
            finish({ ok: true, summary: String(status), refused: false });
            return;
          }
          const pattern = spec.bodyMatch;
          const chunks: Buffer[] = [];
          let size = 0;
          const judge = () => {
            const body = Buffer.concat(chunks).subarray(0, maxBodyBytes).toString('utf8');
            if (pattern.test(body)) finish({ ok: true, summary: String(status), refused: false });
            else {
              const quoted = JSON.stringify(body.slice(0, quotedBodyChars));
              const more = body.length > quotedBodyChars ? '…' : '';
              finish({
                ok: false,
                summary: `${status}, body ${quoted}${more} does not match /${pattern.source}/`,
                refused: false,
              });
            }
          };
          response.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            size += chunk.length;
            if (size >= maxBodyBytes) judge();
          });
          response.on('end', judge);
          response.on('error', (error) => finish(describeError(error)));
        });
        request.on('error', (error) => finish(describeError(error)));
        return () => request.destroy();
      }),
  };
}

export function tcpProbe(address: string): Probe {
  const { host, port } = parseHostPort(address) as HostPort;
  return {
    target: address,
    action: 'TCP connect',
    run: (timeoutMs, signal) =>
      settleOnce(timeoutMs, signal, (finish) => {
        const socket = net.connect({ host, port });
        socket.on('connect', () => finish({ ok: true, summary: 'connected', refused: false }));
        socket.on('error', (error) => finish(describeError(error)));
        return () => socket.destroy();
      }),
  };
}

/** How many characters of the command's last stderr line a result quotes. */
const quotedStderrChars = 200;

/**
 * Runs the command without a shell, in its own process group so that a timeout or an abort kills
 * whatever it started too. Success is exit 0.
 */
export function commandProbe(argv: string[], cwd: string, env: NodeJS.ProcessEnv): Probe {
  return {
    target: `command ${argv.join(' ')}`,
    action: '',
    run: (timeoutMs, signal) =>
      settleOnce(timeoutMs, signal, (finish) => {
        const child = spawn(argv[0] as string, argv.slice(1), {
          cwd,
          env,
          stdio: ['ignore', 'ignore', 'pipe'],
          detached: true,
        });
        let exited = false;
        let stderrTail = '';
        child.stderr?.setEncoding('utf8');
        child.stderr?.on('data', (text: string) => {
          stderrTail = (stderrTail + text).slice(-4096);
        });
        child.on('error', (error) =>
          finish({
            ok: false,
            summary: `cannot run ${argv[0]}: ${spawnFailure(error, cwd)}`,
            refused: false,
          }),
        );
        child.on('close', (code, signalName) => {
          exited = true;
          if (code === 0) return finish({ ok: true, summary: 'exit 0', refused: false });
          const lastLine = stderrTail.trimEnd().split('\n').at(-1)?.slice(0, quotedStderrChars) ?? '';
          const how = code === null ? `killed by ${signalName}` : `exit ${code}`;
          finish({ ok: false, summary: lastLine ? `${how}: ${lastLine}` : how, refused: false });
        });
        return () => {
          if (exited || child.pid === undefined) return;
          try {
            process.kill(-child.pid, 'SIGKILL');
          } catch {
            // The group is already gone.
          }
        };
      }),
  };
}
