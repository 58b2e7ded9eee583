// A workspace's facts and actions, on the team's list and on the workspace's own page.
import { useEffect, useState } from 'react'
import { Link } from 'react-router'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { repoPath } from './RepoHeader'
import { FormError, Notice } from './ui'
import { useCurrency } from './Pricing'
import { coreHours, dateTime, money } from '../lib/format'
import { endpoints } from '../lib/endpoints'
import { idleText, isEnded, lifetimeText, workspacePath, type RestoreResult, type Workspace } from '../lib/workspaces'
import { keys } from '../lib/keys'

/** The current time, again every `ms` (the countdowns tick locally between polls). */
export function useNow(ms = 1000): number {
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms)
    return () => clearInterval(t)
  }, [ms])
  return now
}

export function WorkspaceStateTag({ w }: { w: Workspace }) {
  return (
    <span className={`tag ws ws-${w.state}`} title="workspace state" data-workspace-state={w.state}>
      {w.state}
    </span>
  )
}

/** The idle countdown, ticking each second; "connected" while something is connected. */
export function IdleCountdown({ w, now }: { w: Workspace; now: number }) {
  const idle = idleText(w, now)
  return (
    <span data-testid="idle" data-idle={idle.kind} className={idle.kind === 'expired' ? 'warn' : undefined}>
      {idle.text}
    </span>
  )
}

function Lifetime({ w, now }: { w: Workspace; now: number }) {
  return <span data-testid="lifetime">{lifetimeText(w, now)}</span>
}

export function WorkspaceFacts({ w }: { w: Workspace }) {
  const currency = useCurrency()
  const now = useNow()
  return (
    <dl className="summary wsfacts">
      <div>
        <dt>State</dt>
        <dd>
          <WorkspaceStateTag w={w} />
        </dd>
      </div>
      <div>
        <dt>Repo / branch</dt>
        <dd>
          <Link to={repoPath(w.org, w.repo)}>{w.repo}</Link> / {w.branch}
        </dd>
      </div>
      <div>
        <dt>Runner</dt>
        <dd>
          <span className="tag" title="runner class">
            {w.runner_tag}
          </span>
          <span className="tag">{w.cpus} cores</span>
          <span className="tag" data-testid="gpus">
            {w.gpus > 0 ? `${w.gpus} GPU${w.gpus > 1 ? 's' : ''}` : 'no GPU'}
          </span>
        </dd>
      </div>
      <div>
        <dt>Cost so far</dt>
        <dd>
          <span data-testid="cost">{money(w.cost, currency)}</span> <span className="muted">({coreHours(w.core_seconds)})</span>
        </dd>
      </div>
      <div>
        <dt>Idle</dt>
        <dd>
          <IdleCountdown w={w} now={now} />
        </dd>
      </div>
      <div>
        <dt>Lifetime cap</dt>
        <dd>
          <Lifetime w={w} now={now} />
        </dd>
      </div>
      <div>
        <dt>Build</dt>
        <dd>
          <Link to={`${repoPath(w.org, w.repo)}/builds/${w.build_number}`}>build #{w.build_number}</Link>
        </dd>
      </div>
      <div>
        <dt>{w.finished_at ? 'Ended' : 'Created'}</dt>
        <dd>{dateTime(w.finished_at ?? w.created_at)}</dd>
      </div>
    </dl>
  )
}

