import { ApiError, api, listAll, setCsrf } from './api'

describe('api', () => {
  const calls: { url: string; init: RequestInit }[] = []
  const respond = (status: number, body: unknown) =>
    vi.fn(async (url: string, init: RequestInit) => {
      calls.push({ url, init })
      return new Response(body === undefined ? null : JSON.stringify(body), { status })
    })
  afterEach(() => {
    calls.length = 0
    vi.unstubAllGlobals()
    setCsrf('')
  })

  it('sends the CSRF token on writes only', async () => {
    vi.stubGlobal('fetch', respond(200, { ok: true }))
    setCsrf('tok')
    await api.get('/user')
    await api.post('/orgs', { name: 'ml' })
    expect((calls[0].init.headers as Record<string, string>)['X-CSRF-Token']).toBeUndefined()
    expect((calls[1].init.headers as Record<string, string>)['X-CSRF-Token']).toBe('tok')
    expect(calls[1].url).toBe('/api/v1/orgs')
    expect(calls[1].init.body).toBe('{"name":"ml"}')
  })

  it('turns the error envelope into an ApiError', async () => {
    vi.stubGlobal('fetch', respond(422, { error: { code: 'validation_failed', message: 'name is taken', details: { field: 'name' } } }))
    const err = (await api.post("/orgs", {}).catch((e: unknown) => e)) as ApiError
    expect(err).toBeInstanceOf(ApiError)
    expect([err.status, err.code, err.message, err.field]).toEqual([422, 'validation_failed', 'name is taken', 'name'])
  })

  it('follows next_cursor through every page', async () => {
    const pages = [{ items: [1, 2], next_cursor: 'c2' }, { items: [3] }]
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string) => {
        calls.push({ url, init: {} })
        return new Response(JSON.stringify(pages[calls.length - 1]), { status: 200 })
      }),
    )
    expect(await listAll<number>('/user/orgs')).toEqual([1, 2, 3])
    expect(calls.map((c) => c.url)).toEqual(['/api/v1/user/orgs?limit=100', '/api/v1/user/orgs?limit=100&cursor=c2'])
  })
})
