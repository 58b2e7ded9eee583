import type { ReactNode } from 'react'
import { Link } from 'react-router'
import { seg } from '../lib/api'
import { ago, bytes } from '../lib/format'
import type { AgentInfo } from '../lib/types'

/**
 * The table of agents, for the platform's admins (`/admin/agents`: every agent, its executor,
 * memory, concurrency, and what it runs across teams) and for a team (`/orgs/{org}/agents`: the
 * team's own runners, paused or not, and for its admins the row's actions). One component, so the
 * two pages cannot tell the same agent apart differently.
 */
export function AgentsTable({
  agents,
  scope,
  actions,
}: {
  agents: AgentInfo[]
  scope: 'platform' | 'team'
  /** A last column with the row's buttons (team admins); none when absent. */
  actions?: (a: AgentInfo) => ReactNode
}) {
  const platform = scope === 'platform'
  return (
    <div className="tablewrap">
      <table aria-label={platform ? 'Agents' : 'Team runners'}>
        <thead>
          <tr>
            <th scope="col">{platform ? 'Agent' : 'Runner'}</th>
            <th scope="col">State</th>
            <th scope="col">Tags</th>
            <th scope="col">Capacity</th>
            <th scope="col">Running</th>
            <th scope="col">{platform ? 'Last heartbeat' : 'Last seen'}</th>
            {actions && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {agents.map((a) => (
            <tr key={a.id} data-agent={a.name}>
              <td>
                <strong>{a.name || a.id}</strong>
                <br />
                <span className="muted">
                  {a.id} {platform && `· ${a.executor || 'executor ?'} `}
                  {a.version && `· ${a.version}`}
                </span>
              </td>
              <td data-testid="agent-state">
                <span className={`badge ${a.online ? 's-success' : 's-cancelled'}`}>{a.online ? '● online' : '○ offline'}</span>
                {a.paused && <span className="badge s-queued">paused</span>}
              </td>
              <td>
                {a.tags.map((t) => (
                  <span key={t} className="tag">
                    {t}
                  </span>
                ))}
              </td>
              <td>
                {a.free_cpus}/{a.cpus} cores free
                {a.whole_host && (
                  <span className="hint" title="It takes a pipeline that asks for more cores than it has when it runs nothing else, alone on all of them" data-whole-host>
                    {' '}
                    (larger pipelines run alone)
                  </span>
                )}
                {a.gpus.length > 0 && `, ${a.free_gpus}/${a.gpus.length} GPUs (${a.gpus[0].name})`}
                {platform && a.memory_bytes > 0 && `, ${bytes(a.memory_bytes)}`}
                {platform && (
                  <>
                    <br />
                    <span className="muted">up to {a.concurrency} pipelines</span>
                  </>
                )}
              </td>
              <td>
                {a.pipelines.length === 0 ? (
                  <span className="muted">idle</span>
                ) : (
                  <ul className="plain">
                    {a.pipelines.map((p) => (
                      <li key={p.id}>
                        <Link to={`/${seg(p.org)}/${seg(p.repo)}/builds/${p.build_number}`}>
                          {platform && `${p.org}/`}
                          {p.repo} #{p.build_number}
                        </Link>{' '}
                        {p.name}
                        {platform && (
                          <>
                            {' '}
                            <span className="muted">
                              ({p.cpus} cores, since {ago(p.started_at)})
                            </span>
                          </>
                        )}
                      </li>
                    ))}
                  </ul>
                )}
              </td>
              <td>{ago(a.last_seen_at)}</td>
              {actions && <td>{actions(a)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
