import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import Workspaces from './Workspaces'
import type { Workspace } from '../lib/workspaces'

const base: Workspace = {
  id: 42, org: 'ml', repo: 'trainer', branch: 'main', build_number: 7, pipeline_name: 'vscode', status: 'running', state: 'ready', reason: '',
  runner_tag: 'cnb:arch:amd64:gpu', cpus: 16, gpus: 1, created_at: '2026-01-01T00:00:00Z', started_at: '2026-01-01T00:00:05Z',
  ready_at: '2026-01-01T00:01:00Z', finished_at: null, core_seconds: 960, cost: '0.1333', connections: 1, idle_timeout_ms: 600000,
  idle_deadline: null, lifetime_deadline: null, ide: { kind: 'code-server', reason: '', url: '/api/v1/workspaces/42/preview/8686' },
  preview_url_template: 'http://{{port}}-42.preview.localhost:8080/', saved_work: [],
}

function fixture(): Workspace[] {
  const now = Date.now()
  return [
    { ...base, lifetime_deadline: new Date(now + 3 * 3600_000 + 120_000).toISOString() },
    {
      ...base, id: 43, branch: 'dev', gpus: 0, cpus: 4, runner_tag: 'cnb:arch:amd64', cost: '0.0100', connections: 0,
      idle_deadline: new Date(now + 125_000).toISOString(), ide: { kind: 'none', reason: 'the image has no code-server', url: '' },
      saved_work: [
        { ref: 'refs/nimbus/workspaces/dev/41', pipeline_id: 41, saved_at: '2026-01-01T00:00:00Z' },
        { ref: 'refs/nimbus/workspaces/dev/40', pipeline_id: 40, saved_at: '2025-12-31T00:00:00Z' },
      ],
    },
    { ...base, id: 44, state: 'starting', status: 'running', ready_at: null, connections: null, ide: null },
  ]
}

const ended: Workspace = { ...base, id: 40, state: 'stopped', status: 'success', reason: 'stopped: idle; work saved to refs/nimbus/workspaces/main/40', finished_at: '2026-01-01T02:00:00Z', connections: null, ide: null }

