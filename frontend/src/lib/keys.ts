// Every TanStack Query key of the dashboard, beside endpoints.ts: one function a cached answer.
// Pages never write a key array themselves, so a query and the invalidation that refreshes it
// cannot drift apart (['build', org, repo, '7'] read and ['build', org, repo, 7] invalidated
// would never meet).
//
// Shape: the first element names the answer; the rest are its parameters, numbers and ids as
// strings (a route parameter is a string, an API field a number). A key is a prefix of the keys
// under it, so `keys.workspaces.all()` invalidates every team's workspace lists, and
// `keys.repos.publishWebhook(org, repo)` the webhook and its deliveries.

type Id = number | string
const id = (v: Id) => String(v)

export const keys = {
  version: () => ['version'] as const,
  pricing: () => ['pricing'] as const,

  user: () => ['user'] as const,
  sessions: () => ['sessions'] as const,
  tokens: () => ['tokens'] as const,
  /** The teams the user belongs to (the team switcher). */
  orgs: () => ['orgs'] as const,
  myInvitations: () => ['my-invitations'] as const,
  invitationPreview: (token: string) => ['invitation-preview', token] as const,

  org: {
    repos: (org: string) => ['repos', org] as const,
    members: (org: string) => ['members', org] as const,
    invitations: (org: string) => ['invitations', org] as const,
    storage: (org: string) => ['storage', org] as const,
    agents: (org: string) => ['team-agents', org] as const,
    runnerTokens: (org: string) => ['runner-tokens', org] as const,
  },

  billing: {
    account: (org: string) => ['billing', org] as const,
    usage: (org: string, from: string, to: string) => ['usage', org, from, to] as const,
    ledger: (org: string) => ['ledger', org] as const,
    notifications: (org: string) => ['billing-notifications', org] as const,
  },

  code: {
    branches: (org: string, repo: string) => ['branches', org, repo] as const,
    tags: (org: string, repo: string) => ['tags', org, repo] as const,
    tree: (org: string, repo: string, ref: string, path: string) => ['tree', org, repo, ref, path] as const,
    blob: (org: string, repo: string, ref: string, path: string) => ['blob', org, repo, ref, path] as const,
    commits: (org: string, repo: string, ref: string, cursor: string) => ['commits', org, repo, ref, cursor] as const,
    commit: (org: string, repo: string, sha: string) => ['commit', org, repo, sha] as const,
    checks: (org: string, repo: string, sha: string) => ['commit', org, repo, sha, 'checks'] as const,
    deployEnvironments: (org: string, repo: string, tag: string) => ['deploy-environments', org, repo, tag] as const,
  },

  pulls: {
    list: (org: string, repo: string, state: string) => ['pulls', org, repo, state] as const,
    /** Everything about one request: its page's queries all start with this. */
    one: (org: string, repo: string, n: Id) => ['pull', org, repo, id(n)] as const,
    files: (org: string, repo: string, n: Id) => ['pull', org, repo, id(n), 'files'] as const,
    commits: (org: string, repo: string, n: Id) => ['pull', org, repo, id(n), 'commits'] as const,
    comments: (org: string, repo: string, n: Id) => ['pull', org, repo, id(n), 'comments'] as const,
    reviews: (org: string, repo: string, n: Id) => ['pull', org, repo, id(n), 'reviews'] as const,
    metrics: (org: string, repo: string, n: Id) => ['pull', org, repo, id(n), 'metrics'] as const,
    /** The builds of its checks; builds is their numbers joined by commas. */
    checkBuilds: (org: string, repo: string, n: Id, builds: string) => ['pull', org, repo, id(n), 'builds', builds] as const,
  },

  repos: {
    get: (org: string, repo: string) => ['repo', org, repo] as const,
    builds: (org: string, repo: string) => ['builds', org, repo] as const,
    build: (org: string, repo: string, number: Id) => ['build', org, repo, id(number)] as const,
    events: (org: string, repo: string, branch: string) => ['events', org, repo, branch] as const,
    buttons: (org: string, repo: string, branch: string) => ['buttons', org, repo, branch] as const,
    schedules: (org: string, repo: string) => ['schedules', org, repo] as const,
    secrets: (org: string, repo: string) => ['secrets', org, repo] as const,
    deployTokens: (org: string, repo: string) => ['deploy-tokens', org, repo] as const,
    publishWebhook: (org: string, repo: string) => ['publish-webhook', org, repo] as const,
    webhookDeliveries: (org: string, repo: string) => ['publish-webhook', org, repo, 'deliveries'] as const,
    releases: (org: string, repo: string) => ['releases', org, repo] as const,
    release: (org: string, repo: string, tag: string) => ['release', org, repo, tag] as const,
    metricNames: (org: string, repo: string, branch: string) => ['metric-names', org, repo, branch] as const,
    metric: (org: string, repo: string, branch: string, name: string) => ['metrics', org, repo, branch, name] as const,
    record: (org: string, repo: string, pipeline: Id) => ['record', org, repo, id(pipeline)] as const,
    /** `b` undefined: nothing to compare with yet (the query is disabled). */
    recordDiff: (org: string, repo: string, a: Id, b: Id | undefined) => ['record-diff', org, repo, id(a), b === undefined ? '' : id(b)] as const,
    artifactPackages: (org: string, repo: string) => ['artifact-packages', org, repo] as const,
    artifactVersions: (org: string, repo: string, pkg: string) => ['artifact-versions', org, repo, pkg] as const,
    artifactVersion: (org: string, repo: string, pkg: string, version: string) => ['artifact-version', org, repo, pkg, version] as const,
  },

  workspaces: {
    /** Every team's lists: what a new or stopped workspace invalidates. */
    all: () => ['workspaces'] as const,
    list: (org: string, ended: boolean) => ['workspaces', org, ended] as const,
    get: (workspace: Id) => ['workspace', id(workspace)] as const,
  },

  admin: {
    agents: () => ['agents'] as const,
    registrationTokens: () => ['registration-tokens'] as const,
    orgs: () => ['admin-orgs'] as const,
    settings: () => ['admin-settings'] as const,
  },
}
