import { useState } from 'react'
import { Link, useNavigate, useParams, useSearchParams } from 'react-router'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { isFinal, type Build as BuildT } from '../lib/types'
import { RepoHeader, repoPath, useRepo } from '../components/RepoHeader'
import { PipelineCard } from '../components/PipelineGraph'
import { Provenance } from '../components/Provenance'
import { Diagnostics } from '../components/Diagnostics'
import { Empty, FormError, QueryView, StatusBadge } from '../components/ui'
import { branchOf, dateTime, shortSha, span } from '../lib/format'
import { keys } from '../lib/keys'

export function useBuild(org: string, repo: string, number: string) {
  return useQuery({
    queryKey: keys.repos.build(org, repo, number),
    queryFn: () => endpoints.repos.builds.get(org, repo, number),
    refetchInterval: (q) => (q.state.data && isFinal(q.state.data.status) ? false : 2000),
  })
}

function Controls({ b, org, repo }: { b: BuildT; org: string; repo: string }) {
  const qc = useQueryClient()
  const navigate = useNavigate()
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState('')
  const cancel = async () => {
    setBusy('cancel')
    setError(null)
    try {
      const nb = await endpoints.repos.builds.cancel(org, repo, b.number)
      // The answer carries the first page of pipelines: the page keeps them all.
      if (nb.pipelines_next_cursor) qc.invalidateQueries({ queryKey: keys.repos.build(org, repo, b.number) })
      else qc.setQueryData(['build', org, repo, String(b.number)], nb)
    } catch (e) {
      setError(e)
    } finally {
      setBusy('')
    }
  }
  const rerun = async (how: 'all' | 'failed' | 'exact') => {
    setBusy(how)
    setError(null)
    const call = { all: endpoints.repos.builds.rerun, failed: endpoints.repos.builds.rerunFailed, exact: endpoints.repos.builds.rerunExact }[how]
    try {
      const nb = await call(org, repo, b.number)
      qc.invalidateQueries({ queryKey: keys.repos.builds(org, repo) })
      navigate(`${repoPath(org, repo)}/builds/${nb.number}`)
    } catch (e) {
      setError(e)
    } finally {
      setBusy('')
    }
  }
  return (
    <div className="actions">
      {!isFinal(b.status) && (
        <button type="button" className="danger" onClick={cancel} disabled={!!busy}>
          {busy === 'cancel' ? 'Cancelling…' : 'Cancel build'}
        </button>
      )}
      {b.pipelines.length > 0 && (
        <button type="button" className="secondary" onClick={() => rerun('all')} disabled={!!busy}>
          {busy === 'all' ? 'Starting…' : 'Re-run all'}
        </button>
      )}
      {isFinal(b.status) && b.pipelines.some((p) => p.status === 'failed' || p.status === 'cancelled' || p.status === 'terminated') && (
        <button
          type="button"
          className="secondary"
          onClick={() => rerun('failed')}
          disabled={!!busy}
          title="A new build of only the pipelines that did not succeed; each runs whole, since a pipeline's jobs share one node and workspace"
        >
          {busy === 'failed' ? 'Starting…' : 'Re-run failed jobs'}
        </button>
      )}
      {b.pipelines.length > 0 && isFinal(b.status) && (
        <button
          type="button"
          className="secondary"
          onClick={() => rerun('exact')}
          disabled={!!busy}
          title="Same commit and plans, every image pinned to the digest its record names, the same non-secret env"
        >
          {busy === 'exact' ? 'Starting…' : 'Re-run exactly'}
        </button>
      )}
      <FormError error={error} />
    </div>
  )
}