let calls: { method: string; url: string; body?: string; csrf?: string }[] = []
function show(path = '/orgs/ml/workspaces', list = fixture()) {
  calls = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit) => {
      calls.push({ method: init.method!, url, body: init.body as string | undefined, csrf: (init.headers as Record<string, string>)['X-CSRF-Token'] })
      if (url === '/api/v1/orgs/ml/workspaces') return new Response(JSON.stringify({ items: list }), { status: 200 })
      if (url === '/api/v1/orgs/ml/workspaces?all=true') return new Response(JSON.stringify({ items: [...list, ended] }), { status: 200 })
      if (url.endsWith('/keepalive')) return new Response('{}', { status: 200 })
      if (url.endsWith('/stop')) return new Response('{}', { status: 202 })
      if (url.endsWith('/restore')) return new Response(JSON.stringify({ ref: JSON.parse(init.body as string).ref, files: ['notes.txt', 'src/train.py'] }), { status: 200 })
      return new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
    }),
  )
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path="/orgs/:org/workspaces" element={<Workspaces />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

// The countdowns tick on their own each second; those renders are not the test's doing.
beforeEach(() => {
  ;(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = false
})
afterEach(() => {
  vi.unstubAllGlobals()
  vi.useRealTimers()
})

const card = (container: HTMLElement, id: number) => container.querySelector(`[data-workspace="${id}"]`) as HTMLElement

describe('Workspaces', () => {
  it('shows each workspace with its state, runner, GPUs, cost, idle countdown and lifetime', async () => {
    const { container } = show()
    await waitFor(() => expect(card(container, 42)).toBeTruthy())
    const a = card(container, 42)
    expect(a.querySelector('[data-workspace-state]')!.textContent).toBe('ready')
    expect(a.textContent).toContain('cnb:arch:amd64:gpu')
    expect(a.textContent).toContain('16 cores')
    expect(within(a).getByTestId('gpus').textContent).toBe('1 GPU')
    expect(within(a).getByTestId('cost').textContent).toBe('0.1333')
    expect(within(a).getByTestId('idle').textContent).toBe('connected')
    expect(within(a).getByTestId('lifetime').textContent).toMatch(/\(in 3h 0[12]m\)$/)
    expect(a.querySelector('a[href="/ml/trainer/workspaces/42"]')).toBeTruthy()
    expect(a.querySelector('a[href="/ml/trainer/builds/7"]')!.textContent).toBe('build #7')

    const b = card(container, 43)
    expect(within(b).getByTestId('gpus').textContent).toBe('no GPU')
    expect(within(b).getByTestId('idle').dataset.idle).toBe('countdown')
    expect(within(b).getByTestId('idle').textContent).toMatch(/^stops in 2m 0[0-5]s if idle$/)

    const c = card(container, 44)
    expect(c.querySelector('[data-workspace-state]')!.textContent).toBe('starting')
    expect(within(c).getByTestId('idle').textContent).toBe('—')
  })

  it('ticks the idle countdown every second between polls', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true })
    const { container } = show()
    await waitFor(() => expect(card(container, 43)).toBeTruthy())
    const idle = () => within(card(container, 43)).getByTestId('idle').textContent
    const before = idle()
    vi.advanceTimersByTime(3000)
    await waitFor(() => expect(idle()).not.toBe(before))
    expect(idle()).toMatch(/^stops in (1m 5\d|2m 0[0-2])s if idle$/)
  })

  it('offers the actions the state allows', async () => {
    const { container } = show()
    await waitFor(() => expect(card(container, 42)).toBeTruthy())
    const a = card(container, 42)
    expect(within(a).getByTestId('open-ide').getAttribute('href')).toBe('/api/v1/workspaces/42/preview/8686')
    expect(within(a).getByText('Terminal').getAttribute('href')).toBe('/ml/trainer/workspaces/42#terminal')
    expect(within(a).getByText('Keep alive')).toBeTruthy()
    expect(within(a).getByText('Stop')).toBeTruthy()
    expect(within(a).queryByText('Restore')).toBeNull()

    const b = card(container, 43)
    expect(within(b).queryByTestId('open-ide')).toBeNull()
    expect(within(b).getByTestId('ide-none').textContent).toContain('the image has no code-server')
    expect(within(b).getByText('Restore')).toBeTruthy()

    const c = card(container, 44)
    expect(within(c).queryByText('Keep alive')).toBeNull()
    expect(within(c).queryByText('Terminal')).toBeNull()
    expect(within(c).getByText('Stop')).toBeTruthy()
  })

  it('keeps alive, stops after a confirmation and restores a saved work', async () => {
    const { container } = show()
    await waitFor(() => expect(card(container, 43)).toBeTruthy())
    const b = card(container, 43)
    fireEvent.click(within(b).getByText('Keep alive'))
    await waitFor(() => expect(calls.some((c) => c.method === 'POST' && c.url === '/api/v1/workspaces/43/keepalive')).toBe(true))

    vi.stubGlobal('confirm', vi.fn(() => false))
    fireEvent.click(within(b).getByText('Stop'))
    expect(calls.some((c) => c.url.endsWith('/stop'))).toBe(false)
    vi.stubGlobal('confirm', vi.fn(() => true))
    fireEvent.click(within(b).getByText('Stop'))
    await waitFor(() => expect(calls.some((c) => c.method === 'POST' && c.url === '/api/v1/workspaces/43/stop')).toBe(true))

    fireEvent.change(within(b).getByLabelText('Saved work to restore'), { target: { value: 'refs/nimbus/workspaces/dev/40' } })
    fireEvent.click(within(b).getByText('Restore'))
    await waitFor(() => expect(within(b).getByTestId('restored')).toBeTruthy())
    const r = calls.find((c) => c.url === '/api/v1/workspaces/43/restore')!
    expect([r.method, JSON.parse(r.body!)]).toEqual(['POST', { ref: 'refs/nimbus/workspaces/dev/40' }])
    expect(within(b).getByTestId('restored').textContent).toContain('refs/nimbus/workspaces/dev/40')
    expect(within(b).getByText('src/train.py')).toBeTruthy()
  })

  it('shows the ended workspaces with the toggle', async () => {
    const { container } = show()
    await waitFor(() => expect(card(container, 42)).toBeTruthy())
    expect(card(container, 40)).toBeNull()
    fireEvent.click(screen.getByLabelText('Show ended workspaces'))
    await waitFor(() => expect(card(container, 40)).toBeTruthy())
    expect(calls.some((c) => c.url === '/api/v1/orgs/ml/workspaces?all=true')).toBe(true)
    const e = card(container, 40)
    expect(e.querySelector('[data-workspace-state]')!.textContent).toBe('stopped')
    expect(within(e).getByTestId('reason').textContent).toContain('stopped: idle')
    expect(within(e).queryByText('Stop')).toBeNull()
    expect(within(e).queryByText('Keep alive')).toBeNull()
  })
})
