// Every API call of the dashboard, in one place, typed from the OpenAPI document through the
// generated src/lib/api-schema.ts. A path here must be one of the document's paths and the method
// one of its methods (tsc fails otherwise); request bodies and answers are the operations' own
// JSON schemas. Pages call these, never api.get/post/… with a path of their own. The requests
// go through api.ts (CSRF token, error envelope, listAll over cursors).
import type { paths } from './api-schema'
import { BASE, api, listAll, seg } from './api'

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete'
type Path = keyof paths
type MethodOf<P extends Path> = Extract<keyof paths[P], Method>
type Op<P extends Path, M extends MethodOf<P>> = NonNullable<paths[P][M]>

type JSONOf<R> = R extends { content: { 'application/json': infer T } } ? T : never
/** The JSON body of an operation's success answer (200, 201 or 202); void when it has none (204). */
type Ok<O> = O extends { responses: infer R }
  ? { [C in keyof R & (200 | 201 | 202)]: JSONOf<R[C]> }[keyof R & (200 | 201 | 202)] extends infer T
    ? [T] extends [never]
      ? void
      : T
    : never
  : never
/** The JSON request body of an operation; never when it takes none. */
type Body<O> = O extends { requestBody?: infer B } ? JSONOf<NonNullable<B>> : never
/** The query parameters of an operation. */
type Query<O> = O extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never
type Item<L> = L extends { items: (infer T)[] } ? T : never

/** The names in a path template, e.g. 'org' | 'repo' for '/repos/{org}/{repo}'. */
type Names<P extends string> = P extends `${string}{${infer K}}${infer Rest}` ? K | Names<Rest> : never
type Params<P extends string> = { [K in Names<P>]: string | number }

/** The path of a template with each {name} replaced by its encoded value. */
function fill<P extends Path>(template: P, params: Params<P>): string {
  const values = params as Record<string, string | number>
  return template.replace(/\{(\w+)\}/g, (_, k: string) => seg(String(values[k])))
}

/** `?a=1&b=2`, leaving out undefined and empty values; '' when nothing is left. */
function qs(q: Record<string, string | number | undefined>): string {
  const parts = Object.entries(q)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
  return parts.length ? `?${parts.join('&')}` : ''
}

/** One request to one operation of the document. */
function call<P extends Path, M extends MethodOf<P>>(
  method: M,
  template: P,
  params: Params<P>,
  ...rest: [Body<Op<P, M>>] extends [never] ? [body?: undefined, query?: Query<Op<P, M>>] : [body: Body<Op<P, M>>, query?: Query<Op<P, M>>]
): Promise<Ok<Op<P, M>>> {
  const [body, query] = rest
  const path = fill(template, params) + (query ? qs(query as Record<string, string | number | undefined>) : '')
  type R = Ok<Op<P, M>>
  switch (method as Method) {
    case 'get':
      return api.get<R>(path)
    case 'delete':
      return api.del<R>(path)
    case 'post':
      return api.post<R>(path, body)
    case 'put':
      return api.put<R>(path, body)
    case 'patch':
      return api.patch<R>(path, body)
  }
  throw new Error(`unknown method ${String(method)}`)
}

type GetPath = { [K in Path]: paths[K] extends { get: unknown } ? K : never }[Path]
type GetOp<P extends Path> = paths[P] extends { get: infer O } ? O : never

/** Every item of a paginated GET (listAll: pages of 100, following next_cursor). */
function all<P extends GetPath>(template: P, params: Params<P>, query?: Query<GetOp<P>>) {
  const path = fill(template, params) + (query ? qs(query as Record<string, string | number | undefined>) : '')
  return listAll<Item<Ok<GetOp<P>>>>(path)
}

/** An absolute URL under /api/v1, for links, downloads and streams the browser fetches itself. */
function href<P extends Path>(template: P, params: Params<P>, query?: Record<string, string | number | undefined>): string {
  return BASE + fill(template, params) + (query ? qs(query) : '')
}

