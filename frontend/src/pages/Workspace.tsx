import { Suspense, lazy, useEffect, useState } from 'react'
import { Link, useLocation, useParams } from 'react-router'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { Loading, Notice, QueryView } from '../components/ui'
import { WorkspaceActions, WorkspaceFacts, WorkspaceStateTag } from '../components/Workspace'
import { endpoints } from '../lib/endpoints'
import { isEnded, type Workspace as WorkspaceT } from '../lib/workspaces'
import { seg } from '../lib/api'
import { keys } from '../lib/keys'

// xterm.js is a chunk of its own, loaded when a terminal is first shown.
const WorkspaceTerminal = lazy(() => import('../components/Terminal'))

export function useWorkspace(id: string) {
  return useQuery({
    queryKey: keys.workspaces.get(id),
    queryFn: () => endpoints.workspaces.get(id),
    // Every 2 s while it comes up or goes down, every 5 s while ready (the countdowns tick
    // locally in between), not at all once it has ended.
    refetchInterval: (q) => (q.state.data ? (isEnded(q.state.data) ? false : q.state.data.state === 'ready' ? 5000 : 2000) : 2000),
  })
}

function TerminalSection({ w, seen }: { w: WorkspaceT; seen: boolean }) {
  const qc = useQueryClient()
  if (!seen)
    return (
      <p className="muted" data-testid="terminal-waiting">
        {isEnded(w) ? 'The workspace has ended.' : 'The terminal opens when the workspace is ready; its build’s log shows the preparation stages.'}
      </p>
    )
  return (
    <Suspense fallback={<Loading what="Loading the terminal" />}>
      <WorkspaceTerminal workspaceId={w.id} ended={isEnded(w)} onConnect={() => qc.invalidateQueries({ queryKey: keys.workspaces.get(w.id) })} />
    </Suspense>
  )
}

export default function Workspace() {
  const { org = '', repo = '', id = '' } = useParams()
  const q = useWorkspace(id)
  // The terminal shows once the workspace is ready, and stays (its output stays readable after
  // the workspace stops).
  const [seenId, setSeenId] = useState('')
  if (seenId !== id && q.data && String(q.data.id) === id && (q.data.state === 'ready' || q.data.state === 'stopping')) setSeenId(id)
  const seen = seenId === id
  // The list's "Terminal" links here with #terminal.
  const { hash } = useLocation()
  const loaded = !!q.data
  useEffect(() => {
    if (loaded && hash === '#terminal') document.getElementById('terminal')?.scrollIntoView?.()
  }, [loaded, hash, seen])
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <QueryView q={q} what="Loading the workspace">
        {(w) => (
          <>
            <div className="pagehead">
              <h1>
                Workspace #{w.id} <WorkspaceStateTag w={w} />
              </h1>
              <Link to={`/orgs/${seg(w.org)}/workspaces`}>All workspaces of {w.org}</Link>
            </div>
            {(w.state === 'queued' || w.state === 'starting') && (
              <Notice>
                The workspace is {w.state === 'queued' ? 'waiting for an agent' : 'starting'}.{' '}
                <Link to={`${repoPath(w.org, w.repo)}/builds/${w.build_number}`}>Build #{w.build_number}</Link> shows its preparation stages and their logs.
              </Notice>
            )}
            <WorkspaceFacts w={w} />
            <WorkspaceActions w={w} terminal={false} />
            <h2 id="terminal">Terminal</h2>
            <TerminalSection w={w} seen={seen} />
          </>
        )}
      </QueryView>
    </section>
  )
}

