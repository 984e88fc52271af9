/**
 * The delivery activity of Temporal mode: one notification to one target, on a worker, through the
 * same Notifier as the local runner (a timeout per attempt, retries with backoff, the whole bounded
 * by `deliveryBudgetMs`, HMAC signing). Secrets (a signing key, a URL kept secret) are read here, on
 * the worker, as a driver's are. The result comes back as the migration's log line.
 */
import { devNull } from 'node:os';
import { Context } from '@temporalio/activity';
import type { LogLine } from '../../core/migration/types.js';
import type { CloudEvent } from '../../core/notify/types.js';
import type { NotifyTarget } from '../../core/topology/types.js';
import { deliveryBudgetMs, Notifier } from '../notify/notifier.js';
import { processRedactor } from '../redact/process-redactor.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';

export interface DeliverInput {
  /** The target's name in the topology's `notify:`. */
  name: string;
  target: NotifyTarget;
  event: CloudEvent;
  /** The topology's directory: where a relative command and the secrets file resolve. */
  baseDir: string;
}

/** As often as the other activities: a workflow that has ended or moved on is noticed within about a second. */
const heartbeatEveryMs = 1_000;
/**
 * The notifier ends a delivery by its budget; this only keeps the wait finite. The activity's
 * start-to-close timeout (workflow-notify.ts) is past both.
 */
const settleMarginMs = 5_000;

export async function deliverNotification(input: DeliverInput, secrets: ProcessSecrets): Promise<LogLine[]> {
  const context = Context.current();
  const lines: LogLine[] = [];
  const notifier = new Notifier({
    targets: { [input.name]: input.target },
    secrets: secrets.for(input.baseDir),
    baseDir: input.baseDir,
    // No notifications.ndjson in Temporal mode: the result is the log line returned, kept in the
    // workflow's history with the rest of the migration's log.
    recordFile: devNull,
    redact: processRedactor(secrets.env),
    log: (level, message) => lines.push({ at: Date.now(), level, kind: 'notify', message }),
  });
  const beat = setInterval(() => context.heartbeat(), heartbeatEveryMs);
  // Cancelled (the workflow ended without waiting for it): the delivery is abandoned at once,
  // which the notifier reports like any other result.
  const onCancel = () => void notifier.settle(0);
  context.cancellationSignal.addEventListener('abort', onCancel, { once: true });
  try {
    notifier.publish(input.event);
    await notifier.settle(deliveryBudgetMs + settleMarginMs);
    return lines;
  } finally {
    clearInterval(beat);
    context.cancellationSignal.removeEventListener('abort', onCancel);
  }
}