/** Open (the IDE), Terminal, Keep alive, Stop, Restore a saved work. */
export function WorkspaceActions({ w, terminal = true }: { w: Workspace; terminal?: boolean }) {
  const qc = useQueryClient()
  const refresh = () => {
    qc.invalidateQueries({ queryKey: keys.workspaces.all() })
    qc.invalidateQueries({ queryKey: keys.workspaces.get(w.id) })
  }
  const keepalive = useMutation({ mutationFn: () => endpoints.workspaces.keepalive(w.id), onSettled: refresh })
  const stop = useMutation({ mutationFn: () => endpoints.workspaces.stop(w.id), onSettled: refresh })
  const saved = w.saved_work ?? []
  const [ref, setRef] = useState(saved[0]?.ref ?? '')
  const restore = useMutation<RestoreResult, unknown, string>({ mutationFn: (r) => endpoints.workspaces.restore(w.id, r) })
  const ended = isEnded(w)
  const ready = w.state === 'ready'
  const canStop = w.state === 'queued' || w.state === 'starting' || w.state === 'ready'
  return (
    <div className="wsactions">
      <div className="actions">
        {ready && w.ide && w.ide.kind !== 'none' && w.ide.url && (
          <a className="button" href={w.ide.url} target="_blank" rel="noopener noreferrer" data-testid="open-ide">
            Open {w.ide.kind === 'launch' ? 'app' : 'IDE'} ↗
          </a>
        )}
        {ready && terminal && (
          <Link className="button secondary" to={`${workspacePath(w)}#terminal`}>
            Terminal
          </Link>
        )}
        {ready && (
          <button type="button" className="secondary" onClick={() => keepalive.mutate()} disabled={keepalive.isPending}>
            {keepalive.isPending ? 'Keeping alive…' : 'Keep alive'}
          </button>
        )}
        {canStop && (
          <button
            type="button"
            className="danger"
            disabled={stop.isPending}
            onClick={() => confirm(`Stop workspace #${w.id} (${w.repo} / ${w.branch})? Its endStages run and its uncommitted work is saved.`) && stop.mutate()}
          >
            {stop.isPending ? 'Stopping…' : 'Stop'}
          </button>
        )}
      </div>
      {ready && w.ide?.kind === 'none' && (
        <p className="muted note" data-testid="ide-none">
          No IDE{w.ide.reason ? `: ${w.ide.reason}` : ''}. The terminal is the way in.
        </p>
      )}
      {!ended && w.reason && <p className="muted note">{w.reason}</p>}
      {ended && w.reason && (
        <p className="muted note" data-testid="reason">
          {w.reason}
        </p>
      )}
      {ready && saved.length > 0 && (
        <form
          className="inline restore"
          onSubmit={(e) => {
            e.preventDefault()
            if (ref) restore.mutate(ref)
          }}
        >
          <label>
            <span className="muted">Saved work </span>
            <select value={ref} onChange={(e) => setRef(e.target.value)} aria-label="Saved work to restore">
              {saved.map((s) => (
                <option key={s.ref} value={s.ref}>
                  #{s.pipeline_id}, saved {dateTime(s.saved_at)}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" className="secondary" disabled={restore.isPending || !ref}>
            {restore.isPending ? 'Restoring…' : 'Restore'}
          </button>
        </form>
      )}
      {restore.data && (
        <Notice kind="success">
          <span data-testid="restored">
            Restored <code>{restore.data.ref}</code>: {restore.data.files.length === 0 ? 'no file changed.' : `${restore.data.files.length} file${restore.data.files.length > 1 ? 's' : ''}, uncommitted:`}
          </span>
          {restore.data.files.length > 0 && (
            <ul className="files">
              {restore.data.files.map((f) => (
                <li key={f}>
                  <code>{f}</code>
                </li>
              ))}
            </ul>
          )}
        </Notice>
      )}
      <FormError error={keepalive.error ?? stop.error ?? restore.error} />
    </div>
  )
}

/** One workspace on the team's list. */
export function WorkspaceCard({ w }: { w: Workspace }) {
  return (
    <article className="card workspace" data-workspace={w.id} data-state={w.state} aria-label={`Workspace ${w.id}`}>
      <header className="row">
        <h3>
          <Link to={workspacePath(w)}>
            {w.repo} / {w.branch}
          </Link>{' '}
          <span className="muted">#{w.id} · {w.pipeline_name}</span>
        </h3>
        <WorkspaceStateTag w={w} />
      </header>
      <WorkspaceFacts w={w} />
      <WorkspaceActions w={w} />
    </article>
  )
}
