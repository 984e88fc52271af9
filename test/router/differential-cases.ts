/**
 * The differential test's table of cases, generated from families of edge cases: each request case
 * is the exact bytes a client sends (all its targets under the case's own prefix, so the upstream
 * can tell whose request it executed); each response case is the exact bytes an upstream answers
 * to a plain GET (or HEAD).
 */

/**
 * What a proxy is left waiting for once it has read a case's bytes, for the few cases that leave it
 * waiting (`waitingCases`). Every other exchange ends when the proxy closes the connection.
 * - `body`: the rest of a body the case declares and never sends. The exchange ends when the proxy
 *   gives up on it (its body timeout, short in this test) and closes.
 * - `next request`: its one request keeps the connection open. The exchange ends once a complete
 *   response is read.
 * - `head`: the rest of a head the case never sends (the proxies' header timeouts are a minute). The
 *   exchange ends after a quiet period, and that silence is the case's outcome (`waiting`).
 */
export type Waits = 'body' | 'next request' | 'head';

export interface RequestCase {
  name: string;
  /** The bytes sent, given the case's path prefix (`/c12`). latin1. */
  bytes(prefix: string): string;
  waits?: Waits;
}

export interface ResponseCase {
  name: string;
  method: 'GET' | 'HEAD';
  /** What the upstream answers, exactly (it closes the connection after). latin1. */
  answer: string;
}

const host = 'Host: shop\r\n';
const close = 'Connection: close\r\n';
const chunkedHello = '5\r\nhello\r\n0\r\n\r\n';

/** A GET with `headers` (raw lines, each with its CRLF) that closes the connection. */
const get = (p: string, headers = '') => `GET ${p}/get HTTP/1.1\r\n${host}${headers}${close}\r\n`;
/** A POST with `headers` and `body` that closes the connection. */
const post = (p: string, headers: string, body: string) =>
  `POST ${p}/post HTTP/1.1\r\n${host}${headers}${close}\r\n${body}`;
/** A request that, if a proxy reads it as a request of its own, the upstream records as smuggled. */
const smuggled = (p: string) => `GET ${p}/smuggled HTTP/1.1\r\n${host}\r\n`;

function family<T>(prefix: string, values: readonly T[], make: (value: T) => (p: string) => string) {
  return values.map((value) => ({ name: `${prefix} ${JSON.stringify(value)}`, bytes: make(value) }));
}

