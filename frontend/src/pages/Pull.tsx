import { useState, type FormEvent } from 'react'
import { Link, useParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { keys } from '../lib/keys'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { DiffFile } from '../components/DiffView'
import { FormError, Notice, QueryView, StatusBadge } from '../components/ui'
import { ago, duration, money, shortSha } from '../lib/format'
import { renderMarkdown } from '../lib/markdown'
import type { PullComment, PullRequest } from '../lib/types'
import { CheckState } from './Code'

// One pull request (/:org/:repo/-/pulls/:number, the URL CNB_PULL_REQUEST's pipelines link to):
// its description, the held banner of a fork's request with "Approve and run", the checks with
// their duration and cost, the merge box that names every unmet rule, the reviews, the
// conversation, the files changed with line comments, and the commits.
export default function Pull() {
  const { org = '', repo = '', number = '' } = useParams()
  // An open request changes as its checks run and people review: it refreshes every few seconds.
  const q = useQuery({
    queryKey: keys.pulls.one(org, repo, number),
    queryFn: () => endpoints.pulls.get(org, repo, number),
    refetchInterval: (query) => (query.state.data?.state === 'open' ? 3000 : false),
  })
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <QueryView q={q} what="Loading the pull request">
        {(pr) => <PullView org={org} repo={repo} pr={pr} />}
      </QueryView>
    </section>
  )
}

