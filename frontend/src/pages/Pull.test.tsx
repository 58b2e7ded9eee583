import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import Pull from './Pull'
import { parsePatch } from '../components/DiffView'

const repo = { id: 1, org: 'ml', name: 'trainer', full_name: 'ml/trainer', description: '', visibility: 'private', default_branch: 'main',
  archived: false, secret: false, clone_url: 'http://nimbus.test/ml/trainer.git', permission: 'write', created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' }
const head = 'a'.repeat(40)
const pr = { number: 3, title: 'Lower the learning rate', body: '**Why**: loss plateaus', state: 'open', source_branch: 'tune', target_branch: 'main',
  author: 'bob', head_sha: head, base_sha: 'b'.repeat(40), merge_base: 'c'.repeat(40), merge_sha: 'd'.repeat(40), mergeable: true, conflicts: [],
  merged_by: null, merged_at: null, merge_commit: '', merge_mode: '', closed_at: null, created_at: '2026-01-02T00:00:00Z', updated_at: '2026-01-02T00:00:00Z',
  url: 'http://nimbus.test/ml/trainer/-/pulls/3', approved_by: [], changes_requested_by: [], requested_reviewers: ['carol'], checks: 'pending',
  source_repo: 'bobs/trainer', source_deleted: false, run_held: true, run_approved_by: null,
  gate: { passed: false, rule: 'main', checks: [{ name: 'eval', status: 'running', build: 7 }],
    unmet: [{ code: 'approvals', rule: 'main', message: '0 of 1 approvals' }, { code: 'checks_pending', rule: 'main', message: 'eval is running' }] } }
const files = { items: [{ path: 'train.py', old_path: '', status: 'modified', additions: 1, deletions: 1, binary: false, truncated: false,
  patch: '@@ -1,2 +1,2 @@\n-lr = 0.1\n+lr = 0.01\n epochs = 3\n' }] }
const build = { number: 7, pipelines: [{ name: 'eval', started_at: '2026-01-02T00:00:00Z', finished_at: '2026-01-02T00:01:30Z', cost: '0.0125' }] }

let posted: { url: string; body: unknown }[] = []
function show() {
  posted = []
  const answers: Record<string, unknown> = {
    '/api/v1/repos/ml/trainer': repo,
    '/api/v1/repos/ml/trainer/pulls/3': pr,
    '/api/v1/repos/ml/trainer/pulls/3/files': files,
    '/api/v1/repos/ml/trainer/pulls/3/comments?limit=100': { items: [] },
    '/api/v1/repos/ml/trainer/pulls/3/reviews?limit=100': { items: [] },
    '/api/v1/repos/ml/trainer/builds/7': build,
    '/api/v1/repos/ml/trainer/pulls/3/metrics': { items: [
      { name: 'accuracy', head: { value: 0.91, build: 7, pipeline_id: 70, commit: head }, base: { value: 0.88, build: 5, pipeline_id: 50, commit: head },
        delta: 0.03, better: 'higher', declared: false, verdict: 'better' },
      { name: 'loss', head: { value: 0.35, build: 7, pipeline_id: 70, commit: head }, base: { value: 0.3, build: 5, pipeline_id: 50, commit: head },
        delta: 0.05, better: 'lower', declared: true, verdict: 'worse' },
      { name: 'new_metric', head: { value: 1, build: 7, pipeline_id: 70, commit: head }, base: null, delta: null, better: 'higher', declared: false, verdict: '' },
    ] },
  }
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      if (init?.method === 'POST') {
        posted.push({ url, body: JSON.parse(String(init.body ?? 'null')) })
        return new Response(JSON.stringify({ ...pr, run_held: false }), { status: 200 })
      }
      return url in answers ? new Response(JSON.stringify(answers[url]), { status: 200 }) : new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
    }),
  )
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={['/ml/trainer/-/pulls/3']}>
        <Routes>
          <Route path="/:org/:repo/-/pulls/:number" element={<Pull />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

afterEach(() => vi.unstubAllGlobals())

describe('Pull', () => {
  it('names every unmet rule, shows the checks with their cost, and approves a fork to run', async () => {
    show()
    await screen.findByText('Lower the learning rate')
    expect(screen.getByText('This request cannot merge yet')).toBeTruthy()
    expect(screen.getByText(/0 of 1 approvals/)).toBeTruthy()
    expect(screen.getByText(/eval is running/)).toBeTruthy()
    expect(screen.getByText('loss plateaus', { exact: false })).toBeTruthy()
    await screen.findByText('0.0125', { exact: false })
    fireEvent.click(screen.getByRole('button', { name: 'Approve and run' }))
    await waitFor(() => expect(posted.map((p) => p.url)).toContain('/api/v1/repos/ml/trainer/pulls/3/approve-run'))
  })

  it('shows the files changed and posts a comment on a line', async () => {
    const { container } = show()
    await screen.findByText('Lower the learning rate')
    fireEvent.click(screen.getByRole('button', { name: 'Files changed' }))
    await screen.findByRole('button', { name: 'Comment on line 1' })
    expect(container.querySelector('tr.add')?.textContent).toContain('lr = 0.01')
    expect(container.querySelector('tr.del')?.textContent).toContain('lr = 0.1')
    fireEvent.click(screen.getByRole('button', { name: 'Comment on line 1' }))
    const form = await screen.findByRole('form', { name: 'Comment on line 1' })
    fireEvent.change(form.querySelector('textarea')!, { target: { value: 'why 0.01?' } })
    fireEvent.submit(form)
    await waitFor(() => expect(posted).toContainEqual({ url: '/api/v1/repos/ml/trainer/pulls/3/comments', body: { body: 'why 0.01?', path: 'train.py', line: 1 } }))
  })
})

describe('Pull metrics', () => {
  it('shows each metric against the target, coloured by its verdict, with the runs to diff', async () => {
    const { container } = show()
    await screen.findByRole('table', { name: 'Metrics' })
    const row = (m: string) => container.querySelector(`tr[data-metric="${m}"]`)!
    expect(row('accuracy').textContent).toContain('+0.03 (better)')
    expect(row('accuracy').querySelector('.verdict-better')).toBeTruthy()
    expect(row('loss').textContent).toContain('+0.05 (worse)')
    expect(row('loss').querySelector('.verdict-worse')).toBeTruthy()
    expect(row('new_metric').textContent).toContain('new')
    expect(row('loss').querySelector('a[href="/ml/trainer/builds/7?pipeline=70&compare=50"]')).toBeTruthy()
  })
})

describe('parsePatch', () => {
  it('numbers the old and new lines of each hunk', () => {
    const lines = parsePatch('@@ -10,3 +10,3 @@ def f():\n a\n-b\n+B\n c\n')
    expect(lines.map((l) => [l.kind, l.oldNo, l.newNo])).toEqual([
      ['hunk', undefined, undefined],
      ['ctx', 10, 10],
      ['del', 11, undefined],
      ['add', undefined, 11],
      ['ctx', 12, 12],
    ])
  })
})
