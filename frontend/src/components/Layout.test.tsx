import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes, useLocation } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { Layout, TEAM_KEY } from './Layout'
import type { Org, User } from '../lib/types'

const user: User = { id: 1, username: 'ada', email: 'ada@example.com', is_admin: false, created_at: '2026-01-01T00:00:00Z' }
const orgs: Org[] = [
  { id: 1, name: 'alpha', role: 'owner', created_at: '2026-01-01T00:00:00Z' },
  { id: 2, name: 'beta', role: 'developer', created_at: '2026-01-01T00:00:00Z' },
  { id: 3, name: 'gamma', role: 'reporter', created_at: '2026-01-01T00:00:00Z' },
]

function Where() {
  const loc = useLocation()
  return <p data-testid="where">{loc.pathname}</p>
}

function show(at: string) {
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string) => {
      const path = url.split('?')[0]
      const answer = path === '/api/v1/user' ? user : path === '/api/v1/user/orgs' ? { items: orgs } : undefined
      return answer ? new Response(JSON.stringify(answer), { status: 200 }) : new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
    }),
  )
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={[at]}>
        <Routes>
          <Route element={<Layout />}>
            <Route path="/settings/tokens" element={<Where />} />
            <Route path="/account" element={<Where />} />
            <Route path="/orgs/:org" element={<Where />} />
            <Route path="/orgs/:org/members" element={<Where />} />
            <Route path="/:org/:repo" element={<Where />} />
          </Route>
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

async function switcher() {
  const select = (await screen.findByLabelText('Team')) as HTMLSelectElement
  await waitFor(() => expect(select.disabled).toBe(false))
  return select
}

const where = () => screen.getByTestId('where').textContent

beforeEach(() => localStorage.clear())
afterEach(() => vi.unstubAllGlobals())

describe('TeamSwitcher', () => {
  it('moves the selection with the arrow keys without leaving the page; Enter goes to the team', async () => {
    show('/orgs/alpha')
    const select = await switcher()
    await waitFor(() => expect(select.value).toBe('alpha'))
    // What a browser does on ArrowDown in a closed select: keydown, then change.
    fireEvent.keyDown(select, { key: 'ArrowDown' })
    fireEvent.change(select, { target: { value: 'beta' } })
    fireEvent.keyDown(select, { key: 'ArrowDown' })
    fireEvent.change(select, { target: { value: 'gamma' } })
    expect(select.value).toBe('gamma')
    expect(where()).toBe('/orgs/alpha')
    fireEvent.keyDown(select, { key: 'ArrowUp' })
    fireEvent.change(select, { target: { value: 'beta' } })
    expect(where()).toBe('/orgs/alpha')
    fireEvent.keyDown(select, { key: 'Enter' })
    await waitFor(() => expect(where()).toBe('/orgs/beta'))
    expect(select.value).toBe('beta')
  })

  it('puts the current team back on Escape, and goes to a keyboard choice when focus leaves', async () => {
    show('/orgs/alpha')
    const select = await switcher()
    await waitFor(() => expect(select.value).toBe('alpha'))
    fireEvent.keyDown(select, { key: 'ArrowDown' })
    fireEvent.change(select, { target: { value: 'beta' } })
    fireEvent.keyDown(select, { key: 'Escape' })
    expect(select.value).toBe('alpha')
    fireEvent.keyDown(select, { key: 'End' })
    fireEvent.change(select, { target: { value: 'gamma' } })
    expect(where()).toBe('/orgs/alpha')
    fireEvent.blur(select)
    await waitFor(() => expect(where()).toBe('/orgs/gamma'))
  })

  it('goes to a team picked with the pointer at once', async () => {
    show('/orgs/alpha')
    const select = await switcher()
    fireEvent.pointerDown(select)
    fireEvent.change(select, { target: { value: 'gamma' } })
    await waitFor(() => expect(where()).toBe('/orgs/gamma'))
  })

  it('keeps the last team on a page whose URL names none, and its links point there', async () => {
    const first = show('/beta/web')
    const select = await switcher()
    await waitFor(() => expect(select.value).toBe('beta'))
    await waitFor(() => expect(localStorage.getItem(TEAM_KEY)).toBe('beta'))
    first.unmount()

    show('/settings/tokens')
    const again = await switcher()
    await waitFor(() => expect(again.value).toBe('beta'))
    expect(screen.getByRole('link', { name: 'Members' }).getAttribute('href')).toBe('/orgs/beta/members')
    expect(screen.getByRole('link', { name: 'Repos' }).getAttribute('href')).toBe('/orgs/beta')
    expect(screen.getByTestId('username').getAttribute('href')).toBe('/account')
  })

  it('does not remember a team the user is not in, nor show a forgotten one', async () => {
    localStorage.setItem(TEAM_KEY, 'left-long-ago')
    const first = show('/stranger/public-repo')
    await switcher()
    await waitFor(() => expect(screen.getByRole('link', { name: 'Repos' })).toBeTruthy())
    expect(localStorage.getItem(TEAM_KEY)).toBe('left-long-ago')
    first.unmount()

    show('/account')
    const select = await switcher()
    expect(select.value).toBe('')
    expect(screen.queryByRole('link', { name: 'Members' })).toBeNull()
  })
})
