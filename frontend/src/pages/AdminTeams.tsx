import { useState, type FormEvent } from 'react'
import { Link, useSearchParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { seg } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import { useUser } from '../session'
import { AdminPage } from '../components/AdminNav'
import { Empty, Field, FormError, Notice, QueryView } from '../components/ui'
import { day, money } from '../lib/format'
import type { AdminOrg } from '../lib/types'
import { keys } from '../lib/keys'

/** Credit for one team, with a note for its ledger; one click is one grant (idempotency key). */
function Grant({ teams, initial }: { teams: AdminOrg[]; initial: string }) {
  const qc = useQueryClient()
  const [team, setTeam] = useState(initial && teams.some((t) => t.name === initial) ? initial : (teams[0]?.name ?? ''))
  const [amount, setAmount] = useState('')
  const [note, setNote] = useState('')
  const [key, setKey] = useState(() => crypto.randomUUID())
  const currency = teams.find((t) => t.name === team)?.currency ?? ''
  const grant = useMutation({
    mutationFn: () => endpoints.admin.grant(team, { amount: amount.trim(), note: note.trim() }, key),
    onSuccess: () => {
      setKey(crypto.randomUUID())
      setAmount('')
      setNote('')
      qc.invalidateQueries({ queryKey: keys.admin.orgs() })
      qc.invalidateQueries({ queryKey: keys.billing.account(team) })
    },
  })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    grant.mutate()
  }
  return (
    <form onSubmit={submit} className="card" aria-labelledby="grant-h">
      <h2 id="grant-h">Grant credit</h2>
      <div className="grid2">
        <Field label="Team">
          {(id) => (
            <select id={id} name="team" value={team} onChange={(e) => setTeam(e.target.value)}>
              {teams.map((t) => (
                <option key={t.id} value={t.name}>
                  {t.name}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label={`Amount${currency ? ` (${currency})` : ''}`} hint="Added to the balance at once; it shows in the team's ledger.">
          {(id, d) => <input id={id} name="amount" inputMode="decimal" required pattern="\d+(\.\d{1,8})?" value={amount} onChange={(e) => setAmount(e.target.value)} aria-describedby={d} />}
        </Field>
      </div>
      <Field label="Note" hint="Why: the team sees it in its ledger, after who granted it.">
        {(id, d) => <input id={id} name="note" maxLength={200} value={note} onChange={(e) => setNote(e.target.value)} aria-describedby={d} placeholder="welcome credit" />}
      </Field>
      <FormError error={grant.error} />
      {grant.isSuccess && (
        <Notice kind="success">
          <span data-testid="granted">
            Granted {money(grant.data.amount, currency)} to {team}.
          </span>
        </Notice>
      )}
      <button type="submit" disabled={grant.isPending || !team}>
        {grant.isPending ? 'Granting…' : 'Grant credit'}
      </button>
    </form>
  )
}

export default function AdminTeams() {
  const user = useUser()
  const [params] = useSearchParams()
  const q = useQuery({ queryKey: keys.admin.orgs(), queryFn: () => endpoints.admin.orgs(), enabled: !!user.data?.is_admin })
  return (
    <AdminPage title="Teams and credit">
      <QueryView q={q} what="Loading the teams">
        {(teams) =>
          teams.length === 0 ? (
            <Empty>No team yet.</Empty>
          ) : (
            <>
              <Grant teams={teams} initial={params.get('grant') ?? ''} />
              <div className="tablewrap">
                <table aria-label="Teams">
                  <thead>
                    <tr>
                      <th scope="col">Team</th>
                      <th scope="col" className="num">
                        Members
                      </th>
                      <th scope="col" className="num">
                        Balance
                      </th>
                      <th scope="col" className="num">
                        Frozen
                      </th>
                      <th scope="col" className="num">
                        Spent this month
                      </th>
                      <th scope="col">Since</th>
                    </tr>
                  </thead>
                  <tbody>
                    {teams.map((t) => (
                      <tr key={t.id} data-team={t.name}>
                        <td>
                          <Link to={`/orgs/${seg(t.name)}`}>{t.name}</Link>
                        </td>
                        <td className="num">{t.members}</td>
                        <td className="num" data-testid="team-balance">
                          {money(t.balance, t.currency)}
                        </td>
                        <td className="num">{money(t.frozen, t.currency)}</td>
                        <td className="num">{money(t.month_spent, t.currency)}</td>
                        <td>{day(t.created_at)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </>
          )
        }
      </QueryView>
    </AdminPage>
  )
}
