/**
 * Where the router and nginx differ on the differential test's cases, as measured: the outcome of
 * each (the statuses the client got, what the upstream executed), and why the difference is
 * harmless. A difference not listed here, or listed and gone, fails the test.
 */
export interface KnownDifference {
  outcomes: string;
  /**
   * The router executes a request nginx does not, or forwards a response nginx refuses, and that is
   * not a framing fault: nginx fails it for a reason of its own (a buffer size, its configuration).
   */
  allowed?: true;
  why: string;
}

const why = {
  tabBeforeChunked:
    'RFC 9110 whitespace before a value includes the tab: the router reads chunked and forwards it chunked, while nginx reads the tab as part of the coding (501); no framing in doubt',
  nginxSendsNoHost:
    'the nginx driver forwards Host as $http_host, empty here, so nginx sends its upstream an HTTP/1.1 request without Host, which the upstream refuses; the router sends the upstream address as Host',
  unusableCoding:
    'both refuse an unusable Transfer-Encoding; the router answers 400 where nginx answers 501 (chunked not last, or beside Content-Length), or 501 where nginx 400',
  chunkFraming:
    'router stricter: its parser refuses whitespace after a chunk size, an empty chunk extension, a bare LF in chunk framing and a malformed trailer, which nginx accepts',
  bareLineFeed: 'router stricter: its parser requires CRLF line ends, nginx accepts bare LF',
  controlCharacter:
    'neither executes: the router refuses at once (400), nginx forwards the header and its upstream refuses (502)',
  headerName:
    'router stricter: it refuses a header name that is not a token, nginx drops the line (ignore_invalid_headers) and serves the request',
  method:
    'neither executes: the router knows only registered methods (400), nginx forwards any method and the upstream refuses it (502)',
  minorVersion: 'router stricter: it reads only HTTP/1.0 and HTTP/1.1, nginx serves any HTTP/1.x',
  version: 'both refuse; 400 or 505 differ',
  rawTarget:
    'neither executes: the router refuses a raw non-ASCII target (400), nginx forwards it and its upstream refuses (502)',
  oversizedHead: 'both refuse an oversized head; 431 where nginx answers 400',
  bodyTimeout:
    'neither executes a request whose body never comes whole: both give up after their body timeout; the router answers 408 as it closes, nginx closes without an answer',
  http09:
    'neither executes: nginx closes at once on an HTTP/0.9 request line, the router answers 400 at once',
  expect:
    "router stricter: it answers 417 to an expectation it does not know (as Node's server did), nginx ignores it",
  responseLength:
    'router stricter: a Content-Length that is not one plain number, or beside Transfer-Encoding, is refused (502); nginx 1.22 serves it',
  responseCoding: 'router stricter: only plain chunked is read (502 otherwise); nginx 1.22 serves it',
  chunkCut: 'both cut the response; the router had already sent the head',
  chunkStricter:
    'router stricter: a malformed trailer or a bare LF after a chunk size cuts the response; nginx accepts them',
  responseBareLineFeed:
    'router stricter (issue 16): a head with bare LF line ends is refused at once (502); nginx accepts it',
  statusLine:
    'router stricter: a status line that is not HTTP/1.x with three digits is refused (502); nginx passes on a four-digit status as 200, a status below 100 as it is, anything else as an HTTP/0.9 body',
  interim:
    'the router reads past an interim response to the final one (RFC 9110 §15.2); nginx takes the 1xx for the final response and sends the rest as its body',
  unaskedInterim:
    'router stricter: a 101 nobody asked for, or a 1xx with a body, is refused (502); nginx passes it on',
  responseHeadSize:
    'a size, not framing: nginx refuses a response head over proxy_buffer_size (4 KB), the router allows 64 KB',
};

