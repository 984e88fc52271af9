import { readdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { emptyLayout } from '../../../core/layout.js';
import {
  keptLayouts,
  readCurrentLayout,
  readLayoutAt,
  recordEmptyLayout,
} from '../../../engine/store/layout-store.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { tempDir } from '../../support/cli.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function stateDir(): Promise<StateDir> {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  return StateDir.at(dir);
}

/** Records `n` layouts one after the other, keeping `keep`; the serials left in the history. */
async function recordMany(state: StateDir, n: number, keep: number): Promise<number[]> {
  for (let i = 0; i < n; i++) {
    await recordEmptyLayout(state, await readCurrentLayout(state, 'shop'), keep);
  }
  return readdirSync(state.layoutHistoryDir('shop'))
    .map((name) => Number(name.replace('.json', '')))
    .sort((a, b) => a - b);
}

describe('the recorded layouts', () => {
  it('keep the last N when a layout is recorded, the current one always among them', async () => {
    const state = await stateDir();
    expect(await recordMany(state, 6, 3)).toEqual([4, 5, 6]);
    expect((await readCurrentLayout(state, 'shop')).serial).toBe(6);
    expect(await readLayoutAt(state, 'shop', 3)).toBeNull();
    expect((await readLayoutAt(state, 'shop', 4))?.serial).toBe(4);
    // Keeping one keeps the current layout and nothing before it.
    expect(await recordMany(state, 1, 1)).toEqual([7]);
  });

  it('keep 20 by default; CUTOVER_KEEP_LAYOUTS sets how many, and a bad value is refused by name', () => {
    expect(keptLayouts({})).toBe(20);
    expect(keptLayouts({ CUTOVER_KEEP_LAYOUTS: '5' })).toBe(5);
    for (const bad of ['0', '-1', 'ten', '2.5']) {
      expect(() => keptLayouts({ CUTOVER_KEEP_LAYOUTS: bad })).toThrow(
        expect.objectContaining({
          code: 'USAGE',
          message: expect.stringContaining(`CUTOVER_KEEP_LAYOUTS=${bad}: not a whole number`),
        }),
      );
    }
  });

  it('an empty layout recorded from nothing starts the history at serial 1', async () => {
    const state = await stateDir();
    await recordEmptyLayout(state, emptyLayout('shop'), 20);
    expect((await readLayoutAt(state, 'shop', 1))?.topology).toBeNull();
  });
});
