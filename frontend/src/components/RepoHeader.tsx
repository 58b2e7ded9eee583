import { NavLink, Link } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { seg } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import { ErrorBox, Loading } from './ui'
import { keys } from '../lib/keys'

export function useRepo(org: string, repo: string) {
  return useQuery({ queryKey: keys.repos.get(org, repo), queryFn: () => endpoints.repos.get(org, repo) })
}

export const repoPath = (org: string, repo: string) => `/${seg(org)}/${seg(repo)}`

/** The repo's title and tabs; renders the loading or error state of the repo itself. */
export function RepoHeader({ org, repo }: { org: string; repo: string }) {
  const q = useRepo(org, repo)
  if (q.isPending) return <Loading what="Loading the repo" />
  if (q.isError) return <ErrorBox error={q.error} retry={() => q.refetch()} />
  const r = q.data
  const base = repoPath(r.org, r.name)
  return (
    <div className="repohead">
      <p className="crumbs">
        <Link to={`/orgs/${seg(r.org)}`}>{r.org}</Link> / <strong>{r.name}</strong> <span className="tag">{r.visibility}</span>
        {r.archived && <span className="tag">archived</span>}
      </p>
      {r.description && <p className="muted">{r.description}</p>}
      <nav aria-label="Repo" className="tabs">
        <NavLink to={base} end>
          Builds
        </NavLink>
        <NavLink to={`${base}/-/tree`}>Code</NavLink>
        <NavLink to={`${base}/-/pulls`}>Pull requests</NavLink>
        <NavLink to={`${base}/artifacts`}>Artifacts</NavLink>
        <NavLink to={`${base}/releases`}>Releases</NavLink>
        <NavLink to={`${base}/metrics`}>Metrics</NavLink>
        {r.permission === 'admin' && <NavLink to={`${base}/settings`}>Settings</NavLink>}
      </nav>
    </div>
  )
}
