import { Link } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { useOrgs } from '../components/Layout'
import { Empty, FormError, QueryView } from '../components/ui'
import { ago } from '../lib/format'
import { keys } from '../lib/keys'

export function MyInvitations() {
  const qc = useQueryClient()
  const q = useQuery({ queryKey: keys.myInvitations(), queryFn: () => endpoints.user.invitations.list() })
  const act = useMutation({
    mutationFn: ({ id, what }: { id: number; what: 'accept' | 'decline' }) => endpoints.user.invitations[what](id),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: keys.myInvitations() })
      qc.invalidateQueries({ queryKey: keys.orgs() })
    },
  })
  if (!q.data?.length) return null
  return (
    <section aria-labelledby="inv-h">
      <h2 id="inv-h">Invitations for you</h2>
      <FormError error={act.error} />
      <ul className="list">
        {q.data.map((i) => (
          <li key={i.id} className="row">
            <span>
              <strong>{i.invited_by}</strong> invites you to <strong>{i.org}</strong> as {i.role} <span className="muted">({ago(i.created_at)})</span>
            </span>
            <span className="actions">
              <button type="button" className="small" onClick={() => act.mutate({ id: i.id, what: 'accept' })} disabled={act.isPending}>
                Accept
              </button>
              <button type="button" className="secondary small" onClick={() => act.mutate({ id: i.id, what: 'decline' })} disabled={act.isPending}>
                Decline
              </button>
            </span>
          </li>
        ))}
      </ul>
    </section>
  )
}

export default function Home() {
  const orgs = useOrgs()
  return (
    <section>
      <div className="pagehead">
        <h1>Your teams</h1>
        <Link className="button" to="/new">
          Create a team
        </Link>
      </div>
      <MyInvitations />
      <QueryView q={orgs} what="Loading your teams">
        {(list) =>
          list.length === 0 ? (
            <Empty>
              <p>You are not in a team yet.</p>
              <p>
                <Link to="/new">Create a team</Link> to host repos and run builds, or accept an invitation.
              </p>
            </Empty>
          ) : (
            <ul className="cards">
              {list.map((o) => (
                <li key={o.id}>
                  <Link to={`/orgs/${encodeURIComponent(o.name)}`} className="card link-card">
                    <strong>{o.name}</strong>
                    <span className="muted">{o.role}</span>
                  </Link>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
    </section>
  )
}
