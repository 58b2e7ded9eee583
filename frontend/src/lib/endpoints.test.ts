import { setCsrf } from './api'
import { endpoints as e } from './endpoints'

// Each call's method, URL and body: the requests the pages made before they went through the
// module, path by path.
describe('endpoints', () => {
  const calls: { method: string; url: string; body?: string; csrf?: string }[] = []
  beforeEach(() => {
    setCsrf('tok')
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init: RequestInit) => {
        const headers = init.headers as Record<string, string>
        calls.push({ method: init.method!, url, body: init.body as string | undefined, csrf: headers['X-CSRF-Token'] })
        return init.method === 'DELETE' ? new Response(null, { status: 204 }) : new Response('{"items":[]}', { status: 200 })
      }),
    )
  })
  afterEach(() => {
    calls.length = 0
    vi.unstubAllGlobals()
    setCsrf('')
  })
  const one = async (p: Promise<unknown>) => {
    await p
    expect(calls).toHaveLength(1)
    const c = calls[0]
    calls.length = 0
    return [c.method, c.url, c.body === undefined ? undefined : JSON.parse(c.body)]
  }

  it('builds the paths, query strings and bodies of the API', async () => {
    const cases: [() => Promise<unknown>, string, string, unknown?][] = [
      [() => e.version(), 'GET', '/api/v1/version'],
      [() => e.user.get(), 'GET', '/api/v1/user'],
      [() => e.auth.login({ login: 'ada', password: 'pw' }), 'POST', '/api/v1/auth/login', { login: 'ada', password: 'pw' }],
      [() => e.auth.signup({ email: 'a@b.c', username: 'ada', password: 'pw' }), 'POST', '/api/v1/auth/signup', { email: 'a@b.c', username: 'ada', password: 'pw' }],
      [() => e.auth.logout(), 'POST', '/api/v1/auth/logout'],
      [() => e.auth.requestPasswordReset({ email: 'a@b.c' }), 'POST', '/api/v1/auth/password-reset', { email: 'a@b.c' }],
      [() => e.auth.confirmPasswordReset({ token: 't', password: 'pw' }), 'POST', '/api/v1/auth/password-reset/confirm', { token: 't', password: 'pw' }],
      [() => e.user.orgs(), 'GET', '/api/v1/user/orgs?limit=100'],
      [() => e.user.tokens.list(), 'GET', '/api/v1/user/tokens?limit=100'],
      [() => e.user.tokens.create({ name: 'n', scopes: ['repo:write'], expires_in_days: null }), 'POST', '/api/v1/user/tokens', { name: 'n', scopes: ['repo:write'], expires_in_days: null }],
      [() => e.user.tokens.revoke(7), 'DELETE', '/api/v1/user/tokens/7'],
      [() => e.user.invitations.list(), 'GET', '/api/v1/user/invitations?limit=100'],
      [() => e.user.invitations.accept(3), 'POST', '/api/v1/user/invitations/3/accept'],
      [() => e.user.invitations.decline(3), 'POST', '/api/v1/user/invitations/3/decline'],
      [() => e.user.invitations.acceptLink({ token: 't' }), 'POST', '/api/v1/invitations/accept', { token: 't' }],
      [() => e.orgs.create({ name: 'ml' }), 'POST', '/api/v1/orgs', { name: 'ml' }],
      [() => e.orgs.repos('m l'), 'GET', '/api/v1/orgs/m%20l/repos?limit=100'],
      [() => e.orgs.createRepo('ml', { name: 'r', visibility: 'private' }), 'POST', '/api/v1/orgs/ml/repos', { name: 'r', visibility: 'private' }],
      [() => e.orgs.storage('ml'), 'GET', '/api/v1/orgs/ml/storage'],
      [() => e.orgs.members.list('ml'), 'GET', '/api/v1/orgs/ml/members?limit=100'],
      [() => e.orgs.members.setRole('ml', 'a/b', { role: 'admin' }), 'PUT', '/api/v1/orgs/ml/members/a%2Fb', { role: 'admin' }],
      [() => e.orgs.members.remove('ml', 'ada'), 'DELETE', '/api/v1/orgs/ml/members/ada'],
      [() => e.orgs.invitations.list('ml'), 'GET', '/api/v1/orgs/ml/invitations?limit=100'],
      [() => e.orgs.invitations.create('ml', { email: 'a@b.c', role: 'developer' }), 'POST', '/api/v1/orgs/ml/invitations', { email: 'a@b.c', role: 'developer' }],
      [() => e.orgs.invitations.withdraw('ml', 4), 'DELETE', '/api/v1/orgs/ml/invitations/4'],
      [() => e.repos.get('ml', 'trainer'), 'GET', '/api/v1/repos/ml/trainer'],
      [() => e.repos.update('ml', 'trainer', { archived: true }), 'PATCH', '/api/v1/repos/ml/trainer', { archived: true }],
      [() => e.repos.delete('ml', 'trainer'), 'DELETE', '/api/v1/repos/ml/trainer'],
      [() => e.repos.secrets.list('ml', 'trainer'), 'GET', '/api/v1/repos/ml/trainer/secrets?limit=100'],
      [() => e.repos.secrets.put('ml', 'trainer', 'KEY', { value: 'v' }), 'PUT', '/api/v1/repos/ml/trainer/secrets/KEY', { value: 'v' }],
      [() => e.repos.secrets.delete('ml', 'trainer', 'KEY'), 'DELETE', '/api/v1/repos/ml/trainer/secrets/KEY'],
      [() => e.repos.deployTokens.list('ml', 'trainer'), 'GET', '/api/v1/repos/ml/trainer/deploy-tokens?limit=100'],
      [() => e.repos.deployTokens.create('ml', 'trainer', { name: 'n' }), 'POST', '/api/v1/repos/ml/trainer/deploy-tokens', { name: 'n' }],
      [() => e.repos.deployTokens.revoke('ml', 'trainer', 5), 'DELETE', '/api/v1/repos/ml/trainer/deploy-tokens/5'],
      [() => e.repos.builds.list('ml', 'trainer'), 'GET', '/api/v1/repos/ml/trainer/builds?limit=50'],
      [() => e.repos.builds.trigger('ml', 'trainer', { branch: 'main', event: 'web_trigger', env: { A: '1' } }), 'POST', '/api/v1/repos/ml/trainer/builds', { branch: 'main', event: 'web_trigger', env: { A: '1' } }],
      [() => e.repos.builds.get('ml', 'trainer', '12'), 'GET', '/api/v1/repos/ml/trainer/builds/12'],
      [() => e.repos.builds.cancel('ml', 'trainer', 12), 'POST', '/api/v1/repos/ml/trainer/builds/12/cancel'],
      [() => e.repos.builds.rerun('ml', 'trainer', 12), 'POST', '/api/v1/repos/ml/trainer/builds/12/rerun'],
      [() => e.repos.artifacts.packages('ml', 'trainer'), 'GET', '/api/v1/repos/ml/trainer/artifacts?limit=100'],
      [() => e.repos.artifacts.versions('ml', 'trainer', 'bert'), 'GET', '/api/v1/repos/ml/trainer/artifacts/bert?limit=100'],
      [() => e.repos.artifacts.version('ml', 'trainer', 'bert', 'v1'), 'GET', '/api/v1/repos/ml/trainer/artifacts/bert/v1'],
      [() => e.billing.get('ml'), 'GET', '/api/v1/orgs/ml/billing'],
      [() => e.billing.putSettings('ml', { spending_cap: null, low_balance_threshold: '5', alert_webhook_url: '' }), 'PUT', '/api/v1/orgs/ml/billing/settings', { spending_cap: null, low_balance_threshold: '5', alert_webhook_url: '' }],
      [() => e.billing.usage('ml', '2026-01-01', ''), 'GET', '/api/v1/orgs/ml/billing/usage?from=2026-01-01&limit=100'],
      [() => e.billing.usage('ml', '2026-01-01', '2026-01-31'), 'GET', '/api/v1/orgs/ml/billing/usage?from=2026-01-01&to=2026-01-31&limit=100'],
      [() => e.billing.ledger('ml', ''), 'GET', '/api/v1/orgs/ml/billing/ledger?limit=25'],
      [() => e.billing.ledger('ml', 'c/2'), 'GET', '/api/v1/orgs/ml/billing/ledger?limit=25&cursor=c%2F2'],
      [() => e.billing.notifications('ml'), 'GET', '/api/v1/orgs/ml/billing/notifications?limit=10'],
      [() => e.billing.topup('ml', { amount: '10' }), 'POST', '/api/v1/orgs/ml/billing/topups', { amount: '10' }],
      [() => e.admin.agents(), 'GET', '/api/v1/admin/agents?limit=100'],
      [() => e.orgs.agents.list('ml'), 'GET', '/api/v1/orgs/ml/agents?limit=100'],
      [() => e.orgs.agents.pause('ml', 'agt_1'), 'POST', '/api/v1/orgs/ml/agents/agt_1/pause'],
      [() => e.orgs.agents.resume('ml', 'agt_1'), 'POST', '/api/v1/orgs/ml/agents/agt_1/resume'],
      [() => e.orgs.agents.revoke('ml', 'agt_1'), 'DELETE', '/api/v1/orgs/ml/agents/agt_1'],
      [() => e.orgs.runnerTokens.create('ml', { name: 'boxes' }), 'POST', '/api/v1/orgs/ml/runner-tokens', { name: 'boxes' }],
      [() => e.orgs.runnerTokens.remove('ml', 7), 'DELETE', '/api/v1/orgs/ml/runner-tokens/7'],
    ]
    for (const [run, method, url, body] of cases) expect(await one(run())).toEqual([method, url, body])
  })

  it('sends the CSRF token on writes only', async () => {
    await e.repos.get('ml', 'trainer')
    await e.repos.delete('ml', 'trainer')
    expect(calls.map((c) => [c.method, c.csrf])).toEqual([
      ['GET', undefined],
      ['DELETE', 'tok'],
    ])
  })

  // A build of more pipelines than one answer carries: the build page used to show only what
  // the build's answer held. get follows pipelines_next_cursor through the pipelines list.
  it('reads every pipeline of a build, page by page after the first', async () => {
    const ps = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ id: from + i, name: `p${from + i}` }))
    const answers: Record<string, unknown> = {
      '/api/v1/repos/ml/trainer/builds/12': { number: 12, pipelines: ps(1, 100), pipeline_count: 250, pipelines_next_cursor: 'c100' },
      '/api/v1/repos/ml/trainer/builds/12/pipelines?limit=100&cursor=c100': { items: ps(101, 100), next_cursor: 'c200' },
      '/api/v1/repos/ml/trainer/builds/12/pipelines?limit=100&cursor=c200': { items: ps(201, 50) },
    }
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string) => {
        calls.push({ method: 'GET', url })
        return new Response(JSON.stringify(answers[url]), { status: url in answers ? 200 : 404 })
      }),
    )
    const b = await e.repos.builds.get('ml', 'trainer', 12)
    expect(calls.map((c) => c.url)).toEqual(Object.keys(answers))
    expect(b.pipelines.map((x) => x.id)).toEqual(ps(1, 250).map((x) => x.id))
    expect(b.pipelines_next_cursor).toBeUndefined()
  })

  it('gives the URLs the browser fetches itself', () => {
    expect(e.jobs.logUrl(9)).toBe('/api/v1/jobs/9/log')
    expect(e.jobs.logStreamUrl(9, 1234)).toBe('/api/v1/jobs/9/log/stream?offset=1234')
    expect(e.billing.statementUrl('ml', '2026-01')).toBe('/api/v1/orgs/ml/billing/statements/2026-01')
    expect(e.repos.artifacts.fileUrl('ml', 'trainer', 'PACKAGE', 'VERSION', 'FILE')).toBe('/api/v1/repos/ml/trainer/artifacts/PACKAGE/VERSION/FILE')
  })
})

