/**
 * Issue 28 in Temporal mode: the worker running the switch of a stateful component is SIGKILLed and
 * the next one starts only after the router's hold has ended (by its bound, or released): killed
 * once the router holds, once green caught up, once the release went live with green failing its
 * health meanwhile. The other three kills: stateful-switch-kill.test.ts. How:
 * test/temporal/stateful-switch-support.ts.
 */
import { describeKills, killCases } from './stateful-switch-support.js';

describeKills([killCases.holdLate, killCases.catchUpLate, killCases.releaseGreenSick]);
