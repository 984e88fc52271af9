/**
 * Webhook deliveries acted on, remembered for a window so that one sent again is not acted on
 * twice. Each is a file in the state directory, `<state>/server/hook-deliveries/<key>`, holding the
 * time it was taken and dated with it (its mtime): every server on the state directory shares them,
 * and a restart forgets nothing.
 *
 * A delivery is known by its signature (the HMAC of its body): only the secret's holder makes one,
 * and one signature is one body. The provider's delivery-id header adds nothing: it is not signed,
 * so a replay may change it, and another body under a known id can only come from the provider,
 * as another delivery.
 *
 * Invariant: a record is seen whole or not at all. It is written aside and then linked in, which
 * fails when the name is taken (looking and recording are one step: of two copies racing in, one
 * wins), or renamed in over an expired or torn one, so that a server reading it meanwhile reads
 * the old record or the new one, never a half-written file it would take for torn.
 */
import { createHash, randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { environmentFault } from '../core/errors.js';

/** How long a delivery is remembered. Longer than `hookMaxAgeMs`, so that a push carrying a timestamp is refused either way. */
export const hookReplayWindowMs = 24 * 60 * 60 * 1000;
/** Records older than the window are removed at most this often (a directory listing and a stat each). */
const pruneEveryMs = 10 * 60 * 1000;
/** Tries to take a record whose file another server removes each time between two looks. */
const takeAttempts = 3;

export class DeliveryLog {
  private prunedAt = 0;
  private pruning: Promise<void> = Promise.resolve();

  constructor(
    private readonly dir: string,
    private readonly windowMs = hookReplayWindowMs,
  ) {}

  /**
   * Records the delivery signed `signature`; returns when it was taken before, within the window
   * (it is a replay, and nothing new is recorded), or null when it is new.
   */
  record(signature: string, now = Date.now()): number | null {
    try {
      mkdirSync(this.dir, { recursive: true });
      const seenAt = this.take(this.file(signature), now);
      this.schedulePrune(now);
      return seenAt;
    } catch (error) {
      throw environmentFault(error, `recording a webhook delivery in ${this.dir}`) ?? error;
    }
  }

  /** Forgets a delivery that was recorded but could not be acted on, so that a retry is taken. */
  forget(signature: string): void {
    rmSync(this.file(signature), { force: true });
  }

  /** Resolves once the prune under way, if any, is done. */
  settled(): Promise<void> {
    return this.pruning;
  }

  private file(signature: string): string {
    return path.join(this.dir, createHash('sha256').update(signature.trim().toLowerCase()).digest('hex'));
  }

  /** Links a new record in; or, when one is there from within the window, when it was taken. */
  private take(file: string, now: number): number | null {
    const aside = path.join(this.dir, `.${randomBytes(8).toString('hex')}.tmp`);
    writeFileSync(aside, String(now));
    // Dated with the clock it was given, so that the prune needs no read of it.
    utimesSync(aside, now / 1000, now / 1000);
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          linkSync(aside, file);
          return null;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        }
        let text: string;
        try {
          text = readFileSync(file, 'utf8');
        } catch (error) {
          // Forgotten or pruned by another server between the two looks: link again.
          if ((error as NodeJS.ErrnoException).code === 'ENOENT' && attempt < takeAttempts) continue;
          throw error;
        }
        const at = Number(text);
        if (text !== '' && Number.isFinite(at) && now - at <= this.windowMs) return at;
        // Expired; or torn (its content lost in a crash, before the delivery was acted on: the
        // trigger is written after the record), so the retry is taken.
        renameSync(aside, file);
        return null;
      }
    } finally {
      rmSync(aside, { force: true });
    }
  }

  /** Starts a prune when one is due, after the request that found it due (not inside it). */
  private schedulePrune(now: number): void {
    if (now - this.prunedAt < pruneEveryMs) return;
    this.prunedAt = now;
    this.pruning = this.pruning.then(() => this.prune(now)).catch(() => undefined);
  }

  /** Removes what is older than the window, by each file's mtime (its record's time). */
  private async prune(now: number): Promise<void> {
    for (const name of await readdir(this.dir)) {
      const file = path.join(this.dir, name);
      try {
        if (now - (await stat(file)).mtimeMs > this.windowMs) await rm(file, { force: true });
      } catch {
        // removed meanwhile by another server
      }
    }
  }
}
