import { screen } from '@testing-library/react'
import { renderCode } from './renderCode.test-util'

const repo = { id: 1, org: 'ml', name: 'trainer', full_name: 'ml/trainer', description: '', visibility: 'private', default_branch: 'main',
  archived: false, secret: false, clone_url: 'http://nimbus.test/ml/trainer.git', permission: 'read', created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' }
const sha = 'e'.repeat(40)
const commit = { sha, title: 'tune', message: 'tune', author_name: 'Alice', author_email: 'a@x', authored_at: '2026-01-01T00:00:00Z',
  committer_name: 'Alice', committer_email: 'a@x', committed_at: '2026-01-01T00:00:00Z', checks: 'success' }
const blob = (path: string, over: object) => ({ ref: '', commit: sha, path, sha, size: 20, mode: '100644', binary: false, too_large: false, lfs: null,
  content: null, raw_url: '', ...over })
const answers: Record<string, unknown> = {
  '/api/v1/repos/ml/trainer': repo,
  '/api/v1/repos/ml/trainer/branches': { items: [{ name: 'main', default: true, commit }] },
  '/api/v1/repos/ml/trainer/tree': { ref: 'main', commit: sha, path: '', readme: 'README.md', entries: [
    { name: 'src', path: 'src', type: 'tree', mode: '040000', sha, size: 0 },
    { name: 'README.md', path: 'README.md', type: 'blob', mode: '100644', sha, size: 20 },
    { name: 'train.py', path: 'train.py', type: 'blob', mode: '100644', sha, size: 20 }] },
  [`/api/v1/repos/ml/trainer/commits/${sha}`]: { ...commit, parents: [], files: [] },
  [`/api/v1/repos/ml/trainer/blob?ref=${sha}&path=README.md`]: blob('README.md', { content: '# Trainer\n\n<script>x()</script>' }),
  '/api/v1/repos/ml/trainer/blob?path=train.py': blob('train.py', { content: 'def f():\n    return 1\n' }),
  '/api/v1/repos/ml/trainer/blob?path=model.bin': blob('model.bin', { binary: true }),
}

function show(path: string) {
  vi.stubGlobal('fetch', vi.fn(async (url: string) =>
    url in answers ? new Response(JSON.stringify(answers[url]), { status: 200 }) : new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })))
  return renderCode(path)
}

afterEach(() => vi.unstubAllGlobals())

describe('Code', () => {
  it('lists a directory, folders first, with its README rendered and sanitised', async () => {
    const { container } = show('/ml/trainer/-/tree')
    await screen.findByRole('heading', { name: 'Trainer' })
    const names = [...container.querySelectorAll('table[aria-label="Files"] a')].map((a) => a.textContent)
    expect(names).toEqual(['src', 'README.md', 'train.py'])
    expect(container.querySelector('.readme script')).toBeNull()
    expect(await screen.findByText('checks success', { exact: false })).toBeTruthy()
  })

  it('shows a file highlighted with line numbers, and a binary file not at all', async () => {
    const { container, unmount } = show('/ml/trainer/-/blob?path=train.py')
    await screen.findByText('def', { exact: false })
    expect(container.querySelectorAll('table.code tr')).toHaveLength(2)
    expect(container.querySelector('table.code .hljs-keyword')?.textContent).toBe('def')
    unmount()
    show('/ml/trainer/-/blob?path=model.bin')
    expect(await screen.findByText('Binary file not shown', { exact: false })).toBeTruthy()
  })
})
