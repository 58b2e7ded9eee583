import { useState, type FormEvent } from 'react'
import { Link, useNavigate, useParams, useSearchParams } from 'react-router'
import { useMutation, useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { keys } from '../lib/keys'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { Empty, Field, FormError, QueryView } from '../components/ui'
import { ago } from '../lib/format'
import { CheckState } from './Code'

type State = 'open' | 'closed' | 'merged' | 'all'
const states: State[] = ['open', 'merged', 'closed', 'all']

// The repo's pull requests: filtered by state (the URL's ?state=, open by default), author and
// reviewer, each with its check state; and the form that opens one from a branch (?new=<branch>
// fills it, as the branch page's "Open a pull request" link does).
export default function Pulls() {
  const { org = '', repo = '' } = useParams()
  const [params, setParams] = useSearchParams()
  const state = (states.includes(params.get('state') as State) ? params.get('state') : 'open') as State
  const author = params.get('author') ?? ''
  const reviewer = params.get('reviewer') ?? ''
  const q = useQuery({ queryKey: keys.pulls.list(org, repo, state), queryFn: () => endpoints.pulls.list(org, repo, state) })
  const set = (k: string, v: string) => {
    const next = new URLSearchParams(params)
    if (v) next.set(k, v)
    else next.delete(k)
    setParams(next)
  }
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <h1>Pull requests</h1>
      <NewPull org={org} repo={repo} from={params.get('new') ?? ''} />
      <div className="filters">
        {states.map((s) => (
          <button key={s} type="button" aria-pressed={s === state} onClick={() => set('state', s)}>
            {s}
          </button>
        ))}{' '}
        <label>
          Author <input value={author} onChange={(e) => set('author', e.target.value)} size={12} />
        </label>{' '}
        <label>
          Reviewer <input value={reviewer} onChange={(e) => set('reviewer', e.target.value)} size={12} />
        </label>
      </div>
      <QueryView q={q} what="Loading the pull requests">
        {(page) => {
          const items = page.items.filter(
            (p) => (!author || p.author === author) && (!reviewer || p.requested_reviewers.includes(reviewer) || p.approved_by.includes(reviewer)),
          )
          return items.length === 0 ? (
            <Empty>
              <h3>No {state === 'all' ? '' : state} pull requests</h3>
              <p>Push a branch, then open one from it above.</p>
            </Empty>
          ) : (
            <div className="tablewrap">
              <table aria-label="Pull requests">
                <tbody>
                  {items.map((p) => (
                    <tr key={p.number}>
                      <td>
                        <Link to={`${repoPath(org, repo)}/-/pulls/${p.number}`}>{p.title}</Link> <span className="tag">{p.state}</span>
                        {p.run_held && <span className="tag">waiting for approval to run</span>}
                        <div className="muted">
                          #{p.number} by {p.author}, {ago(p.created_at)} · {p.source_repo ? `${p.source_repo}:` : p.source_deleted ? 'deleted fork:' : ''}
                          {p.source_branch} → {p.target_branch}
                        </div>
                      </td>
                      <td>
                        <CheckState state={p.checks} />
                      </td>
                      <td className="muted">{p.approved_by.length > 0 && `approved by ${p.approved_by.join(', ')}`}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }}
      </QueryView>
    </section>
  )
}

function NewPull({ org, repo, from }: { org: string; repo: string; from: string }) {
  const branches = useQuery({ queryKey: keys.code.branches(org, repo), queryFn: () => endpoints.code.branches(org, repo) })
  const [source, setSource] = useState(from)
  const [target, setTarget] = useState('')
  const [title, setTitle] = useState('')
  const [body, setBody] = useState('')
  const nav = useNavigate()
  const open = useMutation({
    mutationFn: () => endpoints.pulls.open(org, repo, { source_branch: source, target_branch: target || undefined, title, body }),
    onSuccess: (pr) => nav(`${repoPath(org, repo)}/-/pulls/${pr.number}`),
  })
  const names = branches.data?.items.map((b) => b.name) ?? []
  const submit = (e: FormEvent) => {
    e.preventDefault()
    open.mutate()
  }
  return (
    <details open={!!from} className="newpull">
      <summary>Open a pull request</summary>
      <form onSubmit={submit} aria-label="Open a pull request">
        <Field label="From branch">
          {(id) => (
            <select id={id} value={source} onChange={(e) => setSource(e.target.value)} required>
              <option value="">choose…</option>
              {names.map((n) => (
                <option key={n}>{n}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Into branch" hint="the default branch when left empty">
          {(id) => (
            <select id={id} value={target} onChange={(e) => setTarget(e.target.value)}>
              <option value="">default</option>
              {names.map((n) => (
                <option key={n}>{n}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Title">{(id) => <input id={id} value={title} onChange={(e) => setTitle(e.target.value)} required maxLength={256} />}</Field>
        <Field label="Description" hint="Markdown">
          {(id) => <textarea id={id} value={body} onChange={(e) => setBody(e.target.value)} rows={5} />}
        </Field>
        <FormError error={open.error} />
        <button type="submit" disabled={open.isPending}>
          Open pull request
        </button>
      </form>
    </details>
  )
}
