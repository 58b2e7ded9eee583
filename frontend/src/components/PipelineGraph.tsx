import { Link } from 'react-router'
import { seg } from '../lib/api'
import { layoutPipeline } from '../lib/pipeline'
import type { Pipeline } from '../lib/types'
import { useCurrency } from './Pricing'
import { coreHours, coreSeconds, duration, money, span } from '../lib/format'
import { StatusBadge } from './ui'
import { useUser } from '../session'

/** What each blocker's remedy links to, on the team's pages. */
const REMEDIES: Record<string, { label: string; href: (org: string) => string }> = {
  topup: { label: 'Top up', href: (org) => `/orgs/${seg(org)}/billing` },
  spending_cap: { label: 'Raise the spending cap', href: (org) => `/orgs/${seg(org)}/billing` },
  agents: { label: 'See agents, or bring your own runner', href: (org) => `/orgs/${seg(org)}/agents` },
  team_agents: { label: "Your team's runners", href: (org) => `/orgs/${seg(org)}/agents` },
}

/**
 * A remedy's link for this viewer: a platform admin adding an agent goes to the admin Agents
 * page (its start commands and registration tokens); anyone else is sent to team runners only
 * for a tag team runners may serve ("agents"), and told whom to ask for the rest
 * ("platform_agents": a runner started for a GPU tag would be refused).
 */
export function remedyLink(remedy: string, org: string, admin: boolean): { label: string; href?: string } | undefined {
  if (admin && (remedy === 'agents' || remedy === 'platform_agents')) return { label: 'Add an agent', href: '/admin/agents' }
  if (remedy === 'platform_agents') return { label: "only the platform's admins can add one: ask them" }
  const r = REMEDIES[remedy]
  return r && { label: r.label, href: r.href(org) }
}

/**
 * What a pipeline waits for, each blocker with its remedy as a link: a queued one's, or a
 * running one's whose agent has no place for it yet (`capacity`: a Kubernetes pod Pending).
 */
function Blockers({ p, org }: { p: Pipeline; org?: string }) {
  const admin = !!useUser().data?.is_admin
  const list = p.blockers ?? []
  if (list.length === 0) return null
  return (
    <ul className="blockers" role="status" aria-label={`Why ${p.name} waits`}>
      {list.map((b, i) => {
        const r = b.remedy && org ? remedyLink(b.remedy, org, admin) : undefined
        return (
          <li key={i} data-blocker={b.code}>
            {b.message}
            {r && (
              <>
                {' '}
                {r.href ? (
                  <Link to={r.href} data-remedy={b.remedy}>
                    {r.label} →
                  </Link>
                ) : (
                  <span className="hint" data-remedy={b.remedy}>
                    ({r.label})
                  </span>
                )}
              </>
            )}
          </li>
        )
      })}
    </ul>
  )
}

/**
 * What an ended pipeline's reason says about money, in words, with the remedy: a bare code
 * ("insufficient_balance") read as jargon, and the card of a pipeline that money ended named no
 * way out. The build page's Re-run buttons are the next step once the remedy is done.
 */
export function moneyReason(reason: string): { text: string; remedy: string } | undefined {
  if (/\binsufficient_balance\b/.test(reason))
    return { text: reason.replace(/\binsufficient_balance\b/, "the team's balance could not pay for its next window"), remedy: 'topup' }
  if (/\bspending_cap_reached\b/.test(reason))
    return { text: reason.replace(/\bspending_cap_reached\b/, "the team's monthly spending cap would have been passed"), remedy: 'spending_cap' }
  if (reason.includes('balance insufficient')) return { text: reason, remedy: 'topup' }
  if (reason.includes('spending cap would be passed')) return { text: reason, remedy: 'spending_cap' }
  return undefined
}

/** An ended (or waiting, without blockers) pipeline's reason; a money one with its remedy. */
function Reason({ p, org }: { p: Pipeline; org?: string }) {
  const m = p.status === 'queued' ? undefined : moneyReason(p.reason)
  const r = m && REMEDIES[m.remedy]
  return (
    <p className="reason" role={p.status === 'queued' ? 'status' : undefined}>
      {m ? m.text : p.reason}
      {r && org && (
        <>
          {' '}
          <Link to={r.href(org)} data-remedy={m.remedy}>
            {r.label} →
          </Link>{' '}
          <span className="hint">then re-run it from this build.</span>
        </>
      )}
    </p>
  )
}

