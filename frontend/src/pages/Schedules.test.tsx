import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { Schedules } from './Repo'

const nightly = { id: 3, branch: 'dev/exp', event: 'schedule', cron: '0 2 * * *', last_fired_at: null, next_run_at: '2026-12-08T02:00:00+08:00',
  zone: 'Asia/Shanghai', last_build: 12, run_as: 'alice' }
const orphan = { ...nightly, id: 4, branch: 'main', event: 'crontab: 0 3 * * *', cron: '0 3 * * *', last_build: null, run_as: '' }

function show(admin: boolean) {
  const posted: string[] = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      if (init?.method === 'POST') {
        posted.push(url)
        return new Response(JSON.stringify({ number: 13, pipelines: [] }), { status: 201 })
      }
      if (url.startsWith('/api/v1/repos/ml/trainer/schedules')) return new Response(JSON.stringify({ items: [nightly, orphan] }), { status: 200 })
      return new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
    }),
  )
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  const view = render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={['/ml/trainer']}>
        <Routes>
          <Route path="/:org/:repo" element={<Schedules org="ml" repo="trainer" admin={admin} />} />
          <Route path="/:org/:repo/builds/:n" element={<p>build page</p>} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
  return { ...view, posted }
}

afterEach(() => vi.unstubAllGlobals())

describe('Schedules', () => {
  it('lists each schedule with its next run in the billing zone, last build and who it runs as', async () => {
    const { container } = show(false)
    await waitFor(() => expect(container.querySelector('[data-schedule="3"]')).toBeTruthy())
    const row = container.querySelector('[data-schedule="3"]')!
    expect(row.textContent).toContain('dev/exp')
    expect(row.textContent).toMatch(/Dec 8, 2026, 2:00\s?AM GMT\+8/)
    expect(row.querySelector('a[href="/ml/trainer/builds/12"]')?.textContent).toBe('#12')
    expect(row.textContent).toContain('alice')
    const other = container.querySelector('[data-schedule="4"]')!
    expect(other.textContent).toContain('none yet')
    expect(other.textContent).toContain('nobody')
    expect(screen.queryByTestId('run-schedule')).toBeNull()
  })

  it('lets an admin run one now and opens its build', async () => {
    const { container, posted } = show(true)
    await waitFor(() => expect(container.querySelector('[data-schedule="3"] [data-testid="run-schedule"]')).toBeTruthy())
    fireEvent.click(container.querySelector('[data-schedule="3"] [data-testid="run-schedule"]')!)
    await waitFor(() => expect(screen.getByText('build page')).toBeTruthy())
    expect(posted).toEqual(['/api/v1/repos/ml/trainer/schedules/3/run'])
  })
})
