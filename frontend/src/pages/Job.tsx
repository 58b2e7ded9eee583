import { Link, useParams } from 'react-router'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { LogView } from '../components/LogView'
import { ErrorBox, Loading, StatusBadge } from '../components/ui'
import { useBuild } from './Build'
import { span } from '../lib/format'

export default function Job() {
  const { org = '', repo = '', number = '', job = '' } = useParams()
  const b = useBuild(org, repo, number)
  const id = Number(job)
  let found: { pipeline: string; stage: string; name: string; status: string } | null = null
  let pipelineTimes: { s: string | null; f: string | null } = { s: null, f: null }
  for (const p of b.data?.pipelines ?? [])
    for (const st of p.stages ?? [])
      for (const j of st.jobs)
        if (j.id === id) {
          found = { pipeline: p.name, stage: st.name, name: j.name, status: j.status }
          pipelineTimes = { s: p.started_at, f: p.finished_at }
        }
  const base = repoPath(org, repo)
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      {b.isPending && <Loading what="Loading the build" />}
      {b.isError && <ErrorBox error={b.error} retry={() => b.refetch()} />}
      {b.data && !found && <p className="error">Build #{number} has no job {job}.</p>}
      {found && (
        <div className="pagehead">
          <h1>
            {found.name} <StatusBadge status={found.status} />
          </h1>
          <p className="muted">
            <Link to={`${base}/builds/${number}`}>Build #{number}</Link> › {found.pipeline} › {found.stage} · pipeline {span(pipelineTimes.s, pipelineTimes.f)}
          </p>
        </div>
      )}
      {Number.isInteger(id) && id > 0 && <LogView key={id} jobId={id} title={found ? `Log of ${found.name}` : 'Log'} />}
    </section>
  )
}
