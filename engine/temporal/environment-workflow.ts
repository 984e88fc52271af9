/**
 * The environment workflow: one per environment, keeping its current layout and the earlier ones
 * (for rollbacks and for telling a stale plan). Deterministic code only.
 */
import { condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow';
import { type CurrentLayout, emptyLayout } from '../../core/layout.js';
import {
  defaultKeptLayouts,
  type EnvironmentInput,
  keepLayoutsSignal,
  layoutAtQuery,
  layoutQuery,
  maxHistoryEvents,
  recordLayoutSignal,
} from './workflow-definitions.js';

/**
 * …and at most this much of them as JSON (about 0.4 MB once compressed): they go into the workflow's
 * continue-as-new input, which Temporal refuses over 2 MB. Large layouts keep fewer earlier ones.
 */
const keptLayoutsChars = 8_000_000;

/** The earlier layouts to keep once `previous` is replaced: newest last, bounded in count and size. */
export function keepEarlier(
  earlier: readonly CurrentLayout[],
  previous: CurrentLayout,
  size: (layout: CurrentLayout) => number = (l) => JSON.stringify(l).length,
  keep: number = defaultKeptLayouts,
): CurrentLayout[] {
  const kept = [...earlier, previous].slice(-keep);
  let total = 0;
  let from = kept.length;
  while (from > 0) {
    total += size(kept[from - 1] as CurrentLayout);
    if (total > keptLayoutsChars) break;
    from--;
  }
  return kept.slice(from);
}

/**
 * One per environment, running for as long as the environment exists: the current layout, durable
 * in Temporal and the same for every server and worker. A migration's commit signals the layout it
 * leaves; a repeated signal of the same migration changes nothing.
 */
export async function environmentWorkflow(input: EnvironmentInput): Promise<void> {
  let layout = input.layout ?? emptyLayout(input.environment);
  let earlier = input.earlier ?? [];
  let keep = input.keep ?? defaultKeptLayouts;
  // Each layout's size is measured once (a layout of 10,000 components is 5 MB of JSON).
  let sizes = new Map<number, number>(); // by serial
  const sizeOf = (l: CurrentLayout) => {
    let n = sizes.get(l.serial);
    if (n === undefined) {
      n = JSON.stringify(l).length;
      sizes.set(l.serial, n);
    }
    return n;
  };
  setHandler(layoutQuery, () => layout);
  setHandler(layoutAtQuery, (serial: number) =>
    serial === layout.serial ? layout : (earlier.find((l) => l.serial === serial) ?? null),
  );
  setHandler(keepLayoutsSignal, (n: number) => {
    // Checked by the sender; a bad number from elsewhere must not empty the record.
    if (Number.isInteger(n) && n >= 1) keep = n;
  });
  setHandler(recordLayoutSignal, (next: CurrentLayout) => {
    if (next.migrationId !== undefined && next.migrationId === layout.migrationId) return;
    if (next.serial !== layout.serial + 1) return;
    earlier = keepEarlier(earlier, layout, sizeOf, keep);
    sizes = new Map(earlier.map((l) => [l.serial, sizeOf(l)]));
    layout = next;
  });
  await condition(
    () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxHistoryEvents,
  );
  await continueAsNew<typeof environmentWorkflow>({ environment: input.environment, layout, earlier, keep });
}
