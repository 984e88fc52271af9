import type { Component } from '../topology/types.js';
import type { Change } from './types.js';

/**
 * The image each container component's `image` names now, by component name (`sha256:<hex>`):
 * resolved by the engine before planning (engine/drivers/container-images.ts) and passed in as
 * data, as secrets' digests are, so the plan stays pure. A component left out (no engine to ask,
 * an image not pulled yet) is unknown, which is never a change.
 */
export type ImageDigests = Readonly<Record<string, string>>;

/** Hex digits of an image id shown in a plan: enough to tell two builds apart. */
const shownIdDigits = 12;

/**
 * The change of a component whose `image` text is the same but names another image than the one
 * its live slot runs (a tag moved to a new build): `image app:1 (sha256:abc… → sha256:def…)`
 * in the plan's words. null when the text changed (the field's own diff says so), or either side
 * is unknown, or both are the same image.
 */
export function imageChange(
  old: Component,
  now: Component,
  recordedId: string | undefined,
  currentId: string | undefined,
): Change | null {
  if (now.image === undefined || old.image !== now.image) return null;
  if (recordedId === undefined || currentId === undefined || recordedId === currentId) return null;
  return {
    path: 'image',
    before: shownImage(now.image, recordedId),
    after: shownImage(now.image, currentId),
  };
}

function shownImage(image: string, id: string): string {
  const [algorithm, hex = ''] = id.includes(':') ? id.split(':', 2) : ['sha256', id];
  return `${image} (${algorithm}:${hex.slice(0, shownIdDigits)})`;
}

/** `changes` (in path order) with `change` at the place its path sorts to. */
export function spliceChange(changes: readonly Change[], change: Change): Change[] {
  const at = changes.findIndex((c) => c.path > change.path);
  const index = at === -1 ? changes.length : at;
  return [...changes.slice(0, index), change, ...changes.slice(index)];
}