function PullView({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const [tab, setTab] = useState<'conversation' | 'files' | 'commits'>('conversation')
  return (
    <>
      <h1>
        {pr.title} <span className="muted">#{pr.number}</span>
      </h1>
      <p>
        <span className="tag">{pr.state}</span> <strong>{pr.author}</strong> wants to merge{' '}
        <code>
          {pr.source_repo ? `${pr.source_repo}:` : pr.source_deleted ? 'deleted fork:' : ''}
          {pr.source_branch}
        </code>{' '}
        into <code>{pr.target_branch}</code> · opened {ago(pr.created_at)} <CheckState state={pr.checks} />
      </p>
      {pr.run_held && <HeldBanner org={org} repo={repo} pr={pr} />}
      <nav aria-label="Pull request" className="tabs">
        {(['conversation', 'files', 'commits'] as const).map((t) => (
          <button key={t} type="button" aria-pressed={tab === t} onClick={() => setTab(t)}>
            {t === 'files' ? 'Files changed' : t[0].toUpperCase() + t.slice(1)}
          </button>
        ))}
      </nav>
      {tab === 'conversation' && <Conversation org={org} repo={repo} pr={pr} />}
      {tab === 'files' && <Files org={org} repo={repo} pr={pr} />}
      {tab === 'commits' && <Commits org={org} repo={repo} pr={pr} />}
    </>
  )
}

function useRefresh(org: string, repo: string, pr: PullRequest) {
  const qc = useQueryClient()
  return () => qc.invalidateQueries({ queryKey: keys.pulls.one(org, repo, pr.number) })
}

function HeldBanner({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const refresh = useRefresh(org, repo, pr)
  const approve = useMutation({ mutationFn: () => endpoints.pulls.approveRun(org, repo, pr.number), onSuccess: refresh })
  return (
    <Notice kind="warn">
      <p>
        This request comes from a fork by someone outside the team: its pipelines run on this team's money only after a maintainer has read
        its code ({shortSha(pr.head_sha)}) and approves it. They get no secrets and a read-only token.
      </p>
      <FormError error={approve.error} />
      <button type="button" onClick={() => approve.mutate()} disabled={approve.isPending}>
        Approve and run
      </button>
    </Notice>
  )
}

function Conversation({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  return (
    <>
      {pr.body ? (
        <article className="markdown" aria-label="Description" dangerouslySetInnerHTML={{ __html: renderMarkdown(pr.body) }} />
      ) : (
        <p className="muted">No description.</p>
      )}
      <Checks org={org} repo={repo} pr={pr} />
      <MetricDeltas org={org} repo={repo} pr={pr} />
      <Reviews org={org} repo={repo} pr={pr} />
      <Comments org={org} repo={repo} pr={pr} />
      {pr.state === 'open' && <MergeBox org={org} repo={repo} pr={pr} />}
      {pr.state === 'merged' && (
        <Notice kind="success">
          Merged by {pr.merged_by} {ago(pr.merged_at)} as <Link to={`${repoPath(org, repo)}/-/commit/${pr.merge_commit}`}>{shortSha(pr.merge_commit)}</Link> (
          {pr.merge_mode}).
        </Notice>
      )}
    </>
  )
}

/** The pipelines of the request's newest pull_request build on its head, with duration and cost. */
function Checks({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const checks = pr.gate?.checks ?? []
  const builds = [...new Set(checks.map((c) => c.build))]
  const q = useQuery({
    queryKey: keys.pulls.checkBuilds(org, repo, pr.number, builds.join(',')),
    queryFn: () => Promise.all(builds.map((n) => endpoints.repos.builds.get(org, repo, n))),
    enabled: builds.length > 0,
  })
  if (checks.length === 0) return null
  const pipeline = (build: number, name: string) => q.data?.find((b) => b.number === build)?.pipelines.find((p) => p.name === name)
  return (
    <div className="tablewrap">
      <table aria-label="Checks">
        <thead>
          <tr>
            <th scope="col">Check</th>
            <th scope="col">State</th>
            <th scope="col">Duration</th>
            <th scope="col">Cost</th>
          </tr>
        </thead>
        <tbody>
          {checks.map((c) => {
            const p = pipeline(c.build, c.name)
            const ms = p?.started_at ? (p.finished_at ? Date.parse(p.finished_at) : Date.now()) - Date.parse(p.started_at) : null
            return (
              <tr key={`${c.build}-${c.name}`}>
                <td>
                  <Link to={`${repoPath(org, repo)}/builds/${c.build}`}>
                    {c.name} <span className="muted">#{c.build}</span>
                  </Link>
                </td>
                <td>
                  <StatusBadge status={c.status} />
                </td>
                <td>{ms === null ? '—' : duration(ms)}</td>
                <td>{p ? money(p.cost) : '—'}</td>
              </tr>
            )
          })}
        </tbody>
      </table>
    </div>
  )
}

/** The model's effect: each metric the request reported against the target's latest successful
 * build, the delta coloured by whether it is better, and the provenance diff of the two runs. */
function MetricDeltas({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const q = useQuery({
    queryKey: keys.pulls.metrics(org, repo, pr.number),
    queryFn: () => endpoints.pulls.metrics(org, repo, pr.number),
    refetchInterval: pr.state === 'open' ? 3000 : false,
  })
  const items = q.data?.items ?? []
  if (items.length === 0) return null
  const fmt = (v: number) => (Math.abs(v) >= 1000 || v === 0 ? String(v) : v.toPrecision(4).replace(/\.?0+$/, ''))
  return (
    <div className="tablewrap">
      <table aria-label="Metrics" className="metricdeltas">
        <thead>
          <tr>
            <th scope="col">Metric</th>
            <th scope="col">{pr.target_branch}</th>
            <th scope="col">This request</th>
            <th scope="col">Change</th>
            <th scope="col">Provenance</th>
          </tr>
        </thead>
        <tbody>
          {items.map((m) => (
            <tr key={m.name} data-metric={m.name} data-verdict={m.verdict}>
              <td>
                {m.name} <span className="muted" title={m.declared ? 'declared by NIMBUS_METRICS_BETTER' : 'guessed from the name'}>({m.better} is better)</span>
              </td>
              <td>{m.base ? <Link to={`${repoPath(org, repo)}/builds/${m.base.build}`}>{fmt(m.base.value)}</Link> : '—'}</td>
              <td>
                <Link to={`${repoPath(org, repo)}/builds/${m.head.build}`}>{fmt(m.head.value)}</Link>
              </td>
              <td className={`verdict-${m.verdict || 'none'}`}>
                {m.delta === null ? 'new' : `${m.delta > 0 ? '+' : m.delta < 0 ? '−' : '±'}${fmt(Math.abs(m.delta))}`}
                {m.verdict && m.verdict !== 'same' && <> ({m.verdict})</>}
              </td>
              <td>
                {m.base && (
                  <Link to={`${repoPath(org, repo)}/builds/${m.head.build}?pipeline=${m.head.pipeline_id}&compare=${m.base.pipeline_id}`}>diff the runs</Link>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

function MergeBox({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const refresh = useRefresh(org, repo, pr)
  const [mode, setMode] = useState<'merge' | 'squash' | 'rebase'>('merge')
  const [del, setDel] = useState(false)
  const merge = useMutation({ mutationFn: () => endpoints.pulls.merge(org, repo, pr.number, { mode, delete_source_branch: del }), onSuccess: refresh })
  const unmet = pr.gate?.unmet ?? []
  return (
    <section className="mergebox" aria-label="Merge">
      {unmet.length > 0 ? (
        <>
          <h3>This request cannot merge yet</h3>
          <ul>
            {unmet.map((u) => (
              <li key={u.code}>
                <strong>{u.code.replace('_', ' ')}</strong>: {u.message}
                {u.code.startsWith('checks') && pr.gate?.checks[0] && (
                  <>
                    {' '}
                    (<Link to={`${repoPath(org, repo)}/builds/${pr.gate.checks[0].build}`}>see the checks</Link>)
                  </>
                )}
              </li>
            ))}
          </ul>
        </>
      ) : (
        <h3>Ready to merge{pr.gate?.rule && <> · rule {pr.gate.rule} is met</>}</h3>
      )}
      <label>
        Mode{' '}
        <select value={mode} onChange={(e) => setMode(e.target.value as typeof mode)}>
          <option value="merge">Merge commit</option>
          <option value="squash">Squash</option>
          <option value="rebase">Rebase</option>
        </select>
      </label>{' '}
      {!pr.source_repo && !pr.source_deleted && (
        <label>
          <input type="checkbox" checked={del} onChange={(e) => setDel(e.target.checked)} /> Delete {pr.source_branch} after
        </label>
      )}{' '}
      <button type="button" onClick={() => merge.mutate()} disabled={merge.isPending}>
        Merge
      </button>
      <FormError error={merge.error} />
    </section>
  )
}

function Reviews({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const qc = useQueryClient()
  const q = useQuery({ queryKey: keys.pulls.reviews(org, repo, pr.number), queryFn: () => endpoints.pulls.reviews(org, repo, pr.number), refetchInterval: pr.state === 'open' ? 3000 : false })
  const [body, setBody] = useState('')
  const review = useMutation({
    mutationFn: (state: 'approve' | 'request_changes' | 'comment') => endpoints.pulls.review(org, repo, pr.number, { state, body }),
    onSuccess: () => {
      setBody('')
      return qc.invalidateQueries({ queryKey: keys.pulls.one(org, repo, pr.number) })
    },
  })
  return (
    <section aria-label="Reviews">
      <h2>Reviews</h2>
      {pr.requested_reviewers.length > 0 && <p className="muted">Asked: {pr.requested_reviewers.join(', ')}</p>}
      <QueryView q={q} what="Loading the reviews">
        {(reviews) =>
          reviews.length === 0 ? (
            <p className="muted">No reviews yet.</p>
          ) : (
            <ul className="reviews">
              {reviews.map((r) => (
                <li key={r.id}>
                  <strong>{r.reviewer}</strong> {r.state === 'approve' ? 'approved' : r.state === 'request_changes' ? 'requested changes' : 'commented'}{' '}
                  {ago(r.created_at)} {r.stale && <span className="tag">on an older head</span>}
                  {r.body && <div className="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(r.body) }} />}
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      {pr.state === 'open' && (
        <div className="reviewform">
          <textarea aria-label="Review" value={body} onChange={(e) => setBody(e.target.value)} rows={2} placeholder="Leave a review (Markdown)" />
          <button type="button" onClick={() => review.mutate('approve')} disabled={review.isPending}>
            Approve
          </button>{' '}
          <button type="button" onClick={() => review.mutate('request_changes')} disabled={review.isPending}>
            Request changes
          </button>
          <FormError error={review.error} />
        </div>
      )}
    </section>
  )
}

function useComments(org: string, repo: string, pr: PullRequest) {
  return useQuery({ queryKey: keys.pulls.comments(org, repo, pr.number), queryFn: () => endpoints.pulls.comments(org, repo, pr.number) })
}

function CommentItem({ c }: { c: PullComment }) {
  return (
    <li>
      <strong>{c.author}</strong>
      {c.pipeline && <span className="tag">pipeline {c.pipeline.id}</span>} {ago(c.created_at)}
      {c.outdated && <span className="tag">outdated</span>}
      {c.path && !c.outdated && (
        <span className="muted">
          {' '}
          on {c.path}:{c.line}
        </span>
      )}
      <div className="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(c.body) }} />
    </li>
  )
}

function CommentForm({ org, repo, pr, path, line, done }: { org: string; repo: string; pr: PullRequest; path?: string; line?: number; done?: () => void }) {
  const qc = useQueryClient()
  const [body, setBody] = useState('')
  const post = useMutation({
    mutationFn: () => endpoints.pulls.comment(org, repo, pr.number, { body, path, line }),
    onSuccess: () => {
      setBody('')
      done?.()
      return qc.invalidateQueries({ queryKey: keys.pulls.comments(org, repo, pr.number) })
    },
  })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    post.mutate()
  }
  return (
    <form onSubmit={submit} className="commentform" aria-label={line ? `Comment on line ${line}` : 'Comment'}>
      <textarea aria-label="Comment" value={body} onChange={(e) => setBody(e.target.value)} rows={2} required placeholder="Markdown" />
      <button type="submit" disabled={post.isPending}>
        Comment
      </button>
      <FormError error={post.error} />
    </form>
  )
}

function Comments({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const q = useComments(org, repo, pr)
  return (
    <section aria-label="Conversation">
      <h2>Conversation</h2>
      <QueryView q={q} what="Loading the comments">
        {(all) => (
          <ul className="comments">
            {all.map((c) => (
              <CommentItem key={c.id} c={c} />
            ))}
          </ul>
        )}
      </QueryView>
      {pr.state === 'open' && <CommentForm org={org} repo={repo} pr={pr} />}
    </section>
  )
}

function Files({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const files = useQuery({ queryKey: keys.pulls.files(org, repo, pr.number), queryFn: () => endpoints.pulls.files(org, repo, pr.number) })
  const comments = useComments(org, repo, pr)
  const [at, setAt] = useState<{ path: string; line: number } | null>(null)
  return (
    <QueryView q={files} what="Loading the changes">
      {(l) => (
        <>
          <p>
            {l.items.length} files changed against <code>{shortSha(pr.merge_base)}</code>
          </p>
          {l.items.map((f) => (
            <DiffFile
              key={f.path}
              file={f}
              lineAction={pr.state === 'open' ? (line) => setAt({ path: f.path, line }) : undefined}
              below={(line) => {
                const here = (comments.data ?? []).filter((c) => c.path === f.path && c.line === line && !c.outdated)
                const open = at?.path === f.path && at.line === line
                if (here.length === 0 && !open) return null
                return (
                  <div className="linecomments">
                    <ul className="comments">
                      {here.map((c) => (
                        <CommentItem key={c.id} c={c} />
                      ))}
                    </ul>
                    {open && <CommentForm org={org} repo={repo} pr={pr} path={f.path} line={line} done={() => setAt(null)} />}
                  </div>
                )
              }}
            />
          ))}
        </>
      )}
    </QueryView>
  )
}

function Commits({ org, repo, pr }: { org: string; repo: string; pr: PullRequest }) {
  const q = useQuery({ queryKey: keys.pulls.commits(org, repo, pr.number), queryFn: () => endpoints.pulls.commits(org, repo, pr.number) })
  return (
    <QueryView q={q} what="Loading the commits">
      {(l) => (
        <ul className="commits">
          {l.items.map((c) => (
            <li key={c.sha}>
              <Link to={`${repoPath(org, repo)}/-/commit/${c.sha}`}>{c.title}</Link> <span className="muted">{c.author_name}</span> <code>{shortSha(c.sha)}</code>
            </li>
          ))}
        </ul>
      )}
    </QueryView>
  )
}
