import type { RouteCertificateMetrics } from './certificate-store.js';
import { escapeLabel, splitKey } from './metrics-text.js';

/**
 * The TLS routes' certificates in Prometheus's text format:
 * `cutover_router_certificate_expiry_timestamp_seconds` (gauge, labelled `{environment, route,
 * name, file}`: the notAfter of each certificate served now, as blackbox_exporter's
 * `probe_ssl_earliest_cert_expiry`), `cutover_router_certificate_load_failing` (gauge, 1 while the
 * route's files cannot be loaded and the certificates loaded before are served) and
 * `cutover_router_certificate_load_failures_total`, labelled `{environment, route}`.
 *
 * `name` is a certificate's first name (its first DNS subject alternative name, else its CN);
 * `file` tells two certificates of one name apart (an RSA and an ECDSA one) and says which to renew.
 */
export function certificateMetricsText(routes: readonly RouteCertificateMetrics[]): string {
  const labelled = routes.map((route) => {
    const [environment, name] = splitKey(route.route);
    return { labels: `environment="${escapeLabel(environment)}",route="${escapeLabel(name)}"`, route };
  });
  const expiry = 'cutover_router_certificate_expiry_timestamp_seconds';
  const lines = [
    `# HELP ${expiry} When a certificate the route serves expires (its notAfter), in seconds since the epoch.`,
    `# TYPE ${expiry} gauge`,
  ];
  for (const { labels, route } of labelled) {
    // One series per name and file: a pair listed twice must not repeat one (Prometheus would
    // refuse the whole scrape).
    const seen = new Set<string>();
    for (const certificate of route.certificates) {
      const series = `${expiry}{${labels},name="${escapeLabel(certificate.names[0] ?? '')}",file="${escapeLabel(certificate.file)}"}`;
      if (seen.has(series)) continue;
      seen.add(series);
      lines.push(`${series} ${Date.parse(certificate.notAfter) / 1000}`);
    }
  }
  const failing = 'cutover_router_certificate_load_failing';
  lines.push(
    `# HELP ${failing} 1 while the route's certificate files cannot be loaded (the certificates loaded before are served), else 0.`,
    `# TYPE ${failing} gauge`,
  );
  for (const { labels, route } of labelled) lines.push(`${failing}{${labels}} ${route.failing ? 1 : 0}`);
  const failures = 'cutover_router_certificate_load_failures_total';
  lines.push(
    `# HELP ${failures} Loads of the route's certificate files that failed (a file missing or unreadable, a key not the certificate's).`,
    `# TYPE ${failures} counter`,
  );
  for (const { labels, route } of labelled) lines.push(`${failures}{${labels}} ${route.failedLoads}`);
  return `${lines.join('\n')}\n`;
}