/** One pipeline: its runner, cores, cost and reason, then its stages left to right. */
export function PipelineCard({
  p,
  jobHref,
  currency,
  workspaceHref,
  org,
}: {
  p: Pipeline
  jobHref: (jobId: number) => string
  currency?: string
  workspaceHref?: string
  /** The team, for the blockers' remedy links. */
  org?: string
}) {
  const layout = layoutPipeline(p.stages ?? [])
  const shownCurrency = useCurrency()
  return (
    <article className="pipeline" aria-label={`Pipeline ${p.name}`} data-pipeline={p.key}>
      <header>
        <h3>{p.name}</h3>
        <StatusBadge status={p.waiting ? 'waiting' : p.status} />
        <div className="meta">
          <span className="tag" title="runner class">
            {p.runner_tag}
          </span>
          <span className="tag">{p.cpus} cores</span>
          {p.workspace_state && (
            <span className="tag" title="workspace" data-workspace-state={p.workspace_state}>
              workspace: {p.workspace_state}
            </span>
          )}
          {p.workspace && workspaceHref && (
            <Link to={workspaceHref} data-testid="workspace-link">
              {p.workspace_state === 'stopped' || p.workspace_state === 'failed' ? 'Workspace →' : 'Open workspace →'}
            </Link>
          )}
          <span title="duration">{span(p.started_at, p.finished_at)}</span>
          {p.host && <HostTag host={p.host} />}
          {!!p.awaited_ms && (
            <span title="time in cnb:await, waiting for another pipeline of the build: part of the duration, and billed (the node was held)" data-testid="awaited">
              awaited {duration(p.awaited_ms)}
            </span>
          )}
          <span title={coreSeconds(p.core_seconds)}>{coreHours(p.core_seconds)}</span>
          <span title="cost">{money(p.cost, currency ?? shownCurrency)}</span>
        </div>
        {(p.status === 'queued' || p.status === 'running') && (p.blockers ?? []).length > 0 ? (
          <Blockers p={p} org={org} />
        ) : (
          p.reason && <Reason p={p} org={org} />
        )}
      </header>
      <div
        className="graph"
        style={{ gridTemplateColumns: `repeat(${Math.max(1, layout.cols)}, minmax(8.5rem, max-content))`, gridTemplateRows: `auto repeat(${layout.rows}, auto)` }}
      >
        {layout.stages.map((st, si) => (
          <div
            key={'s' + si}
            className={`stagehead ${st.kind ?? ''}`}
            style={{ gridColumn: `${st.col + 1} / span ${st.width}`, gridRow: '1' }}
          >
            <StatusBadge status={st.status} label="" /> <span className="stagename">{st.name}</span>
            {st.kind && <span className="tag">{st.kind === 'fail' ? 'on failure' : 'always'}</span>}
            {st.jobs.length > 1 && <span className="tag">{st.parallel ? 'parallel' : 'serial'}</span>}
          </div>
        ))}
        {layout.stages.flatMap((st) =>
          st.jobs.map((j, ji) => (
            <div
              key={j.id}
              className={`jobcell ${st.parallel ? 'par' : 'ser'} ${!st.parallel && ji > 0 ? 'after' : ''}`}
              style={{ gridColumn: `${j.col + 1}`, gridRow: `${j.row + 2}` }}
            >
              <Link to={jobHref(j.id)} className={`job s-${j.status}`} data-job={j.name}>
                <StatusBadge status={j.status} label="" />
                <span className="jobname">{j.name}</span>
                {j.exit_code !== undefined && j.exit_code !== 0 && <span className="muted"> exit {j.exit_code}</span>}
              </Link>
            </div>
          )),
        )}
      </div>
    </article>
  )
}

type HostFacts = { name?: string; version?: string; executor?: string; host?: { os?: string; kernel?: string; cpuModel?: string; gpuDriver?: string; cudaVersion?: string; engine?: string } }

/** The agent that ran the pipeline; its host's facts in the tooltip (what the reproducibility record keeps). */
function HostTag({ host }: { host: Record<string, unknown> }) {
  const h = host as HostFacts
  const f = h.host ?? {}
  const facts = [
    h.version && `agent ${h.version}`,
    h.executor && `executor ${h.executor}`,
    f.cpuModel,
    f.gpuDriver && `GPU driver ${f.gpuDriver}`,
    f.cudaVersion && `CUDA ${f.cudaVersion}`,
    f.kernel && `kernel ${f.kernel}`,
    f.engine,
  ].filter(Boolean)
  return (
    <span className="tag" title={facts.join(' · ')} data-testid="host">
      on {h.name ?? 'an agent'}
      {f.gpuDriver ? ` · driver ${f.gpuDriver}` : ''}
    </span>
  )
}
