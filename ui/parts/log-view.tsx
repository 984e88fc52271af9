import { useEffect, useRef } from 'preact/hooks';
import type { LogLineJson } from '../types.js';

/** How close to the bottom (px) counts as reading the newest lines. */
const pinSlackPx = 40;

/** The migration's log as it is written; kept scrolled to the newest line unless the reader scrolled up. */
export function LogView({ lines }: { lines: readonly LogLineJson[] }) {
  const box = useRef<HTMLElement>(null);
  const pinned = useRef(true);
  const count = lines.length;
  useEffect(() => {
    const el = box.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, [count]);
  return (
    <section aria-labelledby="log-title" class="card">
      <h2 id="log-title">Log</h2>
      <section
        class="log"
        ref={box}
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (WCAG 2.1.1)
        tabIndex={0}
        aria-label="Migration log"
        onScroll={(e) => {
          const el = e.currentTarget as HTMLElement;
          pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < pinSlackPx;
        }}
      >
        <ol>
          {lines.map((line, i) => (
            <li key={i} class={`log-${line.level}`} data-kind={line.kind}>
              <time dateTime={line.at}>{line.at.slice(11, 19)}</time> {line.message}
            </li>
          ))}
        </ol>
      </section>
    </section>
  );
}
