import { fireEvent, screen, waitFor } from '@testing-library/react'
import { renderCode } from './renderCode.test-util'

const repo = { id: 1, org: 'ml', name: 'trainer', full_name: 'ml/trainer', description: '', visibility: 'private', default_branch: 'main',
  archived: false, secret: false, clone_url: 'http://nimbus.test/ml/trainer.git', permission: 'write', created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' }
const commit = { sha: 'f'.repeat(40), title: 'tune', message: 'tune', author_name: 'A', author_email: 'a@x', authored_at: '2026-01-01T00:00:00Z',
  committer_name: 'A', committer_email: 'a@x', committed_at: '2026-01-01T00:00:00Z', checks: '' }

let posted: string[] = []
function show() {
  posted = []
  const answers: Record<string, unknown> = {
    '/api/v1/repos/ml/trainer': repo,
    '/api/v1/repos/ml/trainer/branches': { items: [{ name: 'main', default: true, commit }, { name: 'tune', default: false, commit }] },
    '/api/v1/repos/ml/trainer/tags': { items: [{ name: 'v1.0.0', default: false, commit }] },
    '/api/v1/repos/ml/trainer/deploy-environments?tag=v1.0.0': { tag: 'v1.0.0', environments: [
      { name: 'staging', description: 'the staging cluster', require: [], allowed: true, last: null },
      { name: 'production', description: 'live', require: [], allowed: false, why: 'deploy staging first', last: null }] },
  }
  vi.stubGlobal('fetch', vi.fn(async (url: string, init?: RequestInit) => {
    if (init?.method === 'POST') {
      posted.push(url)
      return new Response(JSON.stringify({ build: null, tag: 'v1.0.1', commit: commit.sha, tag_push: [] }), { status: 201 })
    }
    return url in answers ? new Response(JSON.stringify(answers[url]), { status: 200 }) : new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
  }))
  return renderCode('/ml/trainer/-/branches')
}

afterEach(() => vi.unstubAllGlobals())

describe('Branches and tags', () => {
  it('offers a pull request from each branch but the default, auto-tags, and lists a tag’s deploy environments', async () => {
    const { container } = show()
    await screen.findByRole('table', { name: 'Branches' })
    expect(container.querySelector('tr[data-ref="tune"] a[href="/ml/trainer/-/pulls?new=tune"]')).toBeTruthy()
    expect(container.querySelector('tr[data-ref="main"]')!.textContent).not.toContain('Open a pull request')
    fireEvent.click(screen.getByRole('button', { name: 'Auto-generate a tag' }))
    await screen.findByText('Tagged v1.0.1.')
    expect(posted).toEqual(['/api/v1/repos/ml/trainer/auto-tag'])
    fireEvent.click(await screen.findByRole('button', { name: 'Deploy…' }))
    const staging = await screen.findByRole('button', { name: 'Deploy to staging' })
    expect((staging as HTMLButtonElement).disabled).toBe(false)
    expect((screen.getByRole('button', { name: 'Deploy to production' }) as HTMLButtonElement).disabled).toBe(true)
    expect(screen.getByText('(deploy staging first)')).toBeTruthy()
    await waitFor(() => expect(container.querySelector('section[aria-label="Deploy v1.0.0"]')).toBeTruthy())
  })
})
