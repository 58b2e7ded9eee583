import { Link } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { seg } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import { useUser } from '../session'
import { AdminPage } from '../components/AdminNav'
import { PricingPanel } from '../components/Pricing'
import { Empty, QueryView } from '../components/ui'
import { ago, bytes } from '../lib/format'

export default function Agents() {
  const user = useUser()
  const q = useQuery({ queryKey: ['agents'], queryFn: () => endpoints.admin.agents(), refetchInterval: 5000, enabled: !!user.data?.is_admin })
  return (
    <AdminPage title="Agents">
      <QueryView q={q} what="Loading agents">
        {(list) =>
          list.length === 0 ? (
            <Empty>No agent has registered. Start one with nimbus-agent and the registration token.</Empty>
          ) : (
            <div className="tablewrap">
              <table aria-label="Agents">
                <thead>
                  <tr>
                    <th scope="col">Agent</th>
                    <th scope="col">State</th>
                    <th scope="col">Tags</th>
                    <th scope="col">Capacity</th>
                    <th scope="col">Running</th>
                    <th scope="col">Last heartbeat</th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((a) => (
                    <tr key={a.id} data-agent={a.name}>
                      <td>
                        <strong>{a.name || a.id}</strong>
                        <br />
                        <span className="muted">
                          {a.id} · {a.executor || 'executor ?'} {a.version && `· ${a.version}`}
                        </span>
                      </td>
                      <td>
                        <span className={`badge ${a.online ? 's-success' : 's-cancelled'}`}>{a.online ? '● online' : '○ offline'}</span>
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
                        {a.gpus.length > 0 && `, ${a.free_gpus}/${a.gpus.length} GPUs (${a.gpus[0].name})`}
                        {a.memory_bytes > 0 && `, ${bytes(a.memory_bytes)}`}
                        <br />
                        <span className="muted">up to {a.concurrency} pipelines</span>
                      </td>
                      <td>
                        {a.pipelines.length === 0 ? (
                          <span className="muted">idle</span>
                        ) : (
                          <ul className="plain">
                            {a.pipelines.map((p) => (
                              <li key={p.id}>
                                <Link to={`/${seg(p.org)}/${seg(p.repo)}/builds/${p.build_number}`}>
                                  {p.org}/{p.repo} #{p.build_number}
                                </Link>{' '}
                                {p.name} <span className="muted">({p.cpus} cores, since {ago(p.started_at)})</span>
                              </li>
                            ))}
                          </ul>
                        )}
                      </td>
                      <td>{ago(a.last_seen_at)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </QueryView>
      <PricingPanel />
    </AdminPage>
  )
}
