import { act, fireEvent, render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes, useLocation } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import Workspace from './Workspace'
import Repo from './Repo'
import { MockWebSocket } from '../lib/wsmock'
import type { Workspace as WorkspaceT } from '../lib/workspaces'

// The real xterm needs a browser; see components/Terminal.test.tsx for the terminal itself.
vi.mock('@xterm/xterm', () => ({
  Terminal: class {
    cols = 80
    rows = 24
    open(el: HTMLElement) {
      el.innerHTML = '<div class="xterm-rows"></div>'
    }
    loadAddon() {}
    write() {}
    reset() {}
    focus() {}
    dispose() {}
    onData = () => ({ dispose() {} })
    onBinary = () => ({ dispose() {} })
    onResize = () => ({ dispose() {} })
  },
}))
vi.mock('@xterm/addon-fit', () => ({ FitAddon: class { activate() {} fit() {} dispose() {} } }))

const repo = { id: 1, org: 'ml', name: 'trainer', full_name: 'ml/trainer', description: '', visibility: 'private', default_branch: 'main',
  archived: false, clone_url: 'http://nimbus.test:8080/ml/trainer.git', permission: 'write', created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' }
const ws: WorkspaceT = {
  id: 42, org: 'ml', repo: 'trainer', branch: 'main', build_number: 7, pipeline_name: 'vscode', status: 'running', state: 'starting', reason: '',
  runner_tag: 'cnb:arch:amd64', cpus: 2, gpus: 0, created_at: '2026-01-01T00:00:00Z', started_at: null, ready_at: null, finished_at: null,
  core_seconds: 0, cost: '0.0000', connections: null, idle_timeout_ms: null, idle_deadline: null, lifetime_deadline: null, ide: null,
  preview_url_template: '', saved_work: null,
}

let current: WorkspaceT = ws
let posts: { url: string; body?: string }[] = []
function Where() {
  const loc = useLocation()
  return <p data-testid="where">{loc.pathname}</p>
}
function show(path: string) {
  posts = []
  vi.stubGlobal('WebSocket', MockWebSocket)
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit) => {
      if (init.method === 'POST') posts.push({ url, body: init.body as string | undefined })
      const answers: Record<string, unknown> = {
        '/api/v1/repos/ml/trainer': repo,
        '/api/v1/workspaces/42': current,
        '/api/v1/repos/ml/trainer/builds?limit=50': { items: [] },
      }
      if (init.method === 'POST' && url === '/api/v1/repos/ml/trainer/workspaces')
        return new Response(JSON.stringify({ number: 8, pipelines: [{ id: 41, workspace: false }, { id: 43, workspace: true }] }), { status: 201 })
      return url in answers ? new Response(JSON.stringify(answers[url]), { status: 200 }) : new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
    }),
  )
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path="/:org/:repo" element={<Repo />} />
          <Route path="/:org/:repo/workspaces/:id" element={<Workspace />} />
        </Routes>
        <Where />
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

beforeEach(() => {
  MockWebSocket.reset()
  ;(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = false
})
afterEach(() => vi.unstubAllGlobals())

describe('Workspace page', () => {
  it('links the build while the workspace starts, and has no terminal yet', async () => {
    current = ws
    const { container } = show('/ml/trainer/workspaces/42')
    await waitFor(() => expect(container.querySelector('[data-workspace-state="starting"]')).toBeTruthy())
    expect(screen.getByTestId('terminal-waiting')).toBeTruthy()
    expect(container.querySelectorAll('a[href="/ml/trainer/builds/7"]').length).toBeGreaterThan(0)
    expect(MockWebSocket.instances).toHaveLength(0)
  })

  it('loads the terminal once ready, on the terminal WebSocket', async () => {
    current = { ...ws, state: 'ready', ready_at: '2026-01-01T00:01:00Z', connections: 0, ide: { kind: 'none', reason: 'no IDE in the image', url: '' } }
    show('/ml/trainer/workspaces/42')
    const host = await screen.findByTestId('terminal')
    expect(host.querySelector('.xterm-rows')).toBeTruthy()
    expect(MockWebSocket.instances).toHaveLength(1)
    expect(MockWebSocket.last().url).toBe(`ws://${location.host}/api/v1/workspaces/42/terminal?cols=80&rows=24`)
    expect(MockWebSocket.last().protocols).toBe('nimbus-terminal.v1')
    expect(screen.getByTestId('ide-none').textContent).toContain('no IDE in the image')
    act(() => MockWebSocket.last().serverOpen())
    await waitFor(() => expect(host.dataset.state).toBe('open'))
  })
})

describe('Open workspace', () => {
  it('opens the workspace on the default branch and goes to its page', async () => {
    current = { ...ws, id: 43 }
    show('/ml/trainer')
    const button = await screen.findByTestId('open-workspace')
    fireEvent.click(button)
    await waitFor(() => expect(screen.getByTestId('where').textContent).toBe('/ml/trainer/workspaces/43'))
    expect(posts).toEqual([{ url: '/api/v1/repos/ml/trainer/workspaces', body: '{"branch":"main"}' }])
  })
})
