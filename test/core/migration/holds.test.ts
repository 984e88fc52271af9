import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { replay } from '../../../core/migration/step.js';
import type { Command } from '../../../core/migration/types.js';
import { notificationsOfJournal } from '../../../core/notify/migration-events.js';
import { renderPlanText } from '../../../views/render-plan-text.js';
import { plainStyle } from '../../../views/style.js';
import { clone, load, shopDoc, type TopologyDoc } from '../../support/builders.js';
import { repoRoot } from '../../support/cli.js';
import { Driver, holdSpec, specOf } from '../../support/migration-builders.js';

/** The commands a migration issued, as `kind` plus what tells them apart. */
const shown = (commands: readonly Command[]) =>
  commands.map((c) => {
    switch (c.kind) {
      case 'shift_routes':
        return c.restore ? 'routes:blue' : c.promote ? 'routes:promote' : `shift:${c.greenPercent}`;
      case 'wait':
        return `${c.purpose}:${c.ms}`;
      case 'analyze':
        return `analyze:${c.weight}:${c.ms}`;
      case 'hook':
        return `hook:${c.point}:${c.name}${c.weight === undefined ? '' : `@${c.weight}`}`;
      case 'check_health':
        return `health:${c.component}`;
      default:
        return c.kind;
    }
  });

const successRate = { successRate: { min: 99 } };

describe('shift steps that hold', () => {
  it('keeps the short form and the model of routes without holds as they were', () => {
    const doc = shopDoc();
    doc.routes = { public: { listen: '127.0.0.1:18080', to: 'web', shift: [10, 50, 100] } };
    const route = load(doc).routes.public;
    expect(route).toEqual({
      drain: { timeout: 30_000 },
      listen: '127.0.0.1:18080',
      shift: [10, 50, 100],
      to: 'web',
    });
  });

  it('refuses an analysis without a hold of a duration, naming the field', () => {
    const doc = shopDoc();
    doc.routes = {
      public: {
        listen: '127.0.0.1:18080',
        to: 'web',
        shift: [{ weight: 10, hold: 'manual', analysis: successRate }, 100],
      },
    };
    expect(() => load(doc)).toThrow(/routes\.public\.shift\[0\]\.analysis.*needs a hold of a duration/s);
  });

  it('refuses a manual hold and an analysed hold at the same weight on routes that shift together', () => {
    // Routes shifted together dwell as one step; a manual hold issues no command, so the other
    // route's analysis would never run while the plan printed it.
    const doc = shopDoc();
    doc.routes = {
      public: { listen: '127.0.0.1:18080', to: 'web', shift: [{ weight: 10, hold: 'manual' }, 100] },
      admin: {
        listen: '127.0.0.1:18081',
        to: 'web',
        shift: [{ weight: 10, hold: '2m', analysis: successRate }, 50, 100],
      },
    };
    expect(() => load(doc)).toThrow(
      /routes\.admin\.shift\[0\]\.analysis.*route public holds manual at 10 %.*never run.*drop the manual hold/s,
    );
    // Each at its own weight is fine: the analysis has its timed window.
    (doc.routes.admin as { shift: unknown[] }).shift = [
      { weight: 20, hold: '2m', analysis: successRate },
      100,
    ];
    expect(() => load(doc)).not.toThrow();
  });

  it('names what is wrong with a step once, not every branch a step could have been', () => {
    const doc = shopDoc();
    doc.routes = {
      public: {
        listen: '127.0.0.1:18080',
        to: 'web',
        shift: [{ weight: 10, hold: 'soon' }, { wieght: 50 }, 'ten', 0, 100],
      },
    };
    let message = '';
    try {
      load(doc);
    } catch (error) {
      message = (error as Error).message;
    }
    const listed = JSON.parse(message.slice(message.indexOf('['))) as { path: string; message: string }[];
    const problems = listed.map((p) => `${p.path}: ${p.message}`);
    expect(problems).toEqual([
      'routes.public.shift[0].hold: must be a duration such as 500ms, 30s, 2m or 1m30s, or manual',
      'routes.public.shift[1].weight: is required',
      'routes.public.shift[1].wieght: unknown key; did you mean "weight"? (allowed here: weight, hold, analysis)',
      'routes.public.shift[2]: must be a percentage, e.g. 10, or a step such as { weight: 10, hold: 2m }',
      'routes.public.shift[3]: must be >= 1',
    ]);
  });

  it('waits at each step that holds, after its weight and health checks, then goes on', () => {
    const d = new Driver(holdSpec([{ weight: 10, hold: '2m' }, { weight: 50, hold: '5s' }, 100])).run();
    expect(d.state.lifecycle).toBe('completed');
    const cutover = shown(d.log).filter((k) => /^(shift|hold|health:web)/.test(k));
    expect(cutover).toEqual([
      'health:web',
      'shift:10',
      'health:web',
      'hold:120000',
      'shift:50',
      'health:web',
      'hold:5000',
      'shift:100',
    ]);
  });

  it('shows the holds in the plan', () => {
    const spec = holdSpec([
      { weight: 10, hold: '2m' },
      { weight: 50, hold: '5m', analysis: { ...successRate, latency: { p99: { max: '500ms' } } } },
      100,
    ]);
    const text = renderPlanText(spec.plan, { style: plainStyle });
    expect(text).toContain(
      '10 % for 2m, then 50 % for 5m (analysis: success ≥ 99 %, p99 ≤ 500ms), then 100 %',
    );
  });

  it('examples/progressive plans its holds, analysis and manual step, and runs them in order', () => {
    const file = path.join(repoRoot, 'examples', 'progressive', 'topology.yaml');
    const before = parse(readFileSync(file, 'utf8')) as TopologyDoc;
    const after = clone(before);
    after.components.web = { ...after.components.web, version: '1.1.0' };
    const spec = specOf(before, after);
    const shift = spec.plan.actions.find((a) => a.id === 'cutover:shift');
    expect(shift?.reason).toContain(
      "10 % for 1m (analysis: success ≥ 99 %, p99 ≤ 500ms, p99 ≤ 2× blue's), then 50 % until promoted, then 100 %",
    );
    const d = new Driver(spec).run();
    expect(d.state.lifecycle).toBe('awaiting_promotion');
    expect(shown(d.log).filter((k) => /^(shift|analyze|hook)/.test(k))).toEqual([
      'shift:10',
      'hook:rollout:smoke@10',
      'analyze:10:60000',
      'shift:50',
      'hook:rollout:smoke@50',
    ]);
  });

  it('a pause during a hold goes on with the time it had left', () => {
    const d = new Driver(holdSpec([{ weight: 10, hold: '2m' }, 100]));
    d.run((s) => s.inflight[0]?.kind === 'wait');
    d.verb('pause');
    d.complete(() => 'cancelled');
    expect(d.state.lifecycle).toBe('paused');
    d.verb('resume');
    expect(d.state.inflight[0]).toMatchObject({ kind: 'wait', purpose: 'hold', ms: 120_000 - 5 });
  });
});

