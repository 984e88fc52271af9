/**
 * When the watcher looks at the branch: triggers (a ref change, a webhook, the safety poll, a fetch
 * interval, a waiting commit's environment coming free) are debounced and coalesced, checks run one
 * at a time, and a trigger that comes during a check runs one more after it. For a remote, fetches
 * too run one at a time, each followed by a check.
 */

/** Triggers closer together than this make one check. */
const debounceMs = 60;
/** ±10 % on a remote's fetch interval, so that many watchers of one remote do not fetch in step. */
const fetchJitter = 0.1;

export interface CheckLoopContext {
  /** Looks at the branch head once. */
  check: () => Promise<void>;
  /** Brings a remote's commits into the cache. */
  fetch: () => Promise<void>;
  log: (line: string) => void;
  /** After every check that no trigger follows at once. */
  afterCheck: () => void;
  intervalMs: number;
}

export class CheckLoop {
  private running: Promise<void> | null = null;
  private again = false;
  private fetching: Promise<void> | null = null;
  private fetchAgain = false;
  private debounce: NodeJS.Timeout | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly context: CheckLoopContext) {}

  /** Coalesces triggers; checks run one at a time, and once more if a trigger came meanwhile. */
  schedule(delay = debounceMs): void {
    if (this.stopped) return;
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.debounce = null;
      void this.runCheck();
    }, delay);
  }

  /** Runs a check now; when one is running, runs one more after it, and resolves when the running one ends. */
  runCheck(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.context
      .check()
      .catch((error: unknown) => this.context.log(`check failed: ${(error as Error).message}`))
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.schedule(0);
        } else {
          this.context.afterCheck();
        }
      });
    return this.running;
  }

  /**
   * Fetches, then checks the head. One fetch at a time: two `git fetch` into one cache would fight
   * over its ref locks (and the loser's push would wait for the next interval); a trigger that
   * comes during a fetch runs one more after it.
   */
  fetchAndCheck(): Promise<void> {
    if (this.fetching) {
      this.fetchAgain = true;
      return this.fetching;
    }
    this.fetching = (async () => {
      do {
        this.fetchAgain = false;
        try {
          await this.context.fetch();
        } catch (error) {
          this.context.log(
            `fetch failed: ${(error as Error).message}; retrying in ${this.context.intervalMs / 1000} s`,
          );
          continue;
        }
        await this.runCheck();
      } while (this.fetchAgain && !this.stopped);
    })().finally(() => {
      this.fetching = null;
    });
    return this.fetching;
  }

  /** A remote: fetches and checks every interval (with jitter). */
  fetchEveryInterval(): void {
    if (this.stopped) return;
    const delay = this.context.intervalMs * (1 - fetchJitter + Math.random() * 2 * fetchJitter);
    this.timer = setTimeout(() => {
      void this.fetchAndCheck().finally(() => this.fetchEveryInterval());
    }, delay);
  }

  /** A local repository: a check every interval, a safety net for ref events a file system may drop. */
  checkEveryInterval(): void {
    this.timer = setInterval(() => this.schedule(), this.context.intervalMs);
  }

  /** No more checks or fetches start; resolves when the ones running have ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.debounce) clearTimeout(this.debounce);
    if (this.timer) {
      clearInterval(this.timer);
      clearTimeout(this.timer);
    }
    await this.fetching;
    await this.running;
  }
}
