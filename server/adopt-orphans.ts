/**
 * `cutover server` adopts the orphaned migrations of its state directory: once at start and then on
 * a timer, it asks its service to give each in-flight migration whose runner died a new runner,
 * and logs one line per adoption. A migration adopted again and again (its runner keeps dying) is
 * looked at less often, up to a bound, so a crash loop does not become a spawn loop.
 */
import type { Adoption, MigrationService } from '../engine/services/migration-service.js';

/** How often the server looks for orphans: a migration resumes within this, plus a runner's start. */
export const adoptEveryMs = 3_000;
/** The longest wait before a migration adopted (or failed to be) several times is tried again. */
export const adoptBackoffCapMs = 5 * 60_000;

export interface Adopter {
  /** Stops the timer and waits for a look in progress. */
  stop(): Promise<void>;
}

export function adoptOrphansEvery(
  service: Pick<MigrationService, 'adoptOrphans'>,
  log: (line: string) => void,
  everyMs = adoptEveryMs,
): Adopter {
  /** Per migration: how often it was adopted, and not before when it may be again. */
  const tries = new Map<string, { count: number; notBefore: number }>();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let looking: Promise<void> = Promise.resolve();

  const describe = (a: Adoption) => {
    const died = `its runner${a.deadPid === null ? '' : ` (pid ${a.deadPid})`} had died`;
    return a.kind === 'adopted'
      ? `adopted ${a.id} (${a.environment}, ${a.status}): ${died}; a new runner (pid ${a.runnerPid}) drives it`
      : `could not adopt ${a.id} (${a.environment}): ${died}, and a new runner did not start: ${a.error}`;
  };

  const look = async () => {
    const now = Date.now();
    let adoptions: Adoption[];
    try {
      adoptions = await service.adoptOrphans((id) => now >= (tries.get(id)?.notBefore ?? 0));
    } catch (error) {
      log(
        `looking for orphaned migrations failed: ${(error as Error).message}; looking again in ${everyMs / 1000} s`,
      );
      return;
    }
    for (const adoption of adoptions) {
      log(describe(adoption));
      const count = (tries.get(adoption.id)?.count ?? 0) + 1;
      tries.set(adoption.id, {
        count,
        notBefore: now + Math.min(adoptBackoffCapMs, everyMs * 2 ** (count - 1)),
      });
    }
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      looking = look().finally(schedule);
    }, everyMs);
    timer.unref();
  };
  looking = look().finally(schedule);

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await looking.catch(() => undefined);
    },
  };
}
