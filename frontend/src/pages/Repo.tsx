import { useState } from 'react'
import { Link, useNavigate, useParams } from 'react-router'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { isFinal, type Build, type Schedule } from '../lib/types'
import { Buttons } from '../components/Buttons'
import { RepoHeader, repoPath, useRepo } from '../components/RepoHeader'
import { CopyField, Empty, Field, FormError, QueryView, StatusBadge, useSubmit } from '../components/ui'
import { ago, branchOf, dateTime, shortSha, span } from '../lib/format'
import { workspacePath } from '../lib/workspaces'
import { keys } from '../lib/keys'

export function useBuilds(org: string, repo: string) {
  return useQuery({
    queryKey: keys.repos.builds(org, repo),
    queryFn: () => endpoints.repos.builds.list(org, repo),
    // Live: every 2 s while a build is queued or running (or none exists yet: the first push), else every 10 s.
    refetchInterval: (q) => (!q.state.data?.items.length || q.state.data.items.some((b) => !isFinal(b.status)) ? 2000 : 10000),
    refetchIntervalInBackground: false,
  })
}

function FirstPush({ cloneUrl, branch }: { cloneUrl: string; branch: string }) {
  const cmds = `git init -b ${branch}
cat > .cnb.yml <<'YAML'
${branch}:
  push:
    - stages:
        - name: hello
          script: echo "hello from Nimbus"
YAML
git add .cnb.yml && git commit -m "first build"
git remote add origin ${cloneUrl}
git push -u origin ${branch}`
  return (
    <Empty>
      <h3>No builds yet</h3>
      <p>Push a commit with a <code>.cnb.yml</code> and its pipelines run here. For a new, empty repo:</p>
      <pre className="code" tabIndex={0} aria-label="First push commands">
        {cmds}
      </pre>
      <p className="muted">When git asks for a password, give it a personal access token with the repo:write scope.</p>
    </Empty>
  )
}

function TriggerForm({ org, repo, branch }: { org: string; repo: string; branch: string }) {
  const navigate = useNavigate()
  const [open, setOpen] = useState(false)
  const [form, setForm] = useState({ branch, event: '' })
  const [env, setEnv] = useState<{ k: string; v: string }[]>([{ k: '', v: '' }])
  // What the branch's file declares: the form offers only events that can run.
  const ev = useQuery({ queryKey: keys.repos.events(org, repo, form.branch), queryFn: () => endpoints.repos.events(org, repo, form.branch), enabled: open && form.branch !== '', retry: false })
  const manual = (ev.data?.events ?? []).filter((e) => e.manual)
  const others = (ev.data?.events ?? []).filter((e) => !e.manual)
  const event = manual.some((e) => e.event === form.event) ? form.event : (manual[0]?.event ?? '')
  const { submit, busy, error } = useSubmit(async () => {
    const vars = Object.fromEntries(env.filter((x) => x.k.trim()).map((x) => [x.k.trim(), x.v]))
    const b = await endpoints.repos.builds.trigger(org, repo, { branch: form.branch, event, env: vars })
    navigate(`${repoPath(org, repo)}/builds/${b.number}`)
  })
  if (!open)
    return (
      <button type="button" className="secondary" onClick={() => setOpen(true)} aria-expanded="false">
        Run a build…
      </button>
    )
  return (
    <form onSubmit={submit} className="card" aria-labelledby="trigger-h">
      <h2 id="trigger-h">Run a build</h2>
      <Field label="Branch">
        {(id) => (
          <select id={id} name="branch" value={form.branch} onChange={(e) => setForm({ branch: e.target.value, event: '' })}>
            {(ev.data?.branches.length ? ev.data.branches : [form.branch]).map((b) => (
              <option key={b} value={b}>
                {b}
              </option>
            ))}
          </select>
        )}
      </Field>
      {ev.isPending ? (
        <p className="muted">Reading the branch’s .cnb.yml…</p>
      ) : ev.isError ? (
        <FormError error={ev.error} />
      ) : ev.data.problem ? (
        <p className="notice warn" data-testid="events-problem">
          Nothing to run on {form.branch}: {ev.data.problem}.
        </p>
      ) : manual.length === 0 ? (
        <p className="notice warn" data-testid="events-problem">
          The .cnb.yml on {form.branch} declares no event that runs by hand. Add a <code>web_trigger</code> (or <code>web_trigger_…</code>, <code>api_trigger…</code>) event under its branch key to run
          one from here.
        </p>
      ) : (
        <fieldset data-testid="events">
          <legend>Event, as {form.branch}’s .cnb.yml declares</legend>
          {manual.map((e) => (
            <label key={e.event} className="radio" data-event={e.event}>
              <input type="radio" name="event" value={e.event} checked={event === e.event} onChange={() => setForm({ ...form, event: e.event })} /> <code>{e.event}</code>{' '}
              <span className="muted">
                runs {e.pipelines === 1 ? '1 pipeline' : `${e.pipelines} pipelines`}
                {e.names.some((n) => n) && `: ${e.names.map((n) => n || '(unnamed)').join(', ')}`}
              </span>
            </label>
          ))}
        </fieldset>
      )}
      {others.length > 0 && (
        <p className="muted" data-testid="other-events">
          Also declared, fired by git or the clock rather than from here: {others.map((e) => e.event).join(', ')}.
        </p>
      )}
      <fieldset>
        <legend>Environment variables</legend>
        {env.map((row, i) => (
          <div key={i} className="envrow">
            <label className="visually-hidden" htmlFor={`env-k-${i}`}>
              Name of variable {i + 1}
            </label>
            <input id={`env-k-${i}`} placeholder="NAME" pattern="[A-Za-z_][A-Za-z0-9_]*" value={row.k} onChange={(e) => setEnv(env.map((x, j) => (j === i ? { ...x, k: e.target.value } : x)))} />
            <label className="visually-hidden" htmlFor={`env-v-${i}`}>
              Value of variable {i + 1}
            </label>
            <input id={`env-v-${i}`} placeholder="value" value={row.v} onChange={(e) => setEnv(env.map((x, j) => (j === i ? { ...x, v: e.target.value } : x)))} />
            <button type="button" className="secondary small" onClick={() => setEnv(env.filter((_, j) => j !== i))} aria-label={`Remove variable ${i + 1}`}>
              ✕
            </button>
          </div>
        ))}
        <button type="button" className="link" onClick={() => setEnv([...env, { k: '', v: '' }])}>
          + Add a variable
        </button>
      </fieldset>
      <FormError error={error} />
      <div className="actions">
        <button type="submit" disabled={busy || !event}>
          {busy ? 'Starting…' : event ? `Run ${event}` : 'Run'}
        </button>
        <button type="button" className="secondary" onClick={() => setOpen(false)}>
          Cancel
        </button>
      </div>
    </form>
  )
}