/** The JSON request body of one operation, e.g. RequestBody<'/repos/{org}/{repo}', 'patch'>. */
export type RequestBody<P extends Path, M extends MethodOf<P>> = Body<Op<P, M>>
/** The JSON success answer of one operation (void when it has none). */
export type Answer<P extends Path, M extends MethodOf<P>> = Ok<Op<P, M>>

export const endpoints = {
  version: () => call('get', '/version', {}),

  auth: {
    signup: (body: RequestBody<'/auth/signup', 'post'>) => call('post', '/auth/signup', {}, body),
    login: (body: RequestBody<'/auth/login', 'post'>) => call('post', '/auth/login', {}, body),
    logout: () => call('post', '/auth/logout', {}),
    requestPasswordReset: (body: RequestBody<'/auth/password-reset', 'post'>) => call('post', '/auth/password-reset', {}, body),
    confirmPasswordReset: (body: RequestBody<'/auth/password-reset/confirm', 'post'>) => call('post', '/auth/password-reset/confirm', {}, body),
  },

  user: {
    get: () => call('get', '/user', {}),
    orgs: () => all('/user/orgs', {}),
    tokens: {
      list: () => all('/user/tokens', {}),
      create: (body: RequestBody<'/user/tokens', 'post'>) => call('post', '/user/tokens', {}, body),
      revoke: (id: number) => call('delete', '/user/tokens/{id}', { id }),
    },
    password: (body: RequestBody<'/user/password', 'put'>) => call('put', '/user/password', {}, body),
    sessions: {
      /** The user's browser sessions (one page; `current` marks this one). */
      list: () => call('get', '/user/sessions', {}),
      revoke: (id: string) => call('delete', '/user/sessions/{id}', { id }),
    },
    invitations: {
      list: () => all('/user/invitations', {}),
      accept: (id: number) => call('post', '/user/invitations/{id}/accept', { id }),
      decline: (id: number) => call('post', '/user/invitations/{id}/decline', { id }),
      /** Claims an emailed invitation by its token. */
      acceptLink: (body: RequestBody<'/invitations/accept', 'post'>) => call('post', '/invitations/accept', {}, body),
      /** What a link's invitation offers (team, role, inviter), before accepting it. */
      previewLink: (body: RequestBody<'/invitations/preview', 'post'>) => call('post', '/invitations/preview', {}, body),
    },
  },

  orgs: {
    create: (body: RequestBody<'/orgs', 'post'>) => call('post', '/orgs', {}, body),
    repos: (org: string) => all('/orgs/{org}/repos', { org }),
    createRepo: (org: string, body: RequestBody<'/orgs/{org}/repos', 'post'>) => call('post', '/orgs/{org}/repos', { org }, body),
    storage: (org: string) => call('get', '/orgs/{org}/storage', { org }),
    members: {
      list: (org: string) => all('/orgs/{org}/members', { org }),
      setRole: (org: string, username: string, body: RequestBody<'/orgs/{org}/members/{username}', 'put'>) => call('put', '/orgs/{org}/members/{username}', { org, username }, body),
      remove: (org: string, username: string) => call('delete', '/orgs/{org}/members/{username}', { org, username }),
    },
    agents: {
      list: (org: string) => all('/orgs/{org}/agents', { org }),
      pause: (org: string, id: string) => call('post', '/orgs/{org}/agents/{id}/pause', { org, id }),
      resume: (org: string, id: string) => call('post', '/orgs/{org}/agents/{id}/resume', { org, id }),
      revoke: (org: string, id: string) => call('delete', '/orgs/{org}/agents/{id}', { org, id }),
    },
    runnerTokens: {
      list: (org: string) => all('/orgs/{org}/runner-tokens', { org }),
      create: (org: string, body: RequestBody<'/orgs/{org}/runner-tokens', 'post'>) => call('post', '/orgs/{org}/runner-tokens', { org }, body),
      remove: (org: string, id: number) => call('delete', '/orgs/{org}/runner-tokens/{id}', { org, id }),
    },
    invitations: {
      list: (org: string) => all('/orgs/{org}/invitations', { org }),
      create: (org: string, body: RequestBody<'/orgs/{org}/invitations', 'post'>) => call('post', '/orgs/{org}/invitations', { org }, body),
      withdraw: (org: string, id: number) => call('delete', '/orgs/{org}/invitations/{id}', { org, id }),
    },
  },

  code: {
    branches: (org: string, repo: string) => call('get', '/repos/{org}/{repo}/branches', { org, repo }),
    tags: (org: string, repo: string) => call('get', '/repos/{org}/{repo}/tags', { org, repo }),
    tree: (org: string, repo: string, ref?: string, path?: string) => call('get', '/repos/{org}/{repo}/tree', { org, repo }, undefined, { ref, path }),
    blob: (org: string, repo: string, ref: string | undefined, path: string) => call('get', '/repos/{org}/{repo}/blob', { org, repo }, undefined, { ref, path }),
    rawHref: (org: string, repo: string, ref: string, path: string) => href('/repos/{org}/{repo}/raw', { org, repo }, { ref, path }),
    commits: (org: string, repo: string, ref?: string, cursor?: string) =>
      call('get', '/repos/{org}/{repo}/commits', { org, repo }, undefined, { ref, cursor, limit: 30 }),
    commit: (org: string, repo: string, sha: string) => call('get', '/repos/{org}/{repo}/commits/{sha}', { org, repo, sha }),
    checks: (org: string, repo: string, sha: string) => call('get', '/repos/{org}/{repo}/commits/{sha}/checks', { org, repo, sha }),
    autoTag: (org: string, repo: string) => call('post', '/repos/{org}/{repo}/auto-tag', { org, repo }),
    deployEnvironments: (org: string, repo: string, tag: string) => call('get', '/repos/{org}/{repo}/deploy-environments', { org, repo }, undefined, { tag }),
    deploy: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}/deployments', 'post'>) => call('post', '/repos/{org}/{repo}/deployments', { org, repo }, body),
  },

  pulls: {
    list: (org: string, repo: string, state: 'open' | 'closed' | 'merged' | 'all') => call('get', '/repos/{org}/{repo}/pulls', { org, repo }, undefined, { state, limit: 100 }),
    get: (org: string, repo: string, n: number | string) => call('get', '/repos/{org}/{repo}/pulls/{number}', { org, repo, number: n }),
    open: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}/pulls', 'post'>) => call('post', '/repos/{org}/{repo}/pulls', { org, repo }, body),
    files: (org: string, repo: string, n: number | string) => call('get', '/repos/{org}/{repo}/pulls/{number}/files', { org, repo, number: n }),
    commits: (org: string, repo: string, n: number | string) => call('get', '/repos/{org}/{repo}/pulls/{number}/commits', { org, repo, number: n }),
    comments: (org: string, repo: string, n: number | string) => all('/repos/{org}/{repo}/pulls/{number}/comments', { org, repo, number: n }),
    comment: (org: string, repo: string, n: number | string, body: RequestBody<'/repos/{org}/{repo}/pulls/{number}/comments', 'post'>) =>
      call('post', '/repos/{org}/{repo}/pulls/{number}/comments', { org, repo, number: n }, body),
    reviews: (org: string, repo: string, n: number | string) => all('/repos/{org}/{repo}/pulls/{number}/reviews', { org, repo, number: n }),
    review: (org: string, repo: string, n: number | string, body: RequestBody<'/repos/{org}/{repo}/pulls/{number}/reviews', 'post'>) =>
      call('post', '/repos/{org}/{repo}/pulls/{number}/reviews', { org, repo, number: n }, body),
    merge: (org: string, repo: string, n: number | string, body: RequestBody<'/repos/{org}/{repo}/pulls/{number}/merge', 'post'>) =>
      call('post', '/repos/{org}/{repo}/pulls/{number}/merge', { org, repo, number: n }, body),
    metrics: (org: string, repo: string, n: number | string) => call('get', '/repos/{org}/{repo}/pulls/{number}/metrics', { org, repo, number: n }),
    approveRun: (org: string, repo: string, n: number | string) => call('post', '/repos/{org}/{repo}/pulls/{number}/approve-run', { org, repo, number: n }),
  },

  repos: {
    get: (org: string, repo: string) => call('get', '/repos/{org}/{repo}', { org, repo }),
    update: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}', 'patch'>) => call('patch', '/repos/{org}/{repo}', { org, repo }, body),
    delete: (org: string, repo: string) => call('delete', '/repos/{org}/{repo}', { org, repo }),
    secrets: {
      list: (org: string, repo: string) => all('/repos/{org}/{repo}/secrets', { org, repo }),
      put: (org: string, repo: string, name: string, body: RequestBody<'/repos/{org}/{repo}/secrets/{name}', 'put'>) =>
        call('put', '/repos/{org}/{repo}/secrets/{name}', { org, repo, name }, body),
      delete: (org: string, repo: string, name: string) => call('delete', '/repos/{org}/{repo}/secrets/{name}', { org, repo, name }),
    },
    publishWebhook: {
      get: (org: string, repo: string) => call('get', '/repos/{org}/{repo}/webhooks/publish', { org, repo }),
      set: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}/webhooks/publish', 'put'>) => call('put', '/repos/{org}/{repo}/webhooks/publish', { org, repo }, body),
      remove: (org: string, repo: string) => call('delete', '/repos/{org}/{repo}/webhooks/publish', { org, repo }),
      deliveries: (org: string, repo: string) => call('get', '/repos/{org}/{repo}/webhooks/publish/deliveries', { org, repo }),
    },
    deployTokens: {
      list: (org: string, repo: string) => all('/repos/{org}/{repo}/deploy-tokens', { org, repo }),
      create: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}/deploy-tokens', 'post'>) => call('post', '/repos/{org}/{repo}/deploy-tokens', { org, repo }, body),
      revoke: (org: string, repo: string, id: number) => call('delete', '/repos/{org}/{repo}/deploy-tokens/{id}', { org, repo, id }),
    },
    builds: {
      /** The latest 50 builds (one page). */
      list: (org: string, repo: string) => call('get', '/repos/{org}/{repo}/builds', { org, repo }, undefined, { limit: 50 }),
      trigger: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}/builds', 'post'>) => call('post', '/repos/{org}/{repo}/builds', { org, repo }, body),
      /**
       * The build with every pipeline: its answer carries the first 100 and, when it has more,
       * the cursor of the rest, which are read here page by page.
       */
      get: async (org: string, repo: string, number: number | string) => {
        const b = await call('get', '/repos/{org}/{repo}/builds/{number}', { org, repo, number })
        if (!b.pipelines_next_cursor) return b
        const pages = Math.ceil((b.pipeline_count - b.pipelines.length) / 100)
        const rest = await listAll<Item<Ok<GetOp<'/repos/{org}/{repo}/builds/{number}/pipelines'>>>>(
          fill('/repos/{org}/{repo}/builds/{number}/pipelines', { org, repo, number }),
          pages,
          b.pipelines_next_cursor,
        )
        return { ...b, pipelines: [...b.pipelines, ...rest], pipelines_next_cursor: undefined }
      },
      cancel: (org: string, repo: string, number: number) => call('post', '/repos/{org}/{repo}/builds/{number}/cancel', { org, repo, number }),
      rerun: (org: string, repo: string, number: number) => call('post', '/repos/{org}/{repo}/builds/{number}/rerun', { org, repo, number }),
      /** Re-runs only the pipelines that did not succeed ("Re-run failed jobs"). */
      rerunFailed: (org: string, repo: string, number: number) => call('post', '/repos/{org}/{repo}/builds/{number}/rerun', { org, repo, number }, undefined, { failed: 'true' }),
      /** A new build from the pipelines' records: same commit and plans, images pinned by digest. */
      rerunExact: (org: string, repo: string, number: number) => call('post', '/repos/{org}/{repo}/builds/{number}/rerun-exact', { org, repo, number }),
    },
    schedules: {
      /** The repo's registered schedules, with their next run, last build and who they run as. */
      list: (org: string, repo: string) => all('/repos/{org}/{repo}/schedules', { org, repo }),
      /** "Run now" (repo admins): a build of the schedule's branch and event, as the caller. */
      run: (org: string, repo: string, id: number) => call('post', '/repos/{org}/{repo}/schedules/{id}/run', { org, repo, id }),
    },
    /** A metric across a branch's builds; without name, the names reported there. */
    metrics: (org: string, repo: string, branch?: string, name?: string) =>
      call('get', '/repos/{org}/{repo}/metrics', { org, repo }, undefined, { branch: branch || undefined, name: name || undefined }),
    records: {
      /** A pipeline's reproducibility record (in-toto Statement, SLSA Provenance v1). */
      get: (org: string, repo: string, id: number) => call('get', '/repos/{org}/{repo}/pipelines/{id}/record', { org, repo, id }),
      /** The record's JSON, for a link. */
      url: (org: string, repo: string, id: number) => href('/repos/{org}/{repo}/pipelines/{id}/record', { org, repo, id }),
      compare: (org: string, repo: string, a: number, b: number) => call('get', '/repos/{org}/{repo}/records/compare', { org, repo }, undefined, { a, b }),
    },
    workspaces: {
      /** Fires the vscode event on a branch: a build whose pipelines stay up as workspaces. */
      open: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}/workspaces', 'post'>) => call('post', '/repos/{org}/{repo}/workspaces', { org, repo }, body),
    },
    artifacts: {
      /** The first 100 packages (one page). */
      packages: (org: string, repo: string) => call('get', '/repos/{org}/{repo}/artifacts', { org, repo }, undefined, { limit: 100 }),
      /** The first 100 versions of a package (one page). */
      versions: (org: string, repo: string, pkg: string) => call('get', '/repos/{org}/{repo}/artifacts/{package}', { org, repo, package: pkg }, undefined, { limit: 100 }),
      version: (org: string, repo: string, pkg: string, version: string) =>
        call('get', '/repos/{org}/{repo}/artifacts/{package}/{version}', { org, repo, package: pkg, version }),
      /** The URL a file is uploaded to and downloaded from. */
      fileUrl: (org: string, repo: string, pkg: string, version: string, file: string) =>
        href('/repos/{org}/{repo}/artifacts/{package}/{version}/{file}', { org, repo, package: pkg, version, file }),
    },
    /** The branches, and the events a branch's .cnb.yml declares ("Run a build"). */
    events: (org: string, repo: string, branch: string) => call('get', '/repos/{org}/{repo}/events', { org, repo }, undefined, { branch }),
    buttons: {
      /** The .cnb/web_trigger.yml buttons of a branch. */
      list: (org: string, repo: string, branch: string) => call('get', '/repos/{org}/{repo}/buttons', { org, repo }, undefined, { branch }),
      press: (org: string, repo: string, body: RequestBody<'/repos/{org}/{repo}/buttons/press', 'post'>) => call('post', '/repos/{org}/{repo}/buttons/press', { org, repo }, body),
    },
    releases: {
      /** The latest 100 releases (one page). */
      list: (org: string, repo: string) => call('get', '/repos/{org}/{repo}/releases', { org, repo }, undefined, { limit: 100 }),
      get: (org: string, repo: string, tag: string) => call('get', '/repos/{org}/{repo}/releases/{tag}', { org, repo, tag }),
      remove: (org: string, repo: string, tag: string) => call('delete', '/repos/{org}/{repo}/releases/{tag}', { org, repo, tag }),
    },
  },

  billing: {
    get: (org: string) => call('get', '/orgs/{org}/billing', { org }),
    putSettings: (org: string, body: RequestBody<'/orgs/{org}/billing/settings', 'put'>) => call('put', '/orgs/{org}/billing/settings', { org }, body),
    /** Every usage row from `from` to `to` (empty: today). */
    usage: (org: string, from: string, to: string) => all('/orgs/{org}/billing/usage', { org }, { from, to }),
    /** One page of 25 ledger entries, after `cursor` when given. */
    ledger: (org: string, cursor?: string) => call('get', '/orgs/{org}/billing/ledger', { org }, undefined, { limit: 25, cursor }),
    /** The latest 10 notifications (one page). */
    notifications: (org: string) => call('get', '/orgs/{org}/billing/notifications', { org }, undefined, { limit: 10 }),
    topup: (org: string, body: RequestBody<'/orgs/{org}/billing/topups', 'post'>) => call('post', '/orgs/{org}/billing/topups', { org }, body),
    /** The month's CSV statement (a download link). */
    statementUrl: (org: string, month: string) => href('/orgs/{org}/billing/statements/{month}', { org, month }),
  },

  /** The installation's prices, quotas, pre-freeze rule and billing time zone. */
  pricing: () => call('get', '/pricing', {}),

  admin: {
    agents: () => all('/admin/agents', {}),
    registrationTokens: {
      list: () => all('/admin/registration-tokens', {}),
      create: (body: RequestBody<'/admin/registration-tokens', 'post'>) => call('post', '/admin/registration-tokens', {}, body),
      remove: (id: number) => call('delete', '/admin/registration-tokens/{id}', { id }),
    },
    orgs: () => all('/admin/orgs', {}),
    settings: () => call('get', '/admin/settings', {}),
    /** A credit grant; the same key grants once however often it is sent (a double click). */
    grant: (org: string, body: RequestBody<'/admin/orgs/{org}/credits', 'post'>, idempotencyKey: string) =>
      api.post<Ok<Op<'/admin/orgs/{org}/credits', 'post'>>>(fill('/admin/orgs/{org}/credits', { org }), body, { 'Idempotency-Key': idempotencyKey }),
  },

  /** Cloud workspaces (backend/workspace/README.md); the helpers for people are in workspaces.ts. */
  workspaces: {
    /**
     * The team's workspaces, newest first: the active ones, or with `all` the ended too. The
     * server answers them whole (at most 200); a next_cursor, should it ever page, is followed.
     */
    list: (org: string, all = false) =>
      listAll<Item<Ok<GetOp<'/orgs/{org}/workspaces'>>>>(fill('/orgs/{org}/workspaces', { org }) + (all ? '?all=true' : ''), 20, undefined, null),
    get: (id: number | string) => call('get', '/workspaces/{id}', { id }),
    /** A graceful stop: the endStages run and the work is saved (202). */
    stop: (id: number) => call('post', '/workspaces/{id}/stop', { id }),
    /** Starts the idle countdown again. */
    keepalive: (id: number) => call('post', '/workspaces/{id}/keepalive', { id }),
    /** Applies a saved work to the workspace's tree, uncommitted. */
    restore: (id: number, ref: string) => call('post', '/workspaces/{id}/restore', { id }, { ref }),
  },

  jobs: {
    /** The job's log as text/plain (fetched as a stream, and the raw-log link). */
    logUrl: (id: number) => href('/jobs/{id}/log', { id }),
    /** The server-sent events of the log from a byte offset on. */
    logStreamUrl: (id: number, offset: number) => href('/jobs/{id}/log/stream', { id }, { offset }),
    /** When each piece of the log arrived, from byte offset after on (-1: all). */
    logTimes: (id: number, after: number) => call('get', '/jobs/{id}/log/times', { id }, undefined, { after }),
  },
}
