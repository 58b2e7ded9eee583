import { PricingPanel } from '../components/Pricing'
import { useState, type FormEvent } from 'react'
import { useParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { useRole } from '../components/Layout'
import { CopyField, Empty, Field, FormError, Notice, QueryView } from '../components/ui'
import { AgentsTable } from '../components/AgentsTable'
import { ago } from '../lib/format'
import { keys } from '../lib/keys'

// The team's own runners (bring your own hosts): who is online, what it serves and runs, and
// for admins the registration tokens and pause / resume / revoke.
export default function TeamAgents() {
  const { org = '' } = useParams()
  const qc = useQueryClient()
  const role = useRole(org)
  const manager = role === 'admin' || role === 'owner'
  const agents = useQuery({ queryKey: keys.org.agents(org), queryFn: () => endpoints.orgs.agents.list(org), refetchInterval: 5000 })
  const tokens = useQuery({ queryKey: keys.org.runnerTokens(org), queryFn: () => endpoints.orgs.runnerTokens.list(org), enabled: manager })
  const refresh = () => {
    qc.invalidateQueries({ queryKey: keys.org.agents(org) })
    qc.invalidateQueries({ queryKey: keys.org.runnerTokens(org) })
  }
  const pause = useMutation({
    mutationFn: ({ id, paused }: { id: string; paused: boolean }) => (paused ? endpoints.orgs.agents.pause(org, id) : endpoints.orgs.agents.resume(org, id)),
    onSettled: refresh,
  })
  const revoke = useMutation({ mutationFn: (id: string) => endpoints.orgs.agents.revoke(org, id), onSettled: refresh })
  const removeToken = useMutation({ mutationFn: (id: number) => endpoints.orgs.runnerTokens.remove(org, id), onSettled: refresh })
  const [name, setName] = useState('')
  const create = useMutation({
    mutationFn: () => endpoints.orgs.runnerTokens.create(org, { name }),
    onSuccess: () => {
      setName('')
      refresh()
    },
  })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    create.mutate()
  }
  const server = window.location.origin
  return (
    <section>
      <h1>Agents of {org}</h1>
      <p className="muted">
        Your team's own machines. A pipeline whose <code>runner.tags</code> names a tag outside <code>cnb:</code> (for example <code>seele-macbook</code>) runs only
        on a runner of this team with that tag; time on them is recorded in the usage and costs nothing unless the installation prices it.
      </p>
      <FormError error={pause.error ?? revoke.error ?? removeToken.error} />
      <QueryView q={agents} what="Loading runners">
        {(list) =>
          list.length === 0 ? (
            <Empty>No runner yet. {manager ? 'Make a registration token below and start nimbus-agent with it.' : 'A team admin registers one.'}</Empty>
          ) : (
            <AgentsTable
              agents={list}
              scope="team"
              actions={
                manager
                  ? (a) => (
                      <>
                        <button type="button" className="secondary small" onClick={() => pause.mutate({ id: a.id, paused: !a.paused })}>
                          {a.paused ? 'Resume' : 'Pause'}
                        </button>{' '}
                        <button type="button" className="danger small" onClick={() => confirm(`Revoke ${a.name || a.id}? It stops taking work at once.`) && revoke.mutate(a.id)}>
                          Revoke
                        </button>
                      </>
                    )
                  : undefined
              }
            />
          )
        }
      </QueryView>
      {manager && (
        <>
          <h2>Registration tokens</h2>
          {create.data?.token && (
            <Notice kind="success">
              <strong>Token “{create.data.name}” created.</strong> Copy it now: it is shown only once. Start a runner with it:
              <CopyField value={create.data.token} label="Runner token" />
              <CopyField value={`nimbus-agent --server ${server} --token ${create.data.token} --tags my-tag`} label="Start a runner" />
            </Notice>
          )}
          <form onSubmit={submit} className="card">
            <Field label="Token name" hint="Say which machines register with it, e.g. “GPU boxes in the lab”.">
              {(id, d) => <input id={id} required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={d} />}
            </Field>
            <FormError error={create.error} />
            <button type="submit" disabled={create.isPending}>
              {create.isPending ? 'Creating…' : 'Create registration token'}
            </button>
          </form>
          <QueryView q={tokens} what="Loading tokens">
            {(list) =>
              list.length === 0 ? (
                <Empty>No registration token.</Empty>
              ) : (
                <ul className="list">
                  {list.map((t) => (
                    <li key={t.id} className="row">
                      <span>
                        <strong>{t.name}</strong> <span className="muted">— {t.last_used_at ? `last used ${ago(t.last_used_at)}` : 'never used'}</span>
                      </span>
                      <button type="button" className="secondary small" onClick={() => confirm(`Delete “${t.name}”? Runners registered with it keep running.`) && removeToken.mutate(t.id)}>
                        Delete
                      </button>
                    </li>
                  ))}
                </ul>
              )
            }
          </QueryView>
        </>
      )}
      <PricingPanel />
    </section>
  )
}
