import { useState, type FormEvent } from 'react'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { keys } from '../lib/keys'
import { ago } from '../lib/format'
import { CopyField, Empty, Field, FormError, Notice, QueryView } from './ui'

/** The hosts a platform admin attaches, each with the nimbus-agent flags it needs. */
export function agentCommands(server: string, token: string): { kind: string; what: string; command: string }[] {
  const base = `nimbus-agent --server ${server} --token ${token}`
  return [
    {
      kind: 'cpu',
      what: 'A CPU host: it serves cnb:arch:amd64 (and cnb:arch:default) with the cores it has, in Docker when an engine answers.',
      command: base,
    },
    {
      kind: 'gpu',
      what: 'A GPU host: nvidia-smi finds its GPUs, and it serves cnb:arch:amd64:gpu and the model’s tag (…:gpu:L40). A GPU class has 16 cores per GPU. It takes no CPU pipelines unless you add their tags with --tags.',
      command: `${base} --gpus auto --cpus 16`,
    },
    {
      kind: 'simulated-gpu',
      what: 'A simulated GPU (no real device): to try GPU scheduling and billing on a host without one. Its jobs run on the CPU.',
      command: `${base} --gpus simulate:1:L40 --cpus 16 --name sim-gpu --work-dir ./nimbus-agent-sim-gpu`,
    },
  ]
}

/**
 * "Add an agent" on the admin Agents page: the exact start commands for a CPU, a GPU and a
 * simulated-GPU host, filled in with a registration token made here (shown once, kept hashed),
 * and the tokens with Rotate (a new token of the same name, the old one deleted) and Delete.
 */
export function AgentSetup() {
  const qc = useQueryClient()
  const tokens = useQuery({ queryKey: keys.admin.registrationTokens(), queryFn: () => endpoints.admin.registrationTokens.list() })
  const refresh = () => qc.invalidateQueries({ queryKey: keys.admin.registrationTokens() })
  const [name, setName] = useState('')
  const create = useMutation({
    mutationFn: (n: string) => endpoints.admin.registrationTokens.create({ name: n }),
    onSuccess: () => {
      setName('')
      refresh()
    },
  })
  const remove = useMutation({ mutationFn: (id: number) => endpoints.admin.registrationTokens.remove(id), onSettled: refresh })
  // Rotating: the new token first, so that there is never a moment without one.
  const rotate = useMutation({
    mutationFn: async (t: { id: number; name: string }) => {
      const made = await endpoints.admin.registrationTokens.create({ name: t.name })
      await endpoints.admin.registrationTokens.remove(t.id)
      return made
    },
    onSettled: refresh,
  })
  const fresh = rotate.data?.token ? rotate.data : create.data
  const server = window.location.origin
  const submit = (e: FormEvent) => {
    e.preventDefault()
    create.mutate(name)
  }
  return (
    <section className="card" aria-label="Add an agent">
      <h2>Add an agent</h2>
      <p className="muted">
        Build <code>nimbus-agent</code> with <code>make binaries</code> (it is <code>bin/nimbus-agent</code>), copy it to the host, and start it with a registration
        token. The agent trades the token for its own at the first start and keeps that in its work dir, so a rotated or deleted token stops only new
        registrations. The installation’s configured token (<code>NIMBUS_AGENT_REGISTRATION_TOKEN</code>, or <code>agent-registration.token</code> in the data
        dir), which the built-in agent uses, works beside these.
      </p>
      {fresh?.token ? (
        <Notice kind="success">
          <strong>Token “{fresh.name}” created.</strong> Copy it now: it is shown only once.
          <CopyField value={fresh.token} label="Registration token" />
        </Notice>
      ) : null}
      <ul className="agent-commands">
        {agentCommands(server, fresh?.token ?? '<registration token>').map((c) => (
          <li key={c.kind} data-command={c.kind}>
            <p>{c.what}</p>
            <CopyField value={c.command} label={`Start command, ${c.kind}`} />
          </li>
        ))}
      </ul>
      {!fresh?.token && <p className="muted">Make a token below: the commands fill it in.</p>}
      <form onSubmit={submit}>
        <Field label="Token name" hint="Say which hosts register with it, e.g. “GPU hosts in rack 2”.">
          {(id, d) => <input id={id} required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={d} />}
        </Field>
        <FormError error={create.error ?? rotate.error ?? remove.error} />
        <button type="submit" disabled={create.isPending}>
          {create.isPending ? 'Creating…' : 'Create registration token'}
        </button>
      </form>
      <QueryView q={tokens} what="Loading registration tokens">
        {(list) =>
          list.length === 0 ? (
            <Empty>No registration token made here.</Empty>
          ) : (
            <ul className="list" aria-label="Registration tokens">
              {list.map((t) => (
                <li key={t.id} className="row" data-token={t.id}>
                  <span>
                    <strong>{t.name}</strong> <span className="muted">— {t.last_used_at ? `last used ${ago(t.last_used_at)}` : 'never used'}</span>
                  </span>
                  <span>
                    <button
                      type="button"
                      className="secondary small"
                      disabled={rotate.isPending}
                      onClick={() => confirm(`Rotate “${t.name}”? A new token replaces it; agents registered with it keep running.`) && rotate.mutate(t)}
                    >
                      Rotate
                    </button>{' '}
                    <button type="button" className="danger small" onClick={() => confirm(`Delete “${t.name}”? Agents registered with it keep running.`) && remove.mutate(t.id)}>
                      Delete
                    </button>
                  </span>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
    </section>
  )
}