export function BuildSummary({ b }: { b: BuildT }) {
  return (
    <dl className="summary">
      <div>
        <dt>Status</dt>
        <dd>
          <StatusBadge status={b.waiting ? 'waiting' : b.status} />
        </dd>
      </div>
      <div>
        <dt>Event</dt>
        <dd>{b.event}</dd>
      </div>
      <div>
        <dt>Branch / tag</dt>
        <dd>{branchOf(b)}</dd>
      </div>
      <div>
        <dt>Commit</dt>
        <dd>
          <code title={b.commit}>{shortSha(b.commit)}</code> {b.commit_message.split('\n')[0]}
        </dd>
      </div>
      <div>
        <dt>By</dt>
        <dd>{b.triggered_by || '—'}</dd>
      </div>
      <div>
        <dt>Started</dt>
        <dd>{dateTime(b.started_at)}</dd>
      </div>
      <div>
        <dt>Duration</dt>
        <dd>{span(b.started_at, b.finished_at)}</dd>
      </div>
      {b.rerun_of && (
        <div data-testid="rerun-of">
          <dt>Re-run of</dt>
          <dd>
            <Link to={`/${b.rerun_of.repo}/builds/${b.rerun_of.number}`}>Build #{b.rerun_of.number}</Link> <StatusBadge status={b.rerun_of.status} />
          </dd>
        </div>
      )}
      {b.parent && (
        <div data-testid="parent-build">
          <dt>Started by</dt>
          <dd>
            <Link to={`/${b.parent.repo}/builds/${b.parent.number}`}>
              {b.parent.repo}#{b.parent.number}
            </Link>
          </dd>
        </div>
      )}
      {b.children && b.children.length > 0 && (
        <div data-testid="child-builds">
          <dt>Started</dt>
          <dd>
            {b.children.map((c, i) => (
              <span key={`${c.repo}#${c.number}`}>
                {i > 0 && ', '}
                <Link to={`/${c.repo}/builds/${c.number}`}>
                  {c.repo}#{c.number}
                </Link>{' '}
                <StatusBadge status={c.status} />
              </span>
            ))}
          </dd>
        </div>
      )}
    </dl>
  )
}

export default function Build() {
  const { org = '', repo = '', number = '' } = useParams()
  const r = useRepo(org, repo)
  const q = useBuild(org, repo, number)
  const base = repoPath(org, repo)
  const [params, setParams] = useSearchParams()
  const selected = Number(params.get('pipeline')) || undefined
  const compare = Number(params.get('compare')) || undefined
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <QueryView q={q} what="Loading the build">
        {(b) => (
          <>
            <div className="pagehead">
              <h1>
                Build #{b.number} <StatusBadge status={b.waiting ? 'waiting' : b.status} />
              </h1>
              {r.data && r.data.permission !== 'read' && <Controls b={b} org={org} repo={repo} />}
            </div>
            <BuildSummary b={b} />
            {b.diagnostics && b.diagnostics.length > 0 ? (
              <Diagnostics ds={b.diagnostics} failed={!!b.error} />
            ) : (
              b.error && (
                <div className="error" role="alert">
                  <strong>.cnb.yml did not parse</strong>
                  <pre className="code">
                    {b.error.file}
                    {b.error.line > 0 && `:${b.error.line}`}
                    {b.error.column > 0 && `:${b.error.column}`}: {b.error.message}
                  </pre>
                </div>
              )
            )}
            <h2>Pipelines</h2>
            {b.pipelines.length === 0 ? (
              <Empty>This build has no pipelines.</Empty>
            ) : (
              <div className="pipelines">
                {b.pipelines.map((p) => (
                  <PipelineCard key={p.id} p={p} org={org} jobHref={(id) => `${base}/builds/${b.number}/jobs/${id}`} workspaceHref={p.workspace ? `${base}/workspaces/${p.id}` : undefined} />
                ))}
              </div>
            )}
            {b.pipelines.length > 0 && (
              <Provenance
                org={org}
                repo={repo}
                pipelines={b.pipelines}
                selected={selected}
                compare={compare}
                onSelect={(id) => setParams({ pipeline: String(id) })}
                onCompare={(id) => setParams({ pipeline: String(selected ?? b.pipelines[0].id), compare: String(id) })}
              />
            )}
            <p>
              <Link to={base}>← All builds</Link>
            </p>
          </>
        )}
      </QueryView>
    </section>
  )
}
