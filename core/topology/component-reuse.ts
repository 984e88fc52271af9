import { own } from '../records.js';
import type { Component } from './types.js';

/** One entry of `components` as a text writes it: its lines, from its key to the next entry's, and their value. */
export interface ComponentLines {
  readonly text: string;
  readonly raw: unknown;
}

/** What the fast YAML path read of `components`, when asked to (a load with a `ComponentReuse`). */
export interface ComponentsRead {
  /** Every entry, by name. */
  readonly lines: ReadonlyMap<string, ComponentLines>;
  /** The entries taken over from the reuse: written in the same lines as in the text loaded before. */
  readonly reused: ReadonlySet<string>;
}

/**
 * Cache: the components of the last topology loaded through it, for loading a nearly equal text next
 * (the two sides of a plan: the file, and the same file at a Git revision or in another version).
 * A component written in exactly the same lines (indentation included) has the same value, passes
 * the schema the same way (the schema judges each component on its own) and normalises to the same
 * model (normalizeComponent reads only its own entry), so it is taken as loaded before rather than
 * parsed, validated and normalised again. Its own checks pass again too when the drivers are written
 * alike; what reaches other components (that its dependencies exist, cycles) is checked again.
 * Made by the caller for the loads it relates, never shared between callers; it holds only what a
 * successful load read, and the models it gives share those components' objects (models are data:
 * nothing changes them).
 */
export class ComponentReuse {
  /** What the last successful load read of its components, and the models it made of them. */
  private read: ComponentsRead | undefined;
  private components: Readonly<Record<string, Component>> = {};
  /** That load's `drivers` as written (JSON): its components passed their checks against them. */
  private drivers: string | undefined;

  /** The lines and value of component `name` in the text loaded before. */
  lines(name: string): ComponentLines | undefined {
    return this.read?.lines.get(name);
  }

  /** The model of component `name` loaded before from this very value (the object the parse took over). */
  component(name: string, raw: unknown): Component | undefined {
    const known = this.read?.lines.get(name);
    return known !== undefined && known.raw === raw ? own(this.components, name) : undefined;
  }

  /**
   * Whether `drivers` (as a text's value gives them) are the ones of the load before, written alike:
   * a component taken over then passes its own checks again (check-topology.ts).
   */
  sameDrivers(drivers: unknown): boolean {
    return this.drivers !== undefined && this.drivers === JSON.stringify(drivers ?? null);
  }

  /**
   * After a successful load: what it read (nothing when the fast path did not read it), its drivers
   * as written, and the components it made.
   */
  remember(
    read: ComponentsRead | undefined,
    drivers: unknown,
    components: Readonly<Record<string, Component>>,
  ): void {
    this.read = read;
    this.drivers = read === undefined ? undefined : JSON.stringify(drivers ?? null);
    this.components = components;
  }
}
