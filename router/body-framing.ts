/**
 * How the request's body, if any, is framed on the way up. Its own module: the header rules and the
 * upstream pool both need it, and neither may import the other (no import circles).
 */
export type RequestBodyFraming = 'none' | 'length' | 'chunked';
