import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Loaded<T> {
  value: T | null;
  error: Error | null;
  /** Loads again now (a load in flight is let finish first; its answer is then replaced). */
  reload: () => void;
}

/**
 * `load` run now, then again `everyMs` after each answer (null: only when `reload` is called),
 * until the component goes away. One load at a time: a slow server is never asked twice at once.
 */
export function usePoll<T>(
  load: (signal: AbortSignal) => Promise<T>,
  everyMs: number | null,
  key: string,
): Loaded<T> {
  const [value, setValue] = useState<T | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const kick = useRef<() => void>(() => {});
  useEffect(() => {
    const stop = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let busy = false;
    let again = false;
    const run = async () => {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      clearTimeout(timer);
      try {
        const next = await load(stop.signal);
        if (!stop.signal.aborted) {
          setValue(next);
          setError(null);
        }
      } catch (e) {
        if (!stop.signal.aborted) setError(e as Error);
      }
      busy = false;
      if (stop.signal.aborted) return;
      if (again) {
        again = false;
        void run();
      } else if (everyMs !== null) {
        timer = setTimeout(() => void run(), everyMs);
      }
    };
    kick.current = () => void run();
    void run();
    return () => {
      stop.abort();
      clearTimeout(timer);
    };
    // `load` changes with every render; `key` says when it means something else.
  }, [key, everyMs]);
  const reload = useCallback(() => kick.current(), []);
  return { value, error, reload };
}
