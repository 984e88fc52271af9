/**
 * Issue 28 in Temporal mode: the worker running the switch of a stateful component is SIGKILLed and
 * another takes over; the migration ends, nothing acknowledged is lost, nothing stays held. Here:
 * killed once the router holds and once green caught up, the next worker at once; killed once the
 * release went live. The other three kills: stateful-switch-kill-late.test.ts (two files, so that
 * they can run beside each other: the run's tail is shorter). How:
 * test/temporal/stateful-switch-support.ts.
 */
import { describeKills, killCases } from './stateful-switch-support.js';

describeKills([killCases.holdAtOnce, killCases.catchUpAtOnce, killCases.release]);