const contentLengths = [
  '5',
  '05',
  '+5',
  '-5',
  ' 5',
  '5 ',
  '5\t',
  '0x5',
  '5a',
  '5.0',
  '5,5',
  '5, 5',
  '5,6',
  '',
  '4',
  '6',
  '1e1',
  '99999999999999999999',
  '\u0665',
];
const transferEncodings = [
  'chunked',
  'Chunked',
  'CHUNKED',
  ' chunked',
  'chunked ',
  'chunked\t',
  '\tchunked',
  'xchunked',
  'chunkedx',
  'chunked, identity',
  'identity, chunked',
  'gzip, chunked',
  'chunked, chunked',
  'chunked;q=1',
  '"chunked"',
  'chunked\x00',
  'chunked\x0b',
  'identity',
  'gzip',
  '',
  'chunked,',
  ',chunked',
];
const transferEncodingLines = [
  'Transfer-Encoding : chunked',
  'Transfer-Encoding\t: chunked',
  ' Transfer-Encoding: chunked',
  'Transfer_Encoding: chunked',
  'Transfer-Encoding:\r\n chunked',
  'X-A: y\r\n Transfer-Encoding: chunked',
  'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked',
  'Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked',
  'Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip',
  'Transfer-Encoding: chunked\r\nTransfer-Encoding: identity',
  'Transfer-Encoding:chunked',
  'TRANSFER-ENCODING: chunked',
];
const smugglingCodings = [
  'chunked',
  ' chunked',
  'chunked ',
  'Chunked',
  'xchunked',
  'chunked, identity',
  '\x0bchunked',
];
const chunkedBodies = [
  '0x5\r\nhello\r\n0\r\n\r\n',
  '5 \r\nhello\r\n0\r\n\r\n',
  '5;ext\r\nhello\r\n0\r\n\r\n',
  '5;ext="a b"\r\nhello\r\n0\r\n\r\n',
  '5 ;ext\r\nhello\r\n0\r\n\r\n',
  '0005\r\nhello\r\n0\r\n\r\n',
  '000000000000000000005\r\nhello\r\n0\r\n\r\n',
  'A\r\nhellohello\r\n0\r\n\r\n',
  'a\r\nhellohello\r\n0\r\n\r\n',
  '-5\r\nhello\r\n0\r\n\r\n',
  '+5\r\nhello\r\n0\r\n\r\n',
  '5\nhello\r\n0\r\n\r\n',
  '5\r\nhello\n0\r\n\r\n',
  '5\r\nhelloXX\r\n0\r\n\r\n',
  '5\r\nhello\r\n',
  '5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n',
  '5\r\nhello\r\n0\r\nBad trailer\r\n\r\n',
  '5\r\nhello\r\n0\r\n',
  'ffffffffffffffffff\r\nhello\r\n0\r\n\r\n',
  '1_0\r\nhellohello\r\n0\r\n\r\n',
  '5\r\nhello\r\n0;ext\r\n\r\n',
  '5\x00\r\nhello\r\n0\r\n\r\n',
  '5\rhello\r\n0\r\n\r\n',
  '5\r\nhello\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: shop\r\n\r\n',
  '5;\r\nhello\r\n0\r\n\r\n',
  '5\r\nhello\r\r\n0\r\n\r\n',
];
const valueControls = [0x00, 0x01, 0x08, 0x0b, 0x0c, 0x0d, 0x1f, 0x7f];
const nameOddities = ['X\x00A', 'X A', 'X\x7fA', 'X@A', 'X(A)', '\x80X', 'X-A\t', '', 'X/A', 'X{A}'];
const methods = [
  'get',
  'Get',
  'FOO',
  'G-ET',
  'GET\x01',
  'G\xc9T',
  'TRACE',
  'M'.repeat(100),
  '(GET)',
  'PATCH',
  'PROPFIND',
  'LOCK',
  'SEARCH',
  'QUERY',
  'GET GET',
];
const versions = [
  'HTTP/1.0',
  'HTTP/1.2',
  'HTTP/1.9',
  'HTTP/2.0',
  'HTTP/3.0',
  'HTTP/0.9',
  'http/1.1',
  'HTTP/1',
  'HTTP/1.1.1',
  'HTTP/11',
  'HTTP/1.10',
  'HTTP/01.1',
  'HTTP /1.1',
  'HTTP/1.1 ',
  'HTTP/9.9',
  'HTTP/2',
];
const targets = [
  'http://shop{p}/get',
  'HTTP://SHOP{p}/get',
  'https://shop{p}/get',
  'http://other{p}/get',
  'http://shop:80{p}/get',
  'ftp://shop{p}/get',
  'http://user@shop{p}/get',
  '{p}/a b',
  '{p}/a\x01',
  '{p}/a#frag',
  '{p}/%00',
  '{p}/../get',
  '{p}/a?x=1&y',
  '{p}/\x7f',
  '{p}/\xc3\xa9',
  '/{p}/get',
  '{p}/a\tb',
];
const hosts = [
  null,
  '',
  'shop:abc',
  'sh op',
  'shop\x01',
  'shop, other',
  '[::1]',
  'shop:99999',
  'user@shop',
  'h'.repeat(300),
  'shop.',
  '.shop',
  'shop/x',
  'shop\\x',
];