describe('a manual hold', () => {
  it('awaits promote, then goes to the next step; the notify event is emitted', () => {
    const d = new Driver(holdSpec([{ weight: 10, hold: 'manual' }, 50, 100])).run();
    expect(d.state.lifecycle).toBe('awaiting_promotion');
    expect(d.notices.at(-1)?.message).toMatch(
      /awaiting promotion at 10 %: run `cutover topology migration promote mig_test`/,
    );
    d.verb('promote');
    expect(d.state.lifecycle).toBe('running');
    d.run();
    expect(d.state.lifecycle).toBe('completed');
    expect(shown(d.log).filter((k) => k.startsWith('shift:'))).toEqual(['shift:10', 'shift:50', 'shift:100']);
    const events = notificationsOfJournal(d.events).map((e) => e.data.event);
    expect(events).toContain('awaiting_promotion');
  });

  it('promote --full skips the remaining steps, straight to 100 %', () => {
    const d = new Driver(
      holdSpec([{ weight: 10, hold: 'manual' }, { weight: 50, hold: 'manual' }, 100]),
    ).run();
    d.verb('promote', true);
    d.run();
    expect(d.state.lifecycle).toBe('completed');
    expect(shown(d.log).filter((k) => k.startsWith('shift:'))).toEqual(['shift:10', 'shift:100']);
    expect(replay(d.events)).toEqual(d.state);
  });

  it('can be rolled back while it waits', () => {
    const d = new Driver(holdSpec([{ weight: 10, hold: 'manual' }, 100])).run();
    d.verb('rollback');
    d.run();
    expect(d.state.lifecycle).toBe('rolled_back');
  });
});

