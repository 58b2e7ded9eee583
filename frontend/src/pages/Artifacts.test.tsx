import { render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import Artifacts from './Artifacts'

const repo = { id: 1, org: 'ml', name: 'trainer', full_name: 'ml/trainer', description: '', visibility: 'private', default_branch: 'main',
  archived: false, clone_url: 'http://nimbus.test:8080/ml/trainer.git', permission: 'read', created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' }
const hex = 'ab'.repeat(32)
const file = { package: 'bert', version: 'v1', name: 'model.bin', size: 8 << 20, digest: `sha256:${hex}`, created_at: '2026-01-02T00:00:00Z',
  download_url: 'http://nimbus.test:8080/api/v1/repos/ml/trainer/artifacts/bert/v1/model.bin' }
const v1 = { package: 'bert', version: 'v1', file_count: 1, size: 8 << 20, build: { number: 3, pipeline_id: 9, commit: '0123456789abcdef' },
  pushed_by: 'ada', created_at: '2026-01-02T00:00:00Z' }
const answers: Record<string, unknown> = {
  '/api/v1/repos/ml/trainer': repo,
  '/api/v1/orgs/ml/storage': { used_bytes: 8 << 20, registry_bytes: 0, file_bytes: 8 << 20, quota_bytes: 1 << 30 },
  '/api/v1/repos/ml/trainer/artifacts?limit=100': { items: [{ name: 'bert', version_count: 2, latest: 'v2', created_at: v1.created_at, updated_at: v1.created_at }] },
  '/api/v1/repos/ml/trainer/artifacts/bert?limit=100': { items: [{ ...v1, version: 'v2', build: null }, v1] },
  '/api/v1/repos/ml/trainer/artifacts/bert/v1': { ...v1, files: [file] },
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
          <Route path="/:org/:repo/artifacts" element={<Artifacts />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

afterEach(() => vi.unstubAllGlobals())

describe('Artifacts', () => {
  it('lists the packages and the team storage', async () => {
    const { container } = show('/ml/trainer/artifacts')
    await waitFor(() => expect(container.querySelector('[data-package="bert"]')).toBeTruthy())
    expect(screen.getByText('v2').getAttribute('href')).toBe('/ml/trainer/artifacts?package=bert&version=v2')
    await waitFor(() => expect(screen.getByTestId('storage').textContent).toContain('8.0 MiB of 1.0 GiB'))
  })

  it('shows versions with the build and commit that produced them', async () => {
    const { container } = show('/ml/trainer/artifacts?package=bert')
    await waitFor(() => expect(container.querySelector('[data-version="v1"]')).toBeTruthy())
    const row = container.querySelector('[data-version="v1"]')!
    expect(row.querySelector('a[href="/ml/trainer/builds/3"]')!.textContent).toBe('build #3')
    expect(row.textContent).toContain('01234567')
    expect(container.querySelector('[data-version="v2"]')!.textContent).toContain('ada')
  })

  it('shows the files with their digests and the commands that download them', async () => {
    const { container } = show('/ml/trainer/artifacts?package=bert&version=v1')
    await waitFor(() => expect(container.querySelector('[data-file="model.bin"]')).toBeTruthy())
    expect(container.querySelector('[data-file="model.bin"]')!.textContent).toContain('8.0 MiB')
    const values = [...container.querySelectorAll('input')].map((i) => i.value)
    expect(values).toContain(`curl -fL -C - -H "Authorization: Bearer $NIMBUS_DEPLOY_TOKEN" -o model.bin ${file.download_url}`)
    expect(values).toContain(`echo "${hex}  model.bin" | sha256sum -c -`)
    expect(values).toContain('NIMBUS_TOKEN=$NIMBUS_DEPLOY_TOKEN nimbus artifact pull --server http://nimbus.test:8080 ml/trainer bert v1')
    expect(values).toContain('oras pull --plain-http -u deploy -p "$NIMBUS_DEPLOY_TOKEN" nimbus.test:8080/ml/trainer/NAME:TAG')
    expect(values).toContain('docker pull nimbus.test:8080/ml/trainer/NAME:TAG')
  })
})