const requestCases: RequestCase[] = [
  // The plain requests every other case is a variation of.
  { name: 'GET', bytes: (p) => get(p) },
  { name: 'HEAD', bytes: (p) => `HEAD ${p}/head HTTP/1.1\r\n${host}${close}\r\n` },
  { name: 'OPTIONS', bytes: (p) => `OPTIONS ${p}/options HTTP/1.1\r\n${host}${close}\r\n` },
  { name: 'DELETE', bytes: (p) => `DELETE ${p}/delete HTTP/1.1\r\n${host}${close}\r\n` },
  {
    name: 'PUT with Content-Length',
    bytes: (p) => `PUT ${p}/put HTTP/1.1\r\n${host}Content-Length: 5\r\n${close}\r\nhello`,
  },
  { name: 'POST with Content-Length', bytes: (p) => post(p, 'Content-Length: 5\r\n', 'hello') },
  { name: 'POST chunked', bytes: (p) => post(p, 'Transfer-Encoding: chunked\r\n', chunkedHello) },
  { name: 'POST without a body length', bytes: (p) => post(p, '', 'hello') },
  {
    name: 'GET with a body',
    bytes: (p) => `GET ${p}/get HTTP/1.1\r\n${host}Content-Length: 5\r\n${close}\r\nhello`,
  },
  {
    name: 'POST HTTP/1.0 with Content-Length',
    bytes: (p) => `POST ${p}/post HTTP/1.0\r\n${host}Content-Length: 5\r\n\r\nhello`,
  },

  ...family(
    'Content-Length',
    contentLengths,
    (value) => (p) => post(p, `Content-Length: ${value}\r\n`, 'hello'),
  ),
  ...family(
    'Content-Length twice',
    [
      ['5', '5'],
      ['5', '6'],
      ['5', ''],
      ['5', '5 '],
      ['6', '5'],
    ],
    ([a, b]) =>
      (p) =>
        post(p, `Content-Length: ${a}\r\nContent-Length: ${b}\r\n`, 'hello'),
  ),
  ...family(
    'Transfer-Encoding',
    transferEncodings,
    (value) => (p) => post(p, `Transfer-Encoding: ${value}\r\n`, chunkedHello),
  ),
  ...family(
    'Transfer-Encoding line',
    transferEncodingLines,
    (line) => (p) => post(p, `${line}\r\n`, chunkedHello),
  ),
  ...family(
    'Transfer-Encoding in HTTP/1.0',
    ['chunked'],
    (value) => (p) => `POST ${p}/post HTTP/1.0\r\n${host}Transfer-Encoding: ${value}\r\n\r\n${chunkedHello}`,
  ),
  // CL.TE: a proxy that frames by Content-Length sends the smuggled request as body; TE.CL the other way.
  ...family('CL.TE with Transfer-Encoding', smugglingCodings, (coding) => (p) => {
    const body = `0\r\n\r\n${smuggled(p)}`;
    return post(p, `Content-Length: ${body.length}\r\nTransfer-Encoding: ${coding}\r\n`, body);
  }),
  ...family('TE.CL with Transfer-Encoding', smugglingCodings, (coding) => (p) => {
    const inner = smuggled(p);
    const body = `${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`;
    return post(p, `Transfer-Encoding: ${coding}\r\nContent-Length: 4\r\n`, body);
  }),
  ...family(
    'Content-Length 0 and chunked',
    ['first', 'second'],
    (order) => (p) =>
      post(
        p,
        order === 'first'
          ? 'Content-Length: 0\r\nTransfer-Encoding: chunked\r\n'
          : 'Transfer-Encoding: chunked\r\nContent-Length: 0\r\n',
        chunkedHello,
      ),
  ),
  ...family(
    'chunked body',
    chunkedBodies,
    (body) => (p) => post(p, 'Transfer-Encoding: chunked\r\n', body.replace('/smuggled', `${p}/smuggled`)),
  ),

  // Line endings.
  { name: 'bare LF everywhere', bytes: (p) => `GET ${p}/get HTTP/1.1\nHost: shop\nConnection: close\n\n` },
  { name: 'bare LF after the request line', bytes: (p) => `GET ${p}/get HTTP/1.1\n${host}${close}\r\n` },
  { name: 'bare LF after a header', bytes: (p) => `GET ${p}/get HTTP/1.1\r\nHost: shop\n${close}\r\n` },
  { name: 'bare LF ending the head', bytes: (p) => `GET ${p}/get HTTP/1.1\r\n${host}${close}\n` },
  {
    name: 'bare CR inside a header line',
    bytes: (p) => `GET ${p}/get HTTP/1.1\r\nHost: shop\rX-A: b\r\n${close}\r\n`,
  },
  { name: 'CR CR LF', bytes: (p) => `GET ${p}/get HTTP/1.1\r\r\n${host}${close}\r\n` },
  { name: 'empty lines before the request line', bytes: (p) => `\r\n\r\n${get(p)}` },
  { name: 'spaces before the request line', bytes: (p) => `  ${get(p)}` },
  {
    name: 'bare LF body framing with Content-Length',
    bytes: (p) => `POST ${p}/post HTTP/1.1\nHost: shop\nContent-Length: 5\nConnection: close\n\nhello`,
  },

  // Folded (obs-fold) header lines.
  { name: 'obs-fold of an ordinary header', bytes: (p) => get(p, 'X-A: a\r\n b\r\n') },
  { name: 'obs-fold with a tab', bytes: (p) => get(p, 'X-A: a\r\n\tb\r\n') },
  { name: 'obs-fold of Host', bytes: (p) => `GET ${p}/get HTTP/1.1\r\nHost: shop\r\n other\r\n${close}\r\n` },
  { name: 'obs-fold of Content-Length', bytes: (p) => post(p, 'Content-Length:\r\n 5\r\n', 'hello') },
  {
    name: 'obs-fold as the first header line',
    bytes: (p) => `GET ${p}/get HTTP/1.1\r\n X-A: b\r\n${host}${close}\r\n`,
  },

  // Control characters and odd names.
  ...family(
    'control character in a value',
    valueControls,
    (code) => (p) => get(p, `X-A: a${String.fromCharCode(code)}b\r\n`),
  ),
  ...family('odd header name', nameOddities, (name) => (p) => get(p, `${name}: b\r\n`)),
  { name: 'header line without a colon', bytes: (p) => get(p, 'X-A b\r\n') },
  { name: 'obs-text in a value', bytes: (p) => get(p, 'X-A: \xe9t\xe9\r\n') },
  { name: 'underscore in a header name', bytes: (p) => get(p, 'X_A: b\r\n') },
  { name: 'empty value', bytes: (p) => get(p, 'X-A:\r\n') },

  // Methods and versions.
  ...family('method', methods, (method) => (p) => `${method} ${p}/method HTTP/1.1\r\n${host}${close}\r\n`),
  { name: 'CONNECT', bytes: () => `CONNECT shop:80 HTTP/1.1\r\n${host}${close}\r\n` },
  { name: 'HTTP/2 preface', bytes: () => 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' },
  ...family('version', versions, (version) => (p) => `GET ${p}/get ${version}\r\n${host}${close}\r\n`),
  { name: 'HTTP/0.9 request line', bytes: (p) => `GET ${p}/get\r\n` },

  // Request targets.
  ...family(
    'target',
    targets,
    (target) => (p) => `GET ${target.replace('{p}', p)} HTTP/1.1\r\n${host}${close}\r\n`,
  ),
  { name: 'target * for OPTIONS', bytes: () => `OPTIONS * HTTP/1.1\r\n${host}${close}\r\n` },
  { name: 'target * for GET', bytes: () => `GET * HTTP/1.1\r\n${host}${close}\r\n` },
  { name: 'authority target for GET', bytes: () => `GET shop:80 HTTP/1.1\r\n${host}${close}\r\n` },
  { name: 'target without a slash', bytes: (p) => `GET ${p.slice(1)}/get HTTP/1.1\r\n${host}${close}\r\n` },

  // Host.
  ...family(
    'Host',
    hosts,
    (value) => (p) => `GET ${p}/get HTTP/1.1\r\n${value === null ? '' : `Host: ${value}\r\n`}${close}\r\n`,
  ),
  { name: 'Host missing in HTTP/1.0', bytes: (p) => `GET ${p}/get HTTP/1.0\r\n\r\n` },
  { name: 'Host twice, the same', bytes: (p) => get(p, 'Host: shop\r\n') },
  { name: 'Host twice, different', bytes: (p) => get(p, 'Host: other\r\n') },
  {
    name: 'Host and an absolute target for another',
    bytes: (p) => `GET http://other${p}/get HTTP/1.1\r\n${host}${close}\r\n`,
  },

  // Sizes.
  ...family(
    'target of bytes',
    [4_000, 8_000, 9_000, 16_000],
    (size) => (p) => `GET ${p}/${'t'.repeat(size)} HTTP/1.1\r\n${host}${close}\r\n`,
  ),
  ...family(
    'header value of bytes',
    [4_000, 8_000, 9_000, 15_000, 20_000],
    (size) => (p) => get(p, `X-A: ${'v'.repeat(size)}\r\n`),
  ),
  // nginx's boundary: a line fits one 8 KiB buffer, its CRLF included (GET <target> HTTP/1.1 CRLF).
  ...family(
    'request line of bytes',
    [8_191, 8_192, 8_193],
    (size) => (p) => `GET ${p}/${'t'.repeat(size - 15 - p.length - 1)} HTTP/1.1\r\n${host}${close}\r\n`,
  ),
  ...family(
    'header line of bytes',
    [8_191, 8_192, 8_193],
    (size) => (p) => get(p, `X-A: ${'v'.repeat(size - 7)}\r\n`),
  ),
  ...family(
    'header line without a space of bytes',
    [8_192, 8_193],
    (size) => (p) => get(p, `X-A:${'v'.repeat(size - 6)}\r\n`),
  ),
  // A head over Node's default 16 KiB that nginx's four large buffers hold.
  ...family(
    'header lines of 8000 bytes',
    [2, 4, 5],
    (count) => (p) =>
      get(p, Array.from({ length: count }, (_, i) => `X-${i}: ${'v'.repeat(8_000 - 7)}\r\n`).join('')),
  ),
  ...family('headers', [100, 1_000], (count) => (p) => get(p, 'X-A: b\r\n'.repeat(count))),
  {
    name: '2100 headers, Content-Length last',
    bytes: (p) => post(p, `${'a:b\r\n'.repeat(2_100)}Content-Length: 5\r\n`, 'hello'),
  },
  {
    name: '2100 headers, chunked last',
    bytes: (p) => post(p, `${'a:b\r\n'.repeat(2_100)}Transfer-Encoding: chunked\r\n`, chunkedHello),
  },

  // Pipelined pairs (the first keeps the connection open).
  { name: 'pipelined GET, GET', bytes: (p) => `GET ${p}/one HTTP/1.1\r\n${host}\r\n${get(p)}` },
  {
    name: 'pipelined POST, GET',
    bytes: (p) => `POST ${p}/one HTTP/1.1\r\n${host}Content-Length: 5\r\n\r\nhello${get(p)}`,
  },
  {
    name: 'pipelined chunked POST, GET',
    bytes: (p) =>
      `POST ${p}/one HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\n\r\n${chunkedHello}${get(p)}`,
  },
  {
    name: 'pipelined after Connection: close',
    bytes: (p) => `GET ${p}/one HTTP/1.1\r\n${host}${close}\r\n${get(p)}`,
  },
  { name: 'pipelined after HTTP/1.0', bytes: (p) => `GET ${p}/one HTTP/1.0\r\n${host}\r\n${get(p)}` },
  {
    name: 'pipelined after HTTP/1.0 keep-alive',
    bytes: (p) => `GET ${p}/one HTTP/1.0\r\n${host}Connection: keep-alive\r\n\r\n${get(p)}`,
  },
  { name: 'pipelined GET, garbage', bytes: (p) => `GET ${p}/one HTTP/1.1\r\n${host}\r\nhello\r\n\r\n` },
  {
    name: 'pipelined GET, bad header',
    bytes: (p) => `GET ${p}/one HTTP/1.1\r\n${host}\r\n${get(p, 'Bad header\r\n')}`,
  },
  {
    name: 'pipelined POST with a longer body',
    bytes: (p) => `POST ${p}/one HTTP/1.1\r\n${host}Content-Length: 5\r\n\r\nhello!!${get(p)}`,
  },
  {
    name: 'pipelined GET, GET, GET',
    bytes: (p) => `GET ${p}/one HTTP/1.1\r\n${host}\r\nGET ${p}/two HTTP/1.1\r\n${host}\r\n${get(p)}`,
  },
  {
    name: 'pipelined GET, HTTP/2.0',
    bytes: (p) => `GET ${p}/one HTTP/1.1\r\n${host}\r\nGET ${p}/get HTTP/2.0\r\n${host}\r\n`,
  },
  {
    name: 'pipelined POST, CONNECT',
    bytes: (p) =>
      `POST ${p}/one HTTP/1.1\r\n${host}Content-Length: 5\r\n\r\nhelloCONNECT shop:443 HTTP/1.1\r\nHost: shop:443\r\n\r\n`,
  },
  {
    name: 'pipelined GET, CL.TE',
    bytes: (p) =>
      `GET ${p}/one HTTP/1.1\r\n${host}\r\n${post(p, 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n')}`,
  },

  // Expect.
  {
    name: 'Expect: 100-continue with a body',
    bytes: (p) => post(p, 'Expect: 100-continue\r\nContent-Length: 5\r\n', 'hello'),
  },
  {
    name: 'Expect: 100-continue, chunked',
    bytes: (p) => post(p, 'Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n', chunkedHello),
  },
  {
    name: 'Expect: 100-continue, Transfer-Encoding gzip, chunked',
    bytes: (p) => post(p, 'Expect: 100-continue\r\nTransfer-Encoding: gzip, chunked\r\n', chunkedHello),
  },
  {
    name: 'Expect: 100-continue, a Host twice',
    bytes: (p) => post(p, 'Expect: 100-continue\r\nHost: other\r\nContent-Length: 5\r\n', 'hello'),
  },
  { name: 'Expect: 100-continue without a body', bytes: (p) => get(p, 'Expect: 100-continue\r\n') },
  {
    name: 'Expect: 100-Continue',
    bytes: (p) => post(p, 'Expect: 100-Continue\r\nContent-Length: 5\r\n', 'hello'),
  },
  { name: 'Expect: something else', bytes: (p) => post(p, 'Expect: foo\r\nContent-Length: 5\r\n', 'hello') },

  // Connection and other hop-by-hop tricks.
  {
    name: 'Connection: keep-alive',
    bytes: (p) => `GET ${p}/get HTTP/1.1\r\n${host}Connection: keep-alive\r\n\r\n`,
  },
  {
    name: 'Connection: content-length',
    bytes: (p) =>
      `POST ${p}/post HTTP/1.1\r\n${host}Connection: close, content-length\r\nContent-Length: 5\r\n\r\nhello`,
  },
  {
    name: 'Connection: transfer-encoding',
    bytes: (p) =>
      `POST ${p}/post HTTP/1.1\r\n${host}Connection: close, transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n${chunkedHello}`,
  },
  {
    name: 'Connection: host',
    bytes: (p) => `GET ${p}/get HTTP/1.1\r\n${host}Connection: close, host\r\n\r\n`,
  },
  {
    name: 'Connection: x-forwarded-for',
    bytes: (p) =>
      `GET ${p}/get HTTP/1.1\r\n${host}X-Forwarded-For: 1.2.3.4\r\nConnection: close, x-forwarded-for\r\n\r\n`,
  },
  {
    name: 'Upgrade: websocket',
    bytes: (p) =>
      `GET ${p}/get HTTP/1.1\r\n${host}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
  },
  {
    name: 'Upgrade: h2c',
    bytes: (p) =>
      `GET ${p}/get HTTP/1.1\r\n${host}Connection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n`,
  },
  { name: 'Proxy-Connection', bytes: (p) => get(p, 'Proxy-Connection: keep-alive\r\n') },
  { name: 'TE: trailers', bytes: (p) => get(p, 'TE: trailers\r\n') },
  { name: 'Keep-Alive header', bytes: (p) => get(p, 'Keep-Alive: timeout=5\r\n') },
  {
    name: 'Connection twice',
    bytes: (p) => `GET ${p}/get HTTP/1.1\r\n${host}Connection: keep-alive\r\n${close}\r\n`,
  },

  // Not HTTP at all.
  { name: 'empty head', bytes: () => '\r\n\r\n' },
  { name: 'a word', bytes: () => 'hello\r\n\r\n' },
  { name: 'a TLS ClientHello', bytes: () => '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03' },
  { name: 'NUL bytes', bytes: () => '\x00\x00\x00\x00\r\n\r\n' },
];

const ok = 'HTTP/1.1 200 OK\r\n';
/** Bytes that look like a whole second response: a client that sees them was sent a split response. */
const splitResponse = 'HTTP/1.1 299 Split\r\nContent-Length: 0\r\n\r\n';

const responseCases: ResponseCase[] = [
  { name: 'Content-Length', method: 'GET', answer: `${ok}Content-Length: 2\r\n\r\nok` },
  { name: 'chunked', method: 'GET', answer: `${ok}Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n` },
  { name: 'delimited by the close', method: 'GET', answer: `${ok}\r\nok` },
  { name: 'HTTP/1.0 delimited by the close', method: 'GET', answer: 'HTTP/1.0 200 OK\r\n\r\nok' },
  {
    name: 'Content-Length twice, the same',
    method: 'GET',
    answer: `${ok}Content-Length: 2\r\nContent-Length: 2\r\n\r\nok`,
  },
  {
    name: 'Content-Length twice, different',
    method: 'GET',
    answer: `${ok}Content-Length: 2\r\nContent-Length: 3\r\n\r\nok!`,
  },
  { name: 'Content-Length list', method: 'GET', answer: `${ok}Content-Length: 2, 2\r\n\r\nok` },
  { name: 'Content-Length +2', method: 'GET', answer: `${ok}Content-Length: +2\r\n\r\nok` },
  { name: 'Content-Length -1', method: 'GET', answer: `${ok}Content-Length: -1\r\n\r\nok` },
  { name: 'Content-Length 2a', method: 'GET', answer: `${ok}Content-Length: 2a\r\n\r\nok` },
  {
    name: 'Content-Length too big',
    method: 'GET',
    answer: `${ok}Content-Length: 99999999999999999999\r\n\r\nok`,
  },
  {
    name: 'Content-Length shorter than the body',
    method: 'GET',
    answer: `${ok}Content-Length: 2\r\n\r\nok${splitResponse}`,
  },
  { name: 'Content-Length longer than the body', method: 'GET', answer: `${ok}Content-Length: 9\r\n\r\nok` },
  {
    name: 'Content-Length and chunked',
    method: 'GET',
    answer: `${ok}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n`,
  },
  {
    name: 'chunked and Content-Length',
    method: 'GET',
    answer: `${ok}Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n`,
  },
  ...[
    'gzip',
    'chunked, gzip',
    'gzip, chunked',
    'chunked, chunked',
    'Chunked',
    ' chunked',
    'xchunked',
    'identity',
  ].map(
    (coding): ResponseCase => ({
      name: `Transfer-Encoding ${JSON.stringify(coding)}`,
      method: 'GET',
      answer: `${ok}Transfer-Encoding: ${coding}\r\n\r\n2\r\nok\r\n0\r\n\r\n`,
    }),
  ),
  {
    name: 'Transfer-Encoding twice',
    method: 'GET',
    answer: `${ok}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n`,
  },
  {
    name: 'chunked in HTTP/1.0',
    method: 'GET',
    answer: 'HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
  },
  ...[
    ['size with an extension', '2;x=y\r\nok\r\n0\r\n\r\n'],
    ['size with leading zeros', '0002\r\nok\r\n0\r\n\r\n'],
    ['size in 0x', '0x2\r\nok\r\n0\r\n\r\n'],
    ['size not hex', 'zz\r\nok\r\n0\r\n\r\n'],
    ['size too big', 'ffffffffffffffffff\r\nok\r\n0\r\n\r\n'],
    ['data longer than its size', '1\r\nok\r\n0\r\n\r\n'],
    ['no last chunk', '2\r\nok\r\n'],
    ['trailers', '2\r\nok\r\n0\r\nX-T: 1\r\n\r\n'],
    ['a bad trailer', '2\r\nok\r\n0\r\nBad trailer\r\n\r\n'],
    ['bare LF after the size', '2\nok\r\n0\r\n\r\n'],
    ['bytes after the last chunk', `2\r\nok\r\n0\r\n\r\n${splitResponse}`],
  ].map(
    ([name, body]): ResponseCase => ({
      name: `chunked, ${name}`,
      method: 'GET',
      answer: `${ok}Transfer-Encoding: chunked\r\n\r\n${body}`,
    }),
  ),
  { name: 'bare LF head', method: 'GET', answer: 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok' },
  {
    name: 'bare LF after the status line',
    method: 'GET',
    answer: 'HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok',
  },
  { name: 'bare CR in a header', method: 'GET', answer: `${ok}X-A: a\rContent-Length: 2\r\n\r\nok` },
  { name: 'obs-fold header', method: 'GET', answer: `${ok}X-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok` },
  { name: 'NUL in a header value', method: 'GET', answer: `${ok}X-A: a\x00b\r\nContent-Length: 2\r\n\r\nok` },
  { name: 'space in a header name', method: 'GET', answer: `${ok}X A: b\r\nContent-Length: 2\r\n\r\nok` },
  { name: 'space before the colon', method: 'GET', answer: `${ok}Content-Length : 2\r\n\r\nok` },
  { name: 'header line without a colon', method: 'GET', answer: `${ok}X-A b\r\nContent-Length: 2\r\n\r\nok` },
  { name: 'status without a reason', method: 'GET', answer: 'HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok' },
  { name: 'status of four digits', method: 'GET', answer: 'HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok' },
  { name: 'status 099', method: 'GET', answer: 'HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok' },
  { name: 'status 600', method: 'GET', answer: 'HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok' },
  { name: 'status line HTTP/2', method: 'GET', answer: 'HTTP/2 200 OK\r\nContent-Length: 2\r\n\r\nok' },
  { name: 'status line ICY', method: 'GET', answer: 'ICY 200 OK\r\nContent-Length: 2\r\n\r\nok' },
  { name: 'no head at all', method: 'GET', answer: 'ok' },
  {
    name: '100 Continue first',
    method: 'GET',
    answer: `HTTP/1.1 100 Continue\r\n\r\n${ok}Content-Length: 2\r\n\r\nok`,
  },
  {
    name: '103 Early Hints first',
    method: 'GET',
    answer: `HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n${ok}Content-Length: 2\r\n\r\nok`,
  },
  {
    name: '101 not asked for',
    method: 'GET',
    answer: 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nok',
  },
  {
    name: '1xx with a body',
    method: 'GET',
    answer: `HTTP/1.1 100 Continue\r\nContent-Length: 2\r\n\r\nok${ok}Content-Length: 2\r\n\r\nok`,
  },
  {
    name: '204 with a body',
    method: 'GET',
    answer: `HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\nok${splitResponse}`,
  },
  {
    name: '204 chunked',
    method: 'GET',
    answer: `HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n`,
  },
  {
    name: '304 with a body',
    method: 'GET',
    answer: `HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\nok${splitResponse}`,
  },
  {
    name: 'HEAD answered with a body',
    method: 'HEAD',
    answer: `${ok}Content-Length: 2\r\n\r\nok${splitResponse}`,
  },
  { name: 'HEAD answered chunked', method: 'HEAD', answer: `${ok}Transfer-Encoding: chunked\r\n\r\n` },
  {
    name: 'Set-Cookie twice',
    method: 'GET',
    answer: `${ok}Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok`,
  },
  {
    name: 'head of 6 KB',
    method: 'GET',
    answer: `${ok}X-A: ${'v'.repeat(6_000)}\r\nContent-Length: 2\r\n\r\nok`,
  },
  {
    name: 'Connection: close, keep-alive',
    method: 'GET',
    answer: `${ok}Connection: close, keep-alive\r\nContent-Length: 2\r\n\r\nok`,
  },
];

/** The request cases that leave a proxy waiting, by name, and what for. */
const waitingCases: Record<string, Waits> = {
  'Content-Length "6"': 'body',
  'chunked body "5\\r\\nhello\\r\\n"': 'body',
  'chunked body "5\\r\\nhello\\r\\n0\\r\\n"': 'body',
  'Connection: keep-alive': 'next request',
  'Upgrade: websocket': 'next request',
  'empty head': 'head',
  'HTTP/0.9 request line': 'head',
};

/** Every case, numbered: request cases first. */
export function differentialCases(): { requests: RequestCase[]; responses: ResponseCase[] } {
  const requests = requestCases.map((c) => {
    const waits = waitingCases[c.name];
    return waits === undefined ? c : { ...c, waits };
  });
  const unknown = Object.keys(waitingCases).filter((name) => !requestCases.some((c) => c.name === name));
  if (unknown.length > 0) throw new Error(`waitingCases names no case: ${unknown.join(', ')}`);
  return { requests, responses: responseCases };
}
