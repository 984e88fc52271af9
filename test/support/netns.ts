/**
 * Hosts as Linux network namespaces, for tests of several machines (issue 30): each host a
 * namespace of its own (its own loopback and ports), linked by a veth pair to a bridge in the
 * test's namespace, on a /24 of 198.18.0.0/15 (the benchmarking range: no real network uses it).
 * Everything is named with a tag of this test's own and removed by those names: the namespaces
 * (with their veth ends), the bridge, and the processes `ip netns pids` finds in them.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export interface NetnsHosts {
  /** The address of the test's own end of the bridge (198.18.N.1): what every host can reach. */
  gateway: string;
  /** A host's address (198.18.N.2, .3, …, in the order given). */
  address(host: string): string;
  /** The argv prefix that runs a program inside a host's namespace. */
  exec(host: string): string[];
  /** The pids of every process in a host's namespace. */
  pids(host: string): number[];
  /**
   * Forwards `gateway:<port>` to `target` (host:port on the test's loopback), so the hosts reach a
   * server of the test's (the Temporal dev server) that listens on 127.0.0.1 only.
   */
  forward(target: string): Promise<string>;
  /** Kills what still runs in the namespaces (by pid), removes them, the bridge and the forwards. */
  remove(): Promise<void>;
}

/** Why hosts as namespaces cannot be made here, or undefined when they can (root and `ip`). */
export function netnsUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'network namespaces are Linux only';
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  const ip = spawnSync('ip', ['-V'], { encoding: 'utf8' });
  if (ip.error || ip.status !== 0) return 'the `ip` command (iproute2) is missing';
  return undefined;
}

function ip(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A /24 of 198.18.0.0/15 that no interface of this namespace has an address in. */
function freeSubnet(): string {
  const used = ip(['-4', '-o', 'addr', 'show']);
  for (let attempt = 0; attempt < 50; attempt++) {
    const third = 1 + (randomBytes(1).readUInt8(0) % 254);
    const second = 18 + (randomBytes(1).readUInt8(0) % 2);
    const prefix = `198.${second}.${third}`;
    if (!used.includes(` ${prefix}.`)) return prefix;
  }
  throw new Error('no free /24 in 198.18.0.0/15');
}

/** Makes the hosts; on any failure removes what it made, then throws. */
export async function createNetnsHosts(names: string[]): Promise<NetnsHosts> {
  const tag = randomBytes(3).toString('hex'); // interface names stay within Linux's 15 characters
  const prefix = freeSubnet();
  const gateway = `${prefix}.1`;
  const bridge = `cbr${tag}`;
  const namespace = (host: string) => `cutover-${tag}-${host}`;
  const made: string[] = [];
  const forwards: Server[] = [];
  const sockets = new Set<Socket>();
  const addresses = new Map(names.map((name, i) => [name, `${prefix}.${i + 2}`]));
  const pids = (host: string) =>
    ip(['netns', 'pids', namespace(host)])
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map(Number);
  const remove = async () => {
    for (const server of forwards) server.close();
    for (const socket of sockets) socket.destroy();
    for (const host of made) {
      try {
        for (const pid of pids(host)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
        ip(['netns', 'del', namespace(host)]); // its veth pair goes with it
      } catch {
        // already gone
      }
    }
    try {
      ip(['link', 'del', bridge]);
    } catch {
      // not made
    }
  };
  try {
    ip(['link', 'add', bridge, 'type', 'bridge']);
    ip(['addr', 'add', `${gateway}/24`, 'dev', bridge]);
    ip(['link', 'set', bridge, 'up']);
    for (const [i, host] of names.entries()) {
      const ns = namespace(host);
      ip(['netns', 'add', ns]);
      made.push(host);
      const outside = `cv${tag}${i}`;
      ip(['link', 'add', outside, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      ip(['link', 'set', outside, 'master', bridge, 'up']);
      ip(['-n', ns, 'addr', 'add', `${addresses.get(host)}/24`, 'dev', 'eth0']);
      ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
      ip(['-n', ns, 'link', 'set', 'lo', 'up']);
    }
  } catch (error) {
    await remove();
    throw error;
  }
  return {
    gateway,
    address: (host) => {
      const address = addresses.get(host);
      if (!address) throw new Error(`no host ${host}`);
      return address;
    },
    exec: (host) => ['ip', 'netns', 'exec', namespace(host)],
    pids,
    async forward(target) {
      const [targetHost = '', targetPort = ''] = target.split(':');
      const server = createServer((socket) => {
        const upstream = tcpConnect(Number(targetPort), targetHost);
        sockets.add(socket).add(upstream);
        socket.pipe(upstream).pipe(socket);
        const close = () => {
          socket.destroy();
          upstream.destroy();
          sockets.delete(socket);
          sockets.delete(upstream);
        };
        socket.once('error', close).once('close', close);
        upstream.once('error', close).once('close', close);
      });
      forwards.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, gateway, () => resolve());
      });
      const { port } = server.address() as { port: number };
      return `${gateway}:${port}`;
    },
    remove,
  };
}
