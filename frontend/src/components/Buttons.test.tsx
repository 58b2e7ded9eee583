import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { Buttons } from './Buttons'

const list = {
  branch: 'main',
  buttons: [
    {
      name: 'Deploy', description: 'Deploy it', event: 'web_trigger_deploy', open_workspace: false, allowed: true,
      inputs: [
        { key: 'REGION', name: 'Region', description: '', type: 'select', required: true, default: 'eu', multiple: false,
          options: [{ name: 'Europe', value: 'eu', description: '' }, { name: 'Asia', value: 'ap', description: '' }] },
        { key: 'DRY_RUN', name: '', description: '', type: 'switch', required: false, default: 'true', multiple: false, options: [] },
        { key: 'NOTE', name: 'Note', description: '', type: 'input', required: false, default: '', multiple: false, options: [] },
      ],
    },
    { name: 'Secret', description: '', event: 'web_trigger_x', open_workspace: false, allowed: false, why: 'no', inputs: [] },
  ],
}

describe('Buttons', () => {
  afterEach(() => vi.unstubAllGlobals())

  it('shows the buttons the caller may press and fires one with its inputs', async () => {
    const calls: { url: string; body?: string }[] = []
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        calls.push({ url, body: init?.body as string | undefined })
        if (url.startsWith('/api/v1/repos/ml/trainer/buttons?')) return new Response(JSON.stringify(list), { status: 200 })
        if (url === '/api/v1/repos/ml/trainer/buttons/press') return new Response(JSON.stringify({ number: 7, pipelines: [] }), { status: 201 })
        return new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
      }),
    )
    const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
    const { container } = render(
      <QueryClientProvider client={qc}>
        <MemoryRouter initialEntries={['/ml/trainer']}>
          <Routes>
            <Route path="/:org/:repo" element={<Buttons org="ml" repo="trainer" branch="main" />} />
            <Route path="/:org/:repo/builds/:n" element={<p>build page</p>} />
          </Routes>
        </MemoryRouter>
      </QueryClientProvider>,
    )
    await waitFor(() => expect(container.querySelector('[data-button="Deploy"]')).toBeTruthy())
    expect(container.querySelector('[data-button="Secret"]')).toBeNull()
    fireEvent.click(container.querySelector('[data-button="Deploy"]')!)
    fireEvent.change(container.querySelector('select[name=REGION]')!, { target: { value: 'ap' } })
    fireEvent.click(container.querySelector('input[name=DRY_RUN]')!)
    fireEvent.change(container.querySelector('input[name=NOTE]')!, { target: { value: 'hi' } })
    fireEvent.click(screen.getByTestId('press'))
    await waitFor(() => expect(screen.getByText('build page')).toBeTruthy())
    const press = calls.find((c) => c.url.endsWith('/buttons/press'))!
    expect(JSON.parse(press.body!)).toEqual({ branch: 'main', button: 'Deploy', inputs: { REGION: 'ap', DRY_RUN: 'false', NOTE: 'hi' } })
  })
})