// The workspace calls stub fetch themselves: the list follows a next_cursor, should one come.
describe('endpoints.workspaces', () => {
  it('calls the workspace routes with the CSRF token on writes', async () => {
    const calls: { method: string; url: string; body?: string; csrf?: string }[] = []
    setCsrf('tok')
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init: RequestInit) => {
        calls.push({ method: init.method!, url, body: init.body as string | undefined, csrf: (init.headers as Record<string, string>)['X-CSRF-Token'] })
        if (url.includes('cursor=c2')) return new Response(JSON.stringify({ items: [{ id: 2 }] }), { status: 200 })
        if (url.startsWith('/api/v1/orgs/')) return new Response(JSON.stringify({ items: [{ id: 1 }], next_cursor: 'c2' }), { status: 200 })
        return new Response('{"ref":"r","files":[]}', { status: 200 })
      }),
    )
    try {
      expect((await e.workspaces.list('m l', true)).map((x) => x.id)).toEqual([1, 2])
      await e.workspaces.get(42)
      await e.workspaces.stop(42)
      await e.workspaces.keepalive(42)
      await e.workspaces.restore(42, 'refs/nimbus/workspaces/main/41')
      expect(calls.map((c) => [c.method, c.url, c.csrf])).toEqual([
        ['GET', '/api/v1/orgs/m%20l/workspaces?all=true', undefined],
        ['GET', '/api/v1/orgs/m%20l/workspaces?all=true&cursor=c2', undefined],
        ['GET', '/api/v1/workspaces/42', undefined],
        ['POST', '/api/v1/workspaces/42/stop', 'tok'],
        ['POST', '/api/v1/workspaces/42/keepalive', 'tok'],
        ['POST', '/api/v1/workspaces/42/restore', 'tok'],
      ])
      expect(JSON.parse(calls[5].body!)).toEqual({ ref: 'refs/nimbus/workspaces/main/41' })
    } finally {
      vi.unstubAllGlobals()
      setCsrf('')
    }
  })
})