export const knownDifferences: Record<string, KnownDifference> = {
  'request: Transfer-Encoding "chunked\\t"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: Transfer-Encoding "\\tchunked"': {
    outcomes: 'router [200] executed POST /post "hello"; nginx [501] executed nothing',
    allowed: true,
    why: why.tabBeforeChunked,
  },
  'request: Transfer-Encoding "chunked, identity"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: Transfer-Encoding "chunked, chunked"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: Transfer-Encoding "chunked\\u000b"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: Transfer-Encoding "chunked,"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: Transfer-Encoding line "Transfer-Encoding: gzip\\r\\nTransfer-Encoding: chunked"': {
    outcomes: 'router [501] executed nothing; nginx [400] executed nothing',
    why: why.unusableCoding,
  },
  'request: CL.TE with Transfer-Encoding "xchunked"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: CL.TE with Transfer-Encoding "chunked, identity"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: CL.TE with Transfer-Encoding "\\u000bchunked"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: TE.CL with Transfer-Encoding "xchunked"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: TE.CL with Transfer-Encoding "chunked, identity"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: TE.CL with Transfer-Encoding "\\u000bchunked"': {
    outcomes: 'router [400] executed nothing; nginx [501] executed nothing',
    why: why.unusableCoding,
  },
  'request: Content-Length "6"': {
    outcomes: 'router [408] executed nothing; nginx [] executed nothing',
    why: why.bodyTimeout,
  },
  'request: chunked body "5\\r\\nhello\\r\\n"': {
    outcomes: 'router [408] executed nothing; nginx [] executed nothing',
    why: why.bodyTimeout,
  },
  'request: chunked body "5\\r\\nhello\\r\\n0\\r\\n"': {
    outcomes: 'router [408] executed nothing; nginx [] executed nothing',
    why: why.bodyTimeout,
  },
  'request: HTTP/0.9 request line': {
    outcomes: 'router [400] executed nothing; nginx [] executed nothing',
    why: why.http09,
  },
  'request: chunked body "5 \\r\\nhello\\r\\n0\\r\\n\\r\\n"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.chunkFraming,
  },
  'request: chunked body "5 ;ext\\r\\nhello\\r\\n0\\r\\n\\r\\n"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.chunkFraming,
  },
  'request: chunked body "5\\nhello\\r\\n0\\r\\n\\r\\n"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.chunkFraming,
  },
  'request: chunked body "5\\r\\nhello\\n0\\r\\n\\r\\n"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.chunkFraming,
  },
  'request: chunked body "5\\r\\nhello\\r\\n0\\r\\nBad trailer\\r\\n\\r\\n"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.chunkFraming,
  },
  'request: chunked body "5;\\r\\nhello\\r\\n0\\r\\n\\r\\n"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.chunkFraming,
  },
  'request: bare LF everywhere': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.bareLineFeed,
  },
  'request: bare LF after the request line': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.bareLineFeed,
  },
  'request: bare LF after a header': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.bareLineFeed,
  },
  'request: bare LF ending the head': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.bareLineFeed,
  },
  'request: bare LF body framing with Content-Length': {
    outcomes: 'router [400] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.bareLineFeed,
  },
  'request: control character in a value 1': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.controlCharacter,
  },
  'request: control character in a value 8': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.controlCharacter,
  },
  'request: control character in a value 11': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.controlCharacter,
  },
  'request: control character in a value 12': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.controlCharacter,
  },
  'request: control character in a value 31': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.controlCharacter,
  },
  'request: control character in a value 127': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.controlCharacter,
  },
  'request: odd header name "X@A"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.headerName,
  },
  'request: odd header name "X(A)"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.headerName,
  },
  'request: odd header name "\u0080X"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.headerName,
  },
  'request: odd header name "X/A"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.headerName,
  },
  'request: odd header name "X{A}"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.headerName,
  },
  'request: method "FOO"': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.method,
  },
  'request: method "G-ET"': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.method,
  },
  'request: method "MMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMMM"':
    {
      outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
      why: why.method,
    },
  'request: version "HTTP/1.2"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.minorVersion,
  },
  'request: version "HTTP/1.9"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.minorVersion,
  },
  'request: version "HTTP/3.0"': {
    outcomes: 'router [400] executed nothing; nginx [505] executed nothing',
    why: why.version,
  },
  'request: version "HTTP/11"': {
    outcomes: 'router [400] executed nothing; nginx [505] executed nothing',
    why: why.version,
  },
  'request: version "HTTP/1.10"': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.minorVersion,
  },
  'request: version "HTTP/1.1 "': {
    outcomes: 'router [400] executed nothing; nginx [200] executed GET /get ""',
    why: why.minorVersion,
  },
  'request: version "HTTP/9.9"': {
    outcomes: 'router [400] executed nothing; nginx [505] executed nothing',
    why: why.version,
  },
  'request: version "HTTP/2"': {
    outcomes: 'router [400] executed nothing; nginx [505] executed nothing',
    why: why.version,
  },
  'request: target "{p}/\u00c3\u00a9"': {
    outcomes: 'router [400] executed nothing; nginx [502] executed nothing',
    why: why.rawTarget,
  },
  'request: Host missing in HTTP/1.0': {
    outcomes: 'router [200] executed GET /get ""; nginx [400] executed nothing',
    allowed: true,
    why: why.nginxSendsNoHost,
  },
  'request: header line of bytes 8193': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: header line without a space of bytes 8193': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: header lines of 8000 bytes 5': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: header value of bytes 9000': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: header value of bytes 15000': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: header value of bytes 20000': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: headers 1000': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: 2100 headers, Content-Length last': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: 2100 headers, chunked last': {
    outcomes: 'router [431] executed nothing; nginx [400] executed nothing',
    why: why.oversizedHead,
  },
  'request: Expect: something else': {
    outcomes: 'router [417] executed nothing; nginx [200] executed POST /post "hello"',
    why: why.expect,
  },
  'response: Content-Length twice, different': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: Content-Length list': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: Content-Length +2': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: Content-Length -1': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: Content-Length 2a': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: Content-Length too big': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: Content-Length and chunked': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: chunked and Content-Length': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseLength,
  },
  'response: Transfer-Encoding "gzip"': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseCoding,
  },
  'response: Transfer-Encoding "chunked, gzip"': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseCoding,
  },
  'response: Transfer-Encoding "gzip, chunked"': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseCoding,
  },
  'response: Transfer-Encoding "chunked, chunked"': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseCoding,
  },
  'response: Transfer-Encoding "xchunked"': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseCoding,
  },
  'response: Transfer-Encoding "identity"': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseCoding,
  },
  'response: Transfer-Encoding twice': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseCoding,
  },
  'response: chunked, data longer than its size': {
    outcomes: 'router [200 cut] executed GET /answer; nginx [] executed GET /answer',
    why: why.chunkCut,
  },
  'response: chunked, a bad trailer': {
    outcomes: 'router [200 cut] executed GET /answer; nginx [200] executed GET /answer',
    why: why.chunkStricter,
  },
  'response: chunked, bare LF after the size': {
    outcomes: 'router [] executed GET /answer; nginx [200] executed GET /answer',
    why: why.chunkStricter,
  },
  'response: bare LF head': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseBareLineFeed,
  },
  'response: bare LF after the status line': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.responseBareLineFeed,
  },
  'response: status of four digits': {
    outcomes: 'router [502] executed GET /answer; nginx [200] executed GET /answer',
    why: why.statusLine,
  },
  'response: status 099': {
    outcomes: 'router [502] executed GET /answer; nginx [099 ?] executed GET /answer',
    why: why.statusLine,
  },
  'response: status line HTTP/2': {
    outcomes: 'router [502] executed GET /answer; nginx [?] executed GET /answer',
    why: why.statusLine,
  },
  'response: status line ICY': {
    outcomes: 'router [502] executed GET /answer; nginx [?] executed GET /answer',
    why: why.statusLine,
  },
  'response: no head at all': {
    outcomes: 'router [502] executed GET /answer; nginx [?] executed GET /answer',
    why: why.statusLine,
  },
  'response: 100 Continue first': {
    outcomes: 'router [200] executed GET /answer; nginx [100 200] executed GET /answer',
    why: why.interim,
  },
  'response: 103 Early Hints first': {
    outcomes: 'router [200] executed GET /answer; nginx [103 200] executed GET /answer',
    why: why.interim,
  },
  'response: 101 not asked for': {
    outcomes: 'router [502] executed GET /answer; nginx [101 ?] executed GET /answer',
    why: why.unaskedInterim,
  },
  'response: 1xx with a body': {
    outcomes: 'router [502] executed GET /answer; nginx [100 ?] executed GET /answer',
    why: why.unaskedInterim,
  },
  'response: head of 6 KB': {
    outcomes: 'router [200] executed GET /answer; nginx [502] executed GET /answer',
    allowed: true,
    why: why.responseHeadSize,
  },
};
