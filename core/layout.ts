import type { Topology } from './topology/types.js';

/**
 * The layout that is live now in one environment: the last committed topology and its serial. The
 * serial increases at every commit; a plan records the serial it was computed against.
 */
export interface CurrentLayout {
  environment: string;
  serial: number;
  /** null before the first commit: everything in a topology is then new. */
  topology: Topology | null;
  committedAt?: string;
  /** The live slot of each component, as its driver reported it. */
  slots?: Record<string, SlotInfo>;
  /** The migration that committed this layout (makes recording it idempotent). */
  migrationId?: string;
  /** Directory of the topology file it was migrated from: its relative paths resolve here. */
  baseDir?: string;
}

export function emptyLayout(environment: string): CurrentLayout {
  return { environment, serial: 0, topology: null };
}

/**
 * What a driver reports about one slot (blue or green) of a component: enough for health checks,
 * routing and retirement. Serialisable: it is journaled and kept in the layout.
 */
export interface SlotInfo {
  component: string;
  slot: Slot;
  version: string;
  /** host:port of each replica, when the component serves traffic. */
  addresses: string[];
  /** Driver-specific details (pids, resource ids…), passed back to the driver as they are. */
  details?: Record<string, unknown>;
  /**
   * Keyed hashes of the secrets the slot was given, by `env` key (`hmac-sha256:<key id>:<hex>`),
   * recorded at its provision: how the next plan tells that a secret changed without its value.
   */
  secretDigests?: Record<string, string>;
  /**
   * The image the slot runs (`sha256:<hex>`), for a container component: what its tag named at
   * provision, so the next plan sees a tag moved to another image as a change.
   */
  imageId?: string;
}

export type Slot = 'blue' | 'green';

/**
 * A write hold on a route (the switch of a stateful component, issue 28): what the router does with
 * it is said at RoutingEntry.hold (router/route-table.ts).
 */
export interface WriteHold {
  /** Names this hold (the migration's hold command id): a table with another id is another hold. */
  id: string;
  /** When the engine started it (epoch ms). */
  since: number;
  /** Epoch ms after which the router releases what it holds by the weights and holds nothing new. */
  expiresAt: number;
  /** How many requests it holds at most; the next ones are answered 503 with Retry-After. */
  maxHeld: number;
}
