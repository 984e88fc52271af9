/**
 * A code host's API at the HTTP boundary, for the CI recipes' tests (test/e2e/recipes.test.ts): a
 * plain node:http server on 127.0.0.1 that answers the few GitHub REST or GitLab v4 routes the
 * recipes call (list, create and update comments or notes; the pull or merge requests a commit
 * belongs to; GitLab's current user), keeps the comments, and records every request. Tokens map to
 * users: a request with another token is 401, as the hosts answer. Anything else is 404 and stays
 * in `requests` for the test to see.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type HostKind = 'github' | 'gitlab';

export interface HostUser {
  id: number;
  login: string;
}

export interface HostComment {
  id: number;
  /** The pull request's number or the merge request's iid. */
  request: number;
  author: HostUser;
  body: string;
  createdAt: string;
  updatedAt: string;
}

export interface RecordedRequest {
  method: string;
  path: string;
  status: number;
}

/** The user GitHub's workflow token (GITHUB_TOKEN) posts as. */
export const githubActionsBot: HostUser = { id: 41898282, login: 'github-actions[bot]' };

type Handler = (match: RegExpExecArray, user: HostUser, body: unknown) => { status: number; json: unknown };

export class CodeHost {
  readonly requests: RecordedRequest[] = [];
  private readonly comments: HostComment[] = [];
  /** Merge commits → the pull or merge request they merged. */
  private readonly merges = new Map<string, number>();
  private nextId = 1000;
  private clock = Date.parse('2026-11-25T10:00:00Z');

  private constructor(
    readonly kind: HostKind,
    private readonly server: Server,
    /** The API's base URL: GITHUB_API_URL, or CI_API_V4_URL. */
    readonly apiUrl: string,
    private readonly tokens: Map<string, HostUser>,
    /** `owner/name` (GitHub) or the project id (GitLab). */
    readonly project: string,
  ) {}

  static async start(kind: HostKind, project: string, tokens: Record<string, HostUser>): Promise<CodeHost> {
    let host: CodeHost | undefined;
    const server = createServer((req, res) => {
      void (host as CodeHost).handle(req, res);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    host = new CodeHost(
      kind,
      server,
      kind === 'github' ? origin : `${origin}/api/v4`,
      new Map(Object.entries(tokens)),
      project,
    );
    return host;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** The comments (notes) on a pull (merge) request, oldest first. */
  commentsOn(request: number): HostComment[] {
    return this.comments.filter((c) => c.request === request);
  }

  /** A comment written by someone (a reviewer), as through the web page. */
  comment(request: number, author: HostUser, body: string): HostComment {
    const now = this.tick();
    const comment = { id: this.nextId++, request, author, body, createdAt: now, updatedAt: now };
    this.comments.push(comment);
    return comment;
  }

  /** Records that `sha` merged pull (merge) request `request`, as the host does on merge. */
  merged(sha: string, request: number): void {
    this.merges.set(sha, request);
  }

  private tick(): string {
    this.clock += 1_000;
    return new Date(this.clock).toISOString();
  }

  private routes(): [string, RegExp, Handler][] {
    const p = this.project.replace('/', '\\/');
    if (this.kind === 'github') {
      return [
        ['GET', new RegExp(`^/repos/${p}/issues/(\\d+)/comments$`), (m) => this.list(Number(m[1]))],
        [
          'POST',
          new RegExp(`^/repos/${p}/issues/(\\d+)/comments$`),
          (m, u, b) => this.create(Number(m[1]), u, b),
        ],
        [
          'PATCH',
          new RegExp(`^/repos/${p}/issues/comments/(\\d+)$`),
          (m, u, b) => this.update(Number(m[1]), u, b),
        ],
        [
          'GET',
          new RegExp(`^/repos/${p}/commits/([0-9a-f]{40})/pulls$`),
          (m) => this.requestsOf(m[1] as string),
        ],
      ];
    }
    const mr = `^/api/v4/projects/${p}/merge_requests/(\\d+)/notes`;
    return [
      ['GET', /^\/api\/v4\/user$/, (_m, u) => ({ status: 200, json: { id: u.id, username: u.login } })],
      ['GET', new RegExp(`${mr}$`), (m) => this.list(Number(m[1]))],
      ['POST', new RegExp(`${mr}$`), (m, u, b) => this.create(Number(m[1]), u, b)],
      ['PUT', new RegExp(`${mr}/(\\d+)$`), (m, u, b) => this.update(Number(m[2]), u, b)],
      [
        'GET',
        new RegExp(`^/api/v4/projects/${p}/repository/commits/([0-9a-f]{40})/merge_requests$`),
        (m) => this.requestsOf(m[1] as string),
      ],
    ];
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const pathname = new URL(req.url ?? '/', 'http://host').pathname;
    const answer = (status: number, json: unknown) => {
      this.requests.push({ method: req.method ?? '', path: req.url ?? '', status });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(json));
    };
    const header = this.kind === 'github' ? req.headers.authorization : req.headers['private-token'];
    const token = this.kind === 'github' ? /^Bearer (.+)$/.exec(String(header))?.[1] : header;
    const user = typeof token === 'string' ? this.tokens.get(token) : undefined;
    if (!user) return answer(401, { message: '401 Unauthorized' });
    for (const [method, re, handler] of this.routes()) {
      const match = re.exec(pathname);
      if (method !== req.method || !match) continue;
      let body: unknown;
      try {
        body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
      } catch {
        return answer(400, { message: 'Problems parsing JSON' });
      }
      const { status, json } = handler(match, user, body);
      return answer(status, json);
    }
    return answer(404, { message: 'Not Found' });
  }

  private wire(c: HostComment): unknown {
    const author = { id: c.author.id, login: c.author.login, username: c.author.login };
    return this.kind === 'github'
      ? { id: c.id, body: c.body, user: author, created_at: c.createdAt, updated_at: c.updatedAt }
      : { id: c.id, body: c.body, author, system: false, created_at: c.createdAt, updated_at: c.updatedAt };
  }

  private list(request: number) {
    return { status: 200, json: this.commentsOn(request).map((c) => this.wire(c)) };
  }

  private create(request: number, user: HostUser, body: unknown) {
    const text = (body as { body?: unknown } | undefined)?.body;
    if (typeof text !== 'string' || text === '') return { status: 422, json: { message: 'body is missing' } };
    return { status: 201, json: this.wire(this.comment(request, user, text)) };
  }

  private update(id: number, user: HostUser, body: unknown) {
    const comment = this.comments.find((c) => c.id === id);
    if (!comment) return { status: 404, json: { message: 'Not Found' } };
    // Neither host lets a token edit somebody else's comment.
    if (comment.author.id !== user.id) return { status: 403, json: { message: 'Forbidden' } };
    const text = (body as { body?: unknown } | undefined)?.body;
    if (typeof text !== 'string' || text === '') return { status: 422, json: { message: 'body is missing' } };
    comment.body = text;
    comment.updatedAt = this.tick();
    return { status: 200, json: this.wire(comment) };
  }

  private requestsOf(sha: string) {
    const request = this.merges.get(sha);
    if (request === undefined) return { status: 200, json: [] };
    const merged =
      this.kind === 'github'
        ? { number: request, state: 'closed', merged_at: this.tick() }
        : { iid: request, state: 'merged' };
    return { status: 200, json: [merged] };
  }
}
