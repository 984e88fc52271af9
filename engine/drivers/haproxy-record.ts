/** The haproxy driver's record of its routes (`haproxy/routes.json`). */
import type { HaproxyRecord } from './haproxy-config.js';
import { readBalancerRecord } from './managed-balancer.js';

export function readRecord(file: string): Promise<HaproxyRecord> {
  return readBalancerRecord(file, 'cutover haproxy record');
}
