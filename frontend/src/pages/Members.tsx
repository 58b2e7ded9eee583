import { useState, type FormEvent } from 'react'
import { useNavigate, useParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { ROLE_HELP, ROLES, type Role } from '../lib/types'
import { useRole } from '../components/Layout'
import { useUser } from '../session'
import { ActionsHeader, CopyField, Empty, Field, FormError, Notice, QueryView } from '../components/ui'
import { ago, dateTime } from '../lib/format'
import { keys } from '../lib/keys'

export default function Members() {
  const { org = '' } = useParams()
  const qc = useQueryClient()
  const navigate = useNavigate()
  const me = useUser().data
  const role = useRole(org)
  const manager = role === 'admin' || role === 'owner'
  const members = useQuery({ queryKey: keys.org.members(org), queryFn: () => endpoints.orgs.members.list(org) })
  const invitations = useQuery({
    queryKey: keys.org.invitations(org),
    queryFn: () => endpoints.orgs.invitations.list(org),
    enabled: manager,
  })
  const refresh = () => {
    qc.invalidateQueries({ queryKey: keys.org.members(org) })
    qc.invalidateQueries({ queryKey: keys.org.invitations(org) })
  }
  const setRole = useMutation({
    mutationFn: ({ username, role }: { username: string; role: Role }) => endpoints.orgs.members.setRole(org, username, { role }),
    onSettled: refresh,
  })
  const remove = useMutation({
    mutationFn: (username: string) => endpoints.orgs.members.remove(org, username),
    onSuccess: (_, username) => {
      if (username === me?.username) {
        qc.invalidateQueries({ queryKey: keys.orgs() })
        navigate('/')
      } else refresh()
    },
  })
  const withdraw = useMutation({ mutationFn: (id: number) => endpoints.orgs.invitations.withdraw(org, id), onSuccess: refresh })
  const [invite, setInvite] = useState({ who: '', role: 'developer' as Role })
  const [invited, setInvited] = useState<{ who: string; mailed: boolean; link?: string } | null>(null)
  const create = useMutation({
    mutationFn: () => {
      const body = invite.who.includes('@') ? { email: invite.who, role: invite.role } : { username: invite.who, role: invite.role }
      return endpoints.orgs.invitations.create(org, body)
    },
    onSuccess: (i) => {
      setInvited({ who: i.email ?? i.username ?? '', mailed: i.mailed !== false, link: i.link })
      setInvite({ ...invite, who: '' })
      refresh()
    },
  })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    create.mutate()
  }
  const roles = role === 'owner' ? ROLES : ROLES.filter((r) => r !== 'owner')
  return (
    <section>
      <h1>Members of {org}</h1>
      <FormError error={setRole.error ?? remove.error ?? withdraw.error} />
      <QueryView q={members} what="Loading members">
        {(list) => (
          <div className="tablewrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Member</th>
                  <th scope="col">Role</th>
                  <th scope="col">Joined</th>
                  <ActionsHeader />
                </tr>
              </thead>
              <tbody>
                {list.map((m) => {
                  const editable = manager && (role === 'owner' || m.role !== 'owner')
                  return (
                    <tr key={m.user_id}>
                      <td>
                        {m.username} {m.username === me?.username && <span className="muted">(you)</span>}
                      </td>
                      <td>
                        {editable ? (
                          <>
                            <label className="visually-hidden" htmlFor={`role-${m.user_id}`}>
                              Role of {m.username}
                            </label>
                            <select id={`role-${m.user_id}`} value={m.role} onChange={(e) => setRole.mutate({ username: m.username, role: e.target.value as Role })}>
                              {(m.role === 'owner' ? ROLES : roles).map((r) => (
                                <option key={r}>{r}</option>
                              ))}
                            </select>
                          </>
                        ) : (
                          m.role
                        )}
                      </td>
                      <td>{ago(m.joined_at)}</td>
                      <td>
                        {(editable || m.username === me?.username) && (
                          <button
                            type="button"
                            className="danger small"
                            onClick={() => confirm(m.username === me?.username ? `Leave ${org}?` : `Remove ${m.username} from ${org}?`) && remove.mutate(m.username)}
                          >
                            {m.username === me?.username ? 'Leave' : 'Remove'}
                          </button>
                        )}
                      </td>
                    </tr>
                  )
                })}
              </tbody>
            </table>
          </div>
        )}
      </QueryView>
      {manager && (
        <>
          <h2>Invitations</h2>
          {invited && invited.mailed && <Notice kind="success">Invitation emailed to {invited.who}. It is valid for 14 days.</Notice>}
          {invited && !invited.mailed && (
            <Notice kind="warn">
              <span data-testid="invitation-unsent">
                No email was sent to {invited.who}: this installation has no mail server configured. Send them this link yourself; it is valid for 14 days
                {invited.link?.includes('token=') ? ' and lets whoever opens it signed in join, so share it only with them' : ''}.
              </span>
              {invited.link && <CopyField value={invited.link} label="Invitation link" />}
            </Notice>
          )}
          <form onSubmit={submit} className="card">
            <div className="grid2">
              <Field label="Username or email" hint="An email invitation carries a link that whoever opens it signed in can claim.">
                {(id, d) => <input id={id} required value={invite.who} onChange={(e) => setInvite({ ...invite, who: e.target.value })} aria-describedby={d} />}
              </Field>
              <Field label="Role" hint={ROLE_HELP[invite.role]}>
                {(id, d) => (
                  <select id={id} value={invite.role} aria-describedby={d} onChange={(e) => setInvite({ ...invite, role: e.target.value as Role })}>
                    {roles.map((r) => (
                      <option key={r}>{r}</option>
                    ))}
                  </select>
                )}
              </Field>
            </div>
            <FormError error={create.error} />
            <button type="submit" disabled={create.isPending}>
              {create.isPending ? 'Inviting…' : 'Invite'}
            </button>
          </form>
          <QueryView q={invitations} what="Loading invitations">
            {(list) =>
              list.length === 0 ? (
                <Empty>No open invitations.</Empty>
              ) : (
                <ul className="list">
                  {list.map((i) => (
                    <li key={i.id} className="row">
                      <span>
                        <strong>{i.username ?? i.email}</strong> as {i.role}, by {i.invited_by} <span className="muted">— expires {dateTime(i.expires_at)}</span>
                      </span>
                      <button type="button" className="secondary small" onClick={() => withdraw.mutate(i.id)}>
                        Withdraw
                      </button>
                    </li>
                  ))}
                </ul>
              )
            }
          </QueryView>
        </>
      )}
    </section>
  )
}