/** "Open workspace": the vscode event on the branch, then the new workspace's page (its build's
 * page when the build has no workspace pipeline, e.g. a .cnb.yml that did not parse). */
export function OpenWorkspace({ org, repo, branch, className = 'secondary', label = 'Open workspace' }: { org: string; repo: string; branch: string; className?: string; label?: string }) {
  const navigate = useNavigate()
  const qc = useQueryClient()
  const { submit, busy, error } = useSubmit(async () => {
    const b = await endpoints.repos.workspaces.open(org, repo, { branch })
    qc.invalidateQueries({ queryKey: keys.repos.builds(org, repo) })
    qc.invalidateQueries({ queryKey: keys.workspaces.all() })
    const ws = b.pipelines.find((p) => p.workspace)
    navigate(ws ? workspacePath({ org, repo, id: ws.id }) : `${repoPath(org, repo)}/builds/${b.number}`)
  })
  return (
    <form onSubmit={submit} className="inline">
      <button type="submit" className={className} disabled={busy} data-testid="open-workspace" data-branch={branch}>
        {busy ? 'Opening…' : label}
      </button>
      <FormError error={error} />
    </form>
  )
}

export function BuildsTable({ builds, base }: { builds: Build[]; base: string }) {
  return (
    <div className="tablewrap">
      <table className="builds" aria-label="Builds">
        <thead>
          <tr>
            <th scope="col">Build</th>
            <th scope="col">Status</th>
            <th scope="col">Event</th>
            <th scope="col">Branch / tag</th>
            <th scope="col">Commit</th>
            <th scope="col">By</th>
            <th scope="col">Started</th>
            <th scope="col">Duration</th>
          </tr>
        </thead>
        <tbody>
          {builds.map((b) => (
            <tr key={b.id} data-build={b.number}>
              <td>
                <Link to={`${base}/builds/${b.number}`}>#{b.number}</Link>
              </td>
              <td>
                <StatusBadge status={b.waiting ? 'waiting' : b.status} />
              </td>
              <td>{b.event}</td>
              <td>{branchOf(b)}</td>
              <td title={b.commit_message}>
                <code>{shortSha(b.commit)}</code> <span className="msg">{b.commit_message.split('\n')[0]}</span>
              </td>
              <td>{b.triggered_by || '—'}</td>
              <td>{ago(b.started_at ?? b.created_at)}</td>
              <td>{span(b.started_at, b.finished_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/** "Run now" of one schedule: its build's page once it started. */
function RunNow({ org, repo, s }: { org: string; repo: string; s: Schedule }) {
  const navigate = useNavigate()
  const qc = useQueryClient()
  const { submit, busy, error } = useSubmit(async () => {
    const b = await endpoints.repos.schedules.run(org, repo, s.id)
    qc.invalidateQueries({ queryKey: keys.repos.builds(org, repo) })
    qc.invalidateQueries({ queryKey: keys.repos.schedules(org, repo) })
    navigate(`${repoPath(org, repo)}/builds/${b.number}`)
  })
  return (
    <form onSubmit={submit} className="inline">
      <button type="submit" className="secondary small" disabled={busy} data-testid="run-schedule">
        {busy ? 'Starting…' : 'Run now'}
      </button>
      <FormError error={error} />
    </form>
  )
}

/**
 * The repo's schedules (`schedule` and `crontab` entries of its branches' .cnb.yml): when each
 * runs next in the billing time zone it is read in, its last build and who it runs as; repo
 * admins can run one now. Nothing when there are none.
 */
export function Schedules({ org, repo, admin }: { org: string; repo: string; admin: boolean }) {
  const q = useQuery({ queryKey: keys.repos.schedules(org, repo), queryFn: () => endpoints.repos.schedules.list(org, repo) })
  if (!q.data || q.data.length === 0) return null
  return (
    <>
      <h2>Schedules</h2>
      <div className="tablewrap">
        <table className="schedules" aria-label="Schedules">
          <thead>
            <tr>
              <th scope="col">Branch</th>
              <th scope="col">Event</th>
              <th scope="col">Cron</th>
              <th scope="col">Next run</th>
              <th scope="col">Last build</th>
              <th scope="col">Runs as</th>
              {admin && <th scope="col"><span className="visually-hidden">Actions</span></th>}
            </tr>
          </thead>
          <tbody>
            {q.data.map((s) => (
              <tr key={s.id} data-schedule={s.id}>
                <td>{s.branch}</td>
                <td>{s.event}</td>
                <td>
                  <code>{s.cron}</code>
                </td>
                <td title={`cron read in ${s.zone}`}>{s.next_run_at ? dateTime(s.next_run_at, { timeZone: s.zone }) : 'never again'}</td>
                <td>{s.last_build ? <Link to={`${repoPath(org, repo)}/builds/${s.last_build}`}>#{s.last_build}</Link> : 'none yet'}</td>
                <td>{s.run_as || <span title="the user who registered it is gone">nobody</span>}</td>
                {admin && (
                  <td>
                    <RunNow org={org} repo={repo} s={s} />
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  )
}

export default function Repo() {
  const { org = '', repo = '' } = useParams()
  const r = useRepo(org, repo)
  const builds = useBuilds(org, repo)
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      {r.data && (
        <div className="clone">
          <span className="muted">Clone</span>
          <CopyField value={r.data.clone_url} label="Clone URL" />
          {r.data.permission !== 'read' && !r.data.archived && <TriggerForm org={r.data.org} repo={r.data.name} branch={r.data.default_branch} />}
          {r.data.permission !== 'read' && !r.data.archived && <OpenWorkspace org={r.data.org} repo={r.data.name} branch={r.data.default_branch} />}
        </div>
      )}
      {r.data && r.data.permission !== 'read' && !r.data.archived && <Buttons org={r.data.org} repo={r.data.name} branch={r.data.default_branch} />}
      {r.data && <Schedules org={r.data.org} repo={r.data.name} admin={r.data.permission === 'admin' && !r.data.archived} />}
      <h2>Builds</h2>
      <QueryView q={builds} what="Loading builds">
        {(page) =>
          page.items.length === 0 ? (
            r.data ? <FirstPush cloneUrl={r.data.clone_url} branch={r.data.default_branch} /> : <Empty>No builds yet.</Empty>
          ) : (
            <BuildsTable builds={page.items} base={repoPath(org, repo)} />
          )
        }
      </QueryView>
    </section>
  )
}
