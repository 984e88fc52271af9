import type { Socket } from 'node:net';

/**
 * Stopping and restarting reads of a socket whose bytes Node's HTTP parser takes straight from its
 * handle: `socket.pause()` does not stop those (a request's body being read resumes the socket).
 * The handle's readStop/readStart are Node internals: used only when present, else reading is
 * never stopped (what follows is then parsed, and dropped). Node's own flag `reading` is left as it
 * is: set, Node does not restart a handle stopped here; cleared, Node stopped it itself (for its
 * outgoing backpressure) and restarts it itself.
 */
export interface ReadControl {
  stop(): void;
  start(): void;
}

interface StreamHandle {
  reading: boolean;
  readStop(): number;
  readStart(): number;
}

/** The read control of `socket`'s handle, or null where Node's handle lacks what it needs. */
export function readControl(socket: Socket): ReadControl | null {
  const handle = (socket as unknown as { _handle?: Partial<StreamHandle> | null })._handle;
  if (
    !handle ||
    typeof handle.readStop !== 'function' ||
    typeof handle.readStart !== 'function' ||
    typeof handle.reading !== 'boolean'
  )
    return null;
  let stopped = false;
  // The socket's handle, if it still has one and it is the one of the start.
  const live = () => {
    const current = (socket as unknown as { _handle?: StreamHandle | null })._handle;
    return current === handle && !socket.destroyed ? current : null;
  };
  return {
    stop() {
      const current = live();
      if (stopped || !current?.reading) return;
      stopped = true;
      current.readStop();
    },
    start() {
      if (!stopped) return;
      stopped = false;
      const current = live();
      if (current?.reading) current.readStart();
    },
  };
}
