/**
 * Masking of secrets in what cutover writes or sends: the values of the secrets it knows, and the
 * shapes credentials commonly take in text (a URL's `user:password@`, a `?token=` query, a bearer
 * token, a Slack webhook's path). Pure: which values are known is decided by the engine, which
 * applies one Redactor at its writers (journal, log, notifications) and the server at its answers.
 */
import { sensitiveText } from './topology/secret-refs.js';

/**
 * Values shorter than this are not masked as values: masking "1" or "on" would shred every line
 * while protecting nothing a guess could not find. Credential shapes are masked at any length.
 */
export const minMaskedValueChars = 4;

export interface Redactor {
  /** The text with every known value and credential shape replaced by `(sensitive)`. */
  text(text: string): string;
  /** A JSON value with every string in it (not the keys) masked as `text` does. */
  value<T>(value: T): T;
}

/** `scheme://user:password@host`: the password (and the user, which may be a token too). */
const urlUserInfo = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>\\]+@/gi;
/**
 * `?token=…`, `&api_key=…`, `password=…`: a query or form parameter that names a credential. A
 * value that is already an ellipsis (a URL as plans show it) is left alone.
 */
const credentialParameter =
  /([?&;](?:access_token|api[_-]?key|apikey|auth|key|password|passwd|pwd|secret|sig|signature|token|client_secret)=)[^&\s"'`<>#\\…]+/gi;
/** `Authorization: Bearer …`, `Basic …` in a logged header or message. */
const authorizationValue = /\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}/g;
/** A Slack incoming webhook: its path is the credential. */
const slackWebhookPath = /(hooks\.slack\.com\/)(?:services|workflows|triggers)\/[^\s"'<>\\]+/gi;

/**
 * The credential shapes `url` holds, as a user would name them ("its user info", "its query
 * parameter token", "its Slack webhook path"); empty when it holds none. The same shapes as
 * maskCredentialShapes masks, so a URL the topology check lets through is one nothing masks.
 */
export function credentialShapesInUrl(url: string): string[] {
  const found: string[] = [];
  if (new RegExp(urlUserInfo.source, 'i').test(url)) found.push('its user info');
  for (const match of url.matchAll(credentialParameter)) {
    found.push(`its query parameter ${(match[1] ?? '').slice(1, -1)}`);
  }
  if (new RegExp(slackWebhookPath.source, 'i').test(url)) found.push('its Slack webhook path');
  return found;
}

/** A header whose name says it carries a credential (`Authorization`, `X-Api-Key`, a cookie, a token). */
const credentialHeaderName =
  /^(?:proxy-)?authorization$|^(?:set-)?cookie$|api[_-]?key|token|secret|password|passwd|signature/i;

/**
 * The credential shapes a request header holds, as a user would name them ("its name
 * Authorization", "a bearer token in its value"); empty when it holds none. A header named for a
 * credential counts whatever its value: what a user writes there is one.
 */
export function credentialShapesInHeader(name: string, value: string): string[] {
  const found: string[] = [];
  if (credentialHeaderName.test(name)) found.push(`its name ${name}`);
  const scheme = new RegExp(authorizationValue.source).exec(value)?.[1];
  if (scheme !== undefined) found.push(`a ${scheme.toLowerCase()} credential in its value`);
  return found;
}

/** Masks credential shapes only: what a process that knows no secret value can still do. */
export function maskCredentialShapes(text: string): string {
  return text
    .replace(urlUserInfo, `$1${sensitiveText}@`)
    .replace(credentialParameter, `$1${sensitiveText}`)
    .replace(authorizationValue, `$1 ${sensitiveText}`)
    .replace(slackWebhookPath, `$1${sensitiveText}`);
}

/**
 * A redactor for `values` (the secrets this process can read) and the credential shapes. A value
 * is also masked as JSON escapes it, so that text already serialised (an API answer, a journal
 * line) is masked as well as the string it came from; longer values first, so that a value holding
 * another is masked whole.
 */
export function redactorOf(values: Iterable<string>): Redactor {
  const forms = new Set<string>();
  for (const value of values) {
    if (value.length < minMaskedValueChars) continue;
    forms.add(value);
    forms.add(JSON.stringify(value).slice(1, -1));
  }
  const ordered = [...forms].sort((a, b) => b.length - a.length);
  const text = (input: string): string => {
    let out = input;
    for (const form of ordered) if (out.includes(form)) out = out.split(form).join(sensitiveText);
    return maskCredentialShapes(out);
  };
  const value = <T>(input: T): T => maskStrings(input, text) as T;
  return { text, value };
}

function maskStrings(input: unknown, mask: (text: string) => string): unknown {
  if (typeof input === 'string') return mask(input);
  if (Array.isArray(input)) return input.map((item) => maskStrings(item, mask));
  if (input === null || typeof input !== 'object') return input;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(input)) out[key] = maskStrings(item, mask);
  return out;
}
