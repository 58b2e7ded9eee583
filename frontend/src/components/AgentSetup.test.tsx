import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { AgentSetup, agentCommands } from './AgentSetup'

function show() {
  const calls: string[] = []
  let tokens = [{ id: 4, name: 'gpu hosts', created_at: '2026-12-01T00:00:00Z', last_used_at: null }]
  let next = 5
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? 'GET'
      if (method !== 'GET') calls.push(`${method} ${url}`)
      if (url === '/api/v1/admin/registration-tokens' && method === 'POST') {
        const { name } = JSON.parse(String(init!.body))
        const t = { id: next++, name, created_at: '2026-12-07T00:00:00Z', last_used_at: null }
        tokens = [...tokens, t]
        return new Response(JSON.stringify({ ...t, token: `nbg_secret${t.id}` }), { status: 201 })
      }
      if (url.startsWith('/api/v1/admin/registration-tokens/') && method === 'DELETE') {
        tokens = tokens.filter((t) => `/api/v1/admin/registration-tokens/${t.id}` !== url)
        return new Response(null, { status: 204 })
      }
      if (url.startsWith('/api/v1/admin/registration-tokens')) return new Response(JSON.stringify({ items: tokens }), { status: 200 })
      return new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
    }),
  )
  vi.stubGlobal('confirm', () => true)
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  const view = render(
    <QueryClientProvider client={qc}>
      <AgentSetup />
    </QueryClientProvider>,
  )
  return { ...view, calls }
}

afterEach(() => vi.unstubAllGlobals())

describe('AgentSetup', () => {
  it('gives the exact start commands of a CPU, a GPU and a simulated-GPU host', () => {
    const cmds = agentCommands('http://nimbus.test', 'nbg_x')
    expect(cmds.map((c) => c.kind)).toEqual(['cpu', 'gpu', 'simulated-gpu'])
    expect(cmds[0].command).toBe('nimbus-agent --server http://nimbus.test --token nbg_x')
    expect(cmds[1].command).toContain('--gpus auto --cpus 16')
    // A second agent on the same host needs a work dir of its own, or it reuses the first's identity.
    expect(cmds[2].command).toContain('--gpus simulate:1:L40 --cpus 16 --name sim-gpu --work-dir ./nimbus-agent-sim-gpu')
  })

  it('fills the commands with a new token, shown once', async () => {
    const { container } = show()
    await waitFor(() => expect(container.querySelector('[data-token="4"]')).toBeTruthy())
    const cpu = () => (container.querySelector('[data-command="cpu"] input') as HTMLInputElement).value
    expect(cpu()).toContain('--token <registration token>')
    fireEvent.change(screen.getByLabelText('Token name'), { target: { value: 'lab' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create registration token' }))
    await waitFor(() => expect(cpu()).toContain('--token nbg_secret5'))
    expect((container.querySelector('[data-command="simulated-gpu"] input') as HTMLInputElement).value).toContain('--token nbg_secret5')
    expect(screen.getByText(/shown only once/)).toBeTruthy()
  })

  it('rotates a token: a new one of the same name first, then the old one deleted', async () => {
    const { container, calls } = show()
    await waitFor(() => expect(container.querySelector('[data-token="4"]')).toBeTruthy())
    fireEvent.click(screen.getByRole('button', { name: 'Rotate' }))
    await waitFor(() => expect(container.querySelector('[data-token="4"]')).toBeNull())
    expect(calls).toEqual(['POST /api/v1/admin/registration-tokens', 'DELETE /api/v1/admin/registration-tokens/4'])
    expect(container.querySelector('[data-token="5"]')!.textContent).toContain('gpu hosts')
    expect((container.querySelector('[data-command="gpu"] input') as HTMLInputElement).value).toContain('--token nbg_secret5')
  })
})
