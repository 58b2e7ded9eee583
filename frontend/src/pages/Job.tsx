import { useCallback, useState } from 'react'
import { Link, useParams } from 'react-router'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { LogView, type LogState } from '../components/LogView'
import { ErrorBox, Loading, StatusBadge } from '../components/ui'
import { useBuild } from './Build'
import { span } from '../lib/format'
import { jobsOf, shownStatus } from '../lib/jobs'

export default function Job() {
  const { org = '', repo = '', number = '', job = '' } = useParams()
  const b = useBuild(org, repo, number)
  const id = Number(job)
  const [log, setLog] = useState<{ state?: LogState; lines: number }>({ lines: 0 })
  const onProgress = useCallback((state: LogState, lines: number) => setLog({ state, lines }), [])
  const jobs = jobsOf(b.data)
  const found = jobs.find((j) => j.id === id)
  const pipeline = b.data?.pipelines.find((p) => (p.stages ?? []).some((st) => st.jobs.some((j) => j.id === id)))
  const base = repoPath(org, repo)
  const status = found ? shownStatus(found.status, log.state, log.lines) : undefined
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      {b.isPending && <Loading what="Loading the build" />}
      {b.isError && <ErrorBox error={b.error} retry={() => b.refetch()} />}
      {b.data && !found && <p className="error">Build #{number} has no job {job}.</p>}
      {found && status && (
        <div className="pagehead">
          <h1>
            {found.name} <StatusBadge status={status} />
          </h1>
          <p className="muted">
            <Link to={`${base}/builds/${number}`}>Build #{number}</Link> › {found.pipeline} › {found.stage} · pipeline {span(pipeline?.started_at ?? null, pipeline?.finished_at ?? null)}
          </p>
        </div>
      )}
      <div className="jobpage">
        {jobs.length > 1 && (
          <nav className="joblist" aria-label={`Jobs of build #${number}`}>
            <ul>
              {jobs.map((j, i) => (
                <li key={j.id} data-job-id={j.id}>
                  {(i === 0 || jobs[i - 1].pipeline !== j.pipeline) && <span className="muted pipe">{j.pipeline}</span>}
                  <Link to={`${base}/builds/${number}/jobs/${j.id}`} aria-current={j.id === id ? 'page' : undefined}>
                    <StatusBadge status={j.id === id && status ? status : j.status} label="" /> {j.name}
                  </Link>
                </li>
              ))}
            </ul>
          </nav>
        )}
        <div className="jobmain">{Number.isInteger(id) && id > 0 && <LogView key={id} jobId={id} title={found ? `Log of ${found.name}` : 'Log'} onProgress={onProgress} />}</div>
      </div>
    </section>
  )
}
