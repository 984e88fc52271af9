/**
 * The notifications of the switch of stateful components (issue 28), derived from transitions as
 * every notification is (migration-events.ts): a write hold begun (a `hold_routes` succeeded), a
 * write hold ended (the switch was released: its held requests went on, to green or back to
 * blue), the gate finding green trailing blue by more than maxLag (a `check_health` whose result
 * carried `lagging` and left the gate waiting: `wait_lag`), and that lag back within bounds.
 */
import { describeLagAmount, lagCaughtUpMessage } from '../migration/replication-lag.js';
import type { Command, MigrationEvent, MigrationState } from '../migration/types.js';
import { formatDuration } from '../topology/duration.js';
import type { EventDetail, NotifyEventName } from './types.js';

export function switchNotifications(
  before: MigrationState,
  event: MigrationEvent,
  after: MigrationState,
): Array<[NotifyEventName, EventDetail]> {
  if (event.type !== 'command_succeeded') return heldEnded(before, event, after, undefined);
  const command = before.inflight.find((c) => c.id === event.commandId);
  const found: Array<[NotifyEventName, EventDetail]> = [];
  if (command?.kind === 'hold_routes') found.push(holdStarted(command));
  found.push(...heldEnded(before, event, after, command));
  if (command?.kind === 'check_health' && event.lagging) {
    const lag = event.lagging;
    const waiting = after.inflight.some((c) => c.kind === 'wait_lag' && c.component === command.component);
    if (waiting)
      found.push([
        'replication_lagging',
        {
          message: `replication lagging: green ${lag.component} trails blue by ${describeLagAmount(lag)}, more than maxLag ${formatDuration(lag.maxLagMs)}; the health gate waits`,
          component: lag.component,
          lag: { lagMs: lag.lagMs, lagBytes: lag.lagBytes, maxLagMs: lag.maxLagMs },
        },
      ]);
  }
  if (command?.kind === 'wait_lag') {
    const lag = event.lagging;
    found.push([
      'replication_caught_up',
      {
        message: lagCaughtUpMessage(lag, command.component),
        component: command.component,
        ...(lag ? { lag: { lagMs: lag.lagMs, lagBytes: lag.lagBytes, maxLagMs: lag.maxLagMs } } : {}),
      },
    ]);
  }
  return found;
}

function holdStarted(command: Extract<Command, { kind: 'hold_routes' }>): [NotifyEventName, EventDetail] {
  return [
    'write_hold_started',
    {
      message: `write hold on ${command.routes.join(', ')}: requests held (budget ${formatDuration(command.budgetMs)}, at most ${command.maxHeld}) while ${command.from} is fenced and the other side catches up`,
      routes: command.routes,
      hold: {
        routes: command.routes,
        from: command.from,
        budgetMs: command.budgetMs,
        maxHeld: command.maxHeld,
      },
    },
  ];
}

/** The switch was released by this event: the routes set without the hold. */
function heldEnded(
  before: MigrationState,
  event: MigrationEvent,
  after: MigrationState,
  command: Command | undefined,
): Array<[NotifyEventName, EventDetail]> {
  const sw = before.switch;
  if (!sw || sw.released || !after.switch?.released) return [];
  const durationMs = Math.max(0, event.at - sw.heldAt);
  const heldCount = event.type === 'command_succeeded' ? event.switched?.heldCount : undefined;
  const toBlue =
    (command?.kind === 'shift_routes' || command?.kind === 'apply_route') &&
    (command.restore || command.greenPercent < 100);
  const releasedTo = toBlue ? 'blue' : 'green';
  const routes =
    command?.kind === 'shift_routes'
      ? command.routes
      : command?.kind === 'apply_route'
        ? [command.route]
        : [];
  const held =
    heldCount === undefined ? 'the held requests' : `${heldCount} held request${heldCount === 1 ? '' : 's'}`;
  return [
    [
      'write_hold_ended',
      {
        message: `write hold ended after ${durationMs} ms: the held requests went to ${releasedTo}${held}`,
        routes,
        hold: {
          routes,
          releasedTo,
          durationMs,
          ...(heldCount === undefined ? {} : { heldCount }),
        },
      },
    ],
  ];
}
