/**
 * `cutover topology status`: an environment as recorded and as observed, like
 * `kubectl argo rollouts get rollout`. Pure: takes the status and a style, returns text.
 */
import type {
  EnvironmentStatus,
  HealthProbe,
  ReplicaStatus,
  RouteStatus,
} from '../core/environment-status.js';
import { describeFigure } from '../core/migration/replication-lag.js';
import type { ReplicaState } from '../core/observed.js';
import type { Style } from './style.js';

/** `2026-11-25 15:04:05` (UTC), or `-`. */
function when(iso: string | null): string {
  return iso === null ? '-' : iso.replace('T', ' ').slice(0, 19);
}

export function renderStatusText(status: EnvironmentStatus, style: Style): string {
  const lines = [
    `${style.bold('Environment:')}  ${status.environment}`,
    `  serial:     ${status.serial}${status.serial === 0 ? ' (nothing committed yet)' : ''}`,
    `  committed:  ${when(status.committedAt)}${status.committedAt === null ? '' : ' UTC'}`,
    `  observed:   ${when(status.observedAt)} UTC`,
    `  migration:  ${status.migration ? `${status.migration.id} ${style.yellow(status.migration.status)}` : 'none in flight'}`,
  ];
  const analysis = status.migration?.analysis;
  if (analysis) {
    const outcome = analysis.outcome === 'breach' ? style.red(analysis.outcome) : analysis.outcome;
    lines.push(`  analysis:   ${outcome} at ${analysis.weight} %: ${analysis.reason}`);
  }
  for (const figure of status.migration?.replication ?? []) {
    const text = `  lag:        ${describeFigure({ ...figure, measuredAt: Date.parse(figure.measuredAt) }, (ms) => `${when(new Date(ms).toISOString())} UTC`)}`;
    lines.push(figure.waiting ? style.yellow(text) : text);
  }
  lines.push('', style.bold('Components:'));
  if (status.components.length === 0) lines.push(style.dim('  none'));
  for (const c of status.components) {
    const running = c.replicas.filter((r) => r.state === 'running').length;
    // Unknown (a driver that cannot observe) is no replica down, and never drift: counted apart.
    const unknown = c.replicas.filter((r) => r.state === 'unknown').length;
    const count = `${running}/${c.replicas.length} running${unknown > 0 ? `, ${unknown} unknown` : ''}`;
    const down = c.replicas.length - running - unknown;
    const mark = down > 0 ? style.red(count) : unknown > 0 ? style.dim(count) : style.green(count);
    const on = c.host === undefined ? '' : `  on host ${c.host}`;
    lines.push(`  ${style.bold(c.name)}  ${c.version}  slot ${c.slot}${on}  ${mark}`);
    for (const r of c.replicas) lines.push(`    ${replicaLine(r, style)}`);
  }
  lines.push('', style.bold('Routes:'));
  if (status.routes.length === 0) lines.push(style.dim('  none'));
  for (const r of status.routes) lines.push(`  ${routeLine(r, style)}`);
  lines.push('');
  if (status.drift.length === 0) {
    lines.push(style.green('No drift: what runs matches the record.'));
  } else {
    lines.push(style.bold(style.red(`Drift (${status.drift.length}):`)));
    for (const d of status.drift) lines.push(`  ${style.red('!')} ${d.kind} ${d.name}: ${d.reason}`);
    lines.push(
      style.dim('  `cutover topology migrate` repairs it; `cutover watch --self-heal` does so by itself.'),
    );
  }
  return `${lines.join('\n')}\n`;
}

function replicaLine(r: ReplicaStatus, style: Style): string {
  const where = (r.address ?? '(no address)').padEnd(21);
  const pid = r.pid === null ? '' : `pid ${r.pid}`;
  const state = stateText(r.state, style);
  const detail = r.detail === null ? '' : style.dim(` (${r.detail})`);
  return `${where} ${pid.padEnd(10)} ${state}${detail}  health: ${healthText(r.health, style)}`;
}

function stateText(state: ReplicaState, style: Style): string {
  switch (state) {
    case 'running':
      return style.green('running');
    case 'not_running':
      return style.red('not running');
    case 'not_answering':
      return style.red('not answering');
    case 'unknown':
      return style.dim('unknown');
  }
}

function healthText(h: HealthProbe, style: Style): string {
  switch (h.result) {
    case 'ok':
      return style.green(h.summary);
    case 'failing':
      return style.red(h.summary);
    case 'not_probed':
      return style.dim(h.summary);
  }
}

function routeLine(r: RouteStatus, style: Style): string {
  const state =
    r.state === 'served'
      ? style.green('served')
      : r.state === 'unknown'
        ? style.dim('unknown')
        : style.red(r.state.replace('_', ' '));
  const inFlight = r.inFlight === null ? '' : `  in flight ${r.inFlight}`;
  const detail = r.detail === null ? '' : style.dim(` (${r.detail})`);
  const on = r.host === undefined ? '' : `  on host ${r.host}`;
  return `${style.bold(r.name)}  ${r.listen} → ${r.to}${on}  blue ${r.weights.blue}% / green ${r.weights.green}%${inFlight}  ${state}${detail}`;
}

/** `--json`: the status as it is (times already ISO 8601), one object. */
export function renderStatusJson(status: EnvironmentStatus): string {
  return `${JSON.stringify(status, null, 2)}\n`;
}

/**
 * One plain line of `status --watch` off a terminal, printed when something changed: what a log
 * reader needs to see at a glance.
 */
export function renderStatusLine(status: EnvironmentStatus): string {
  const components = status.components
    .map((c) => `${c.name} ${c.replicas.filter((r) => r.state === 'running').length}/${c.replicas.length}`)
    .join(', ');
  const routes = status.routes
    .map((r) => `${r.name} ${r.state} ${r.weights.blue}/${r.weights.green}`)
    .join(', ');
  const migration = status.migration ? `${status.migration.id} ${status.migration.status}` : 'none';
  const drift =
    status.drift.length === 0
      ? 'none'
      : status.drift.map((d) => `${d.kind} ${d.name}: ${d.reason}`).join('; ');
  return `${status.observedAt} ${status.environment} serial ${status.serial}; components: ${components || 'none'}; routes: ${routes || 'none'}; migration: ${migration}; drift: ${drift}\n`;
}
