/**
 * Webhook deliveries taken, remembered for a window so that one sent again is refused. Each is
 * kept as files in the state directory, `<state>/server/hook-deliveries/<key>`, created with
 * O_EXCL: looking and recording are one step (two copies racing in: one wins), every server on the
 * state directory shares them, and a restart forgets nothing.
 *
 * A delivery is known by its signed body (the HMAC: a signature is never made twice for different
 * bodies, and the provider's delivery-id header is not signed, so an attacker can change it) and
 * by its delivery id when it has one (a provider re-sending a delivery as it was).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { environmentFault } from '../engine/errors.js';

/** How long a delivery is remembered. Longer than `hookMaxAgeMs`, so that a push carrying a timestamp is refused either way. */
export const hookReplayWindowMs = 24 * 60 * 60 * 1000;
/** Files older than the window are removed at most this often (a directory listing). */
const pruneEveryMs = 10 * 60 * 1000;

export interface DeliveryKey {
  /** How the refusal names it: `delivery 1f2e…`, `this signed body`. */
  what: string;
  value: string;
}

export class DeliveryLog {
  private prunedAt = 0;

  constructor(
    private readonly dir: string,
    private readonly windowMs = hookReplayWindowMs,
  ) {}

  /**
   * Records a delivery under each of its keys; returns the first key already recorded within the
   * window (the delivery is a replay, and nothing new is recorded), or null.
   */
  record(keys: readonly DeliveryKey[], now = Date.now()): { what: string; at: number } | null {
    try {
      mkdirSync(this.dir, { recursive: true });
      this.prune(now);
      const made: string[] = [];
      for (const key of keys) {
        const file = this.file(key);
        const seenAt = this.take(file, now);
        if (seenAt !== null) {
          for (const m of made) rmSync(m, { force: true });
          return { what: key.what, at: seenAt };
        }
        made.push(file);
      }
      return null;
    } catch (error) {
      throw environmentFault(error, `recording a webhook delivery in ${this.dir}`) ?? error;
    }
  }

  /** Forgets a delivery that was recorded but could not be acted on, so that a retry is taken. */
  forget(keys: readonly DeliveryKey[]): void {
    for (const key of keys) rmSync(this.file(key), { force: true });
  }

  private file(key: DeliveryKey): string {
    return path.join(this.dir, createHash('sha256').update(key.value).digest('hex'));
  }

  /** Creates the key's file; or, when it exists from within the window, when it was recorded. */
  private take(file: string, now: number): number | null {
    try {
      writeFileSync(file, String(now), { flag: 'wx' });
      return null;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const text = readFileSync(file, 'utf8');
    const at = Number(text);
    // Empty or torn: a crash came between creating the file and writing it, before the delivery
    // was acted on (its trigger is written after), so the retry is taken. Expired: taken too.
    if (text === '' || !Number.isFinite(at) || now - at > this.windowMs) {
      writeFileSync(file, String(now));
      return null;
    }
    return at;
  }

  private prune(now: number): void {
    if (now - this.prunedAt < pruneEveryMs) return;
    this.prunedAt = now;
    for (const name of readdirSync(this.dir)) {
      const file = path.join(this.dir, name);
      try {
        // The time recorded in it (the clock `record` was given); a torn file's own time else.
        const text = readFileSync(file, 'utf8');
        const at = text === '' || !Number.isFinite(Number(text)) ? statSync(file).mtimeMs : Number(text);
        if (now - at > this.windowMs) rmSync(file, { force: true });
      } catch {
        // removed meanwhile by another server
      }
    }
  }
}