describe('analysis during a hold', () => {
  const spec = () => holdSpec([{ weight: 10, hold: '30s', analysis: successRate }, 50, 100]);

  it('measures the hold with an analyze command, and a pass goes on', () => {
    const d = new Driver(spec()).run();
    expect(d.state.lifecycle).toBe('completed');
    expect(shown(d.log)).toContain('analyze:10:30000');
    expect(d.state.analyses).toEqual([expect.objectContaining({ outcome: 'pass', weight: 10 })]);
  });

  it('a breach rolls back at once, with the figures in the reason, and emits analysis_failed', () => {
    const d = new Driver(spec());
    const reason = 'green 5xx 4.2 % > 1 % over 512 requests at the 10 % step';
    d.analysisOf = () => ({
      outcome: 'breach',
      reason,
      routes: [{ route: 'public', outcome: 'breach', reason }],
    });
    d.run();
    expect(d.state.lifecycle).toBe('rolled_back');
    expect(d.state.ending?.reason).toBe(`analysis failed: ${reason}`);
    // No step after the breach: the next weight is never set.
    expect(shown(d.log).filter((k) => k.startsWith('shift:'))).toEqual(['shift:10']);
    expect(shown(d.log)).toContain('routes:blue');
    const events = notificationsOfJournal(d.events);
    const failed = events.find((e) => e.data.event === 'analysis_failed');
    expect(failed?.data).toMatchObject({ weight: 10, reason, analysis: { route: 'public' } });
    expect(replay(d.events)).toEqual(d.state);
  });

  it('inconclusive passes with a warning in the log', () => {
    const d = new Driver(spec());
    d.analysisOf = () => ({ outcome: 'inconclusive', reason: 'green had 3 requests', routes: [] });
    d.run();
    expect(d.state.lifecycle).toBe('completed');
    const line = d.notices.find((n) => n.kind === 'analysis_passed');
    expect(line).toMatchObject({ level: 'warn' });
    expect(line?.message).toMatch(
      /inconclusive at the 10 % step, passed with a warning: green had 3 requests/,
    );
  });
});

describe('hooks in the flow', () => {
  const hook = (name: string) => ({ name, command: ['true'] });
  const hooks = {
    preRollout: [hook('pre')],
    rollout: [hook('smoke')],
    confirmPromotion: [hook('confirm')],
    postRollout: [hook('post')],
  };

  it('run at their points: preRollout before traffic, rollout at each step, confirm before the commit, post after it', () => {
    const d = new Driver(holdSpec([{ weight: 10, hold: '1s' }, 100], { hooks })).run();
    expect(d.state.lifecycle).toBe('completed');
    const flow = shown(d.log).filter((k) => /^(hook|shift|hold|record_layout|routes)/.test(k));
    expect(flow).toEqual([
      'hook:preRollout:pre',
      'shift:10',
      'hook:rollout:smoke@10',
      'hold:1000',
      'shift:100',
      'hook:rollout:smoke@100',
      'hook:confirmPromotion:confirm',
      'record_layout',
      'routes:promote',
      'hook:postRollout:post',
    ]);
    expect(replay(d.events)).toEqual(d.state);
  });

  it('a failing rollout hook rolls back with its reason', () => {
    const d = new Driver(holdSpec([10, 100], { hooks }));
    d.run(undefined, (c) => (c.kind === 'hook' && c.point === 'rollout' ? 'fail-permanent' : 'ok'));
    expect(d.state.lifecycle).toBe('rolled_back');
    expect(d.state.ending?.reason).toBe('rollout at 10 %: boom');
    expect(shown(d.log).filter((k) => k.startsWith('shift:'))).toEqual(['shift:10']);
  });

  it('a failing confirmPromotion hook rolls back before the commit', () => {
    const d = new Driver(holdSpec([100], { hooks }));
    d.run(undefined, (c) => (c.kind === 'hook' && c.point === 'confirmPromotion' ? 'fail-permanent' : 'ok'));
    expect(d.state.lifecycle).toBe('rolled_back');
    expect(shown(d.log)).not.toContain('record_layout');
  });

  it('a failing postRollout hook is a warning: the migration completes', () => {
    const d = new Driver(holdSpec([100], { hooks }));
    d.run(undefined, (c) => (c.kind === 'hook' && c.point === 'postRollout' ? 'fail-permanent' : 'ok'));
    expect(d.state.lifecycle).toBe('completed');
    expect(d.notices.find((n) => n.kind === 'hook_failed')).toMatchObject({ level: 'warn' });
  });
});
