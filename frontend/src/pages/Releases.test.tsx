import { render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import Releases from './Releases'

const repo = { id: 1, org: 'ml', name: 'trainer', full_name: 'ml/trainer', description: '', visibility: 'private', default_branch: 'main',
  archived: false, clone_url: 'http://nimbus.test:8080/ml/trainer.git', permission: 'admin', created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' }
const hex = 'cd'.repeat(32)
const v1 = { tag: 'v1.0', title: 'Model v1.0', notes: 'Notes of v1.0', pre_release: false, latest: true, commit: '0123456789abcdef0123',
  build: { number: 4, pipeline_id: 9, commit: '0123456789abcdef0123' }, created_at: '2026-01-02T00:00:00Z', updated_at: '2026-01-02T00:00:00Z' }
const file = { package: '_releases', version: 'v1.0', name: 'model.bin', size: 1 << 20, digest: `sha256:${hex}`, created_at: v1.created_at,
  download_url: 'http://nimbus.test:8080/api/v1/repos/ml/trainer/releases/v1.0/files/model.bin' }
const answers: Record<string, unknown> = {
  '/api/v1/repos/ml/trainer': repo,
  '/api/v1/repos/ml/trainer/releases?limit=100': { items: [v1, { ...v1, tag: 'v0.9', title: 'old', latest: false, pre_release: true, build: null }] },
  '/api/v1/repos/ml/trainer/releases/v1.0': { ...v1, files: [file] },
}

function show(path: string) {
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string) => (url in answers ? new Response(JSON.stringify(answers[url]), { status: 200 }) : new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 }))),
  )
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path="/:org/:repo/releases" element={<Releases />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

afterEach(() => vi.unstubAllGlobals())

describe('Releases', () => {
  it('lists releases with the build and commit that made each', async () => {
    const { container } = show('/ml/trainer/releases')
    await waitFor(() => expect(container.querySelector('[data-release="v1.0"]')).toBeTruthy())
    const row = container.querySelector('[data-release="v1.0"]')!
    expect(row.querySelector('a[href="/ml/trainer/builds/4"]')?.textContent).toBe('build #4')
    expect(row.textContent).toContain('01234567')
    expect(row.textContent).toContain('latest')
    expect(container.querySelector('[data-release="v0.9"]')!.textContent).toContain('a person')
  })

  it('shows a release with its notes, files and download commands', async () => {
    const { container } = show('/ml/trainer/releases?tag=v1.0')
    await waitFor(() => expect(container.querySelector('[data-file="model.bin"]')).toBeTruthy())
    expect(screen.getByText('Notes of v1.0')).toBeTruthy()
    expect(screen.getByTestId('made-by').querySelector('a')?.getAttribute('href')).toBe('/ml/trainer/builds/4')
    const values = [...container.querySelectorAll('input')].map((i) => i.value)
    expect(values).toContain(`curl -fL -C - -H "Authorization: Bearer $NIMBUS_DEPLOY_TOKEN" -o model.bin ${file.download_url}`)
    expect(values).toContain(`echo "${hex}  model.bin" | sha256sum -c -`)
    await waitFor(() => expect(screen.getByRole('button', { name: 'Delete release' })).toBeTruthy())
  })
})
