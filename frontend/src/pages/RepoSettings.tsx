import { useEffect, useState, type FormEvent } from 'react'
import { useNavigate, useParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { ApiError, seg } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import type { DeployToken, Repo, RepoPatch } from '../lib/types'
import { deployTokenUsage } from '../lib/artifacts'
import { RepoHeader, repoPath, useRepo } from '../components/RepoHeader'
import { CopyField, Empty, Field, FormError, Notice, QueryView, RevokeButton } from '../components/ui'
import { ago, dateTime } from '../lib/format'
import { keys } from '../lib/keys'

function General({ r }: { r: Repo }) {
  const qc = useQueryClient()
  const navigate = useNavigate()
  const [form, setForm] = useState({ name: r.name, description: r.description, visibility: r.visibility, default_branch: r.default_branch, archived: r.archived })
  useEffect(() => setForm({ name: r.name, description: r.description, visibility: r.visibility, default_branch: r.default_branch, archived: r.archived }), [r])
  const save = useMutation({
    mutationFn: () => {
      const patch: RepoPatch = {}
      for (const k of Object.keys(form) as (keyof typeof form)[]) if (form[k] !== r[k]) Object.assign(patch, { [k]: form[k] })
      return endpoints.repos.update(r.org, r.name, patch)
    },
    onSuccess: (nr) => {
      qc.invalidateQueries({ queryKey: keys.org.repos(r.org) })
      qc.setQueryData(['repo', r.org, nr.name], nr)
      if (nr.name !== r.name) navigate(`${repoPath(nr.org, nr.name)}/settings`, { replace: true })
    },
  })
  const changed = (Object.keys(form) as (keyof typeof form)[]).some((k) => form[k] !== r[k])
  const submit = (e: FormEvent) => {
    e.preventDefault()
    save.mutate()
  }
  return (
    <form onSubmit={submit} className="card" aria-labelledby="general-h">
      <h2 id="general-h">General</h2>
      <div className="grid2">
        <Field label="Name">{(id) => <input id={id} required value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />}</Field>
        <Field label="Default branch">{(id) => <input id={id} required value={form.default_branch} onChange={(e) => setForm({ ...form, default_branch: e.target.value })} />}</Field>
        <Field label="Visibility">
          {(id) => (
            <select id={id} value={form.visibility} onChange={(e) => setForm({ ...form, visibility: e.target.value as Repo['visibility'] })}>
              <option value="private">Private</option>
              <option value="public">Public</option>
            </select>
          )}
        </Field>
        <Field label="Description">{(id) => <input id={id} maxLength={1000} value={form.description} onChange={(e) => setForm({ ...form, description: e.target.value })} />}</Field>
      </div>
      <label className="check">
        <input type="checkbox" checked={form.archived} onChange={(e) => setForm({ ...form, archived: e.target.checked })} /> Archived (no builds run)
      </label>
      <FormError error={save.error} />
      {save.isSuccess && !changed && <Notice kind="success">Saved.</Notice>}
      <button type="submit" disabled={!changed || save.isPending}>
        {save.isPending ? 'Saving…' : 'Save'}
      </button>
    </form>
  )
}

function Secrets({ r }: { r: Repo }) {
  const qc = useQueryClient()
  const key = keys.repos.secrets(r.org, r.name)
  const list = useQuery({ queryKey: key, queryFn: () => endpoints.repos.secrets.list(r.org, r.name) })
  const [name, setName] = useState('')
  const [value, setValue] = useState('')
  const put = useMutation({
    mutationFn: () => endpoints.repos.secrets.put(r.org, r.name, name, { value }),
    onSuccess: () => {
      setName('')
      setValue('')
      qc.invalidateQueries({ queryKey: key })
    },
  })
  const del = useMutation({ mutationFn: (n: string) => endpoints.repos.secrets.delete(r.org, r.name, n), onSuccess: () => qc.invalidateQueries({ queryKey: key }) })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    put.mutate()
  }
  return (
    <section className="card" aria-labelledby="secrets-h">
      <h2 id="secrets-h">Secrets</h2>
      <p className="muted">Jobs get secrets as environment variables, masked in logs. Values are write-only: nobody can read them back.</p>
      <FormError error={del.error} />
      <QueryView q={list} what="Loading secrets">
        {(items) =>
          items.length === 0 ? (
            <Empty>No secrets.</Empty>
          ) : (
            <ul className="list">
              {items.map((s) => (
                <li key={s.id} className="row">
                  <span>
                    <code>{s.name}</code> <span className="muted">updated {ago(s.updated_at)}</span>
                  </span>
                  <button type="button" className="danger small" onClick={() => confirm(`Delete the secret ${s.name}?`) && del.mutate(s.name)}>
                    Delete
                  </button>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      <form onSubmit={submit}>
        <div className="grid2">
          <Field label="Secret name" hint="An environment variable name; not CNB_….">
            {(id, d) => <input id={id} required pattern="[A-Za-z_][A-Za-z0-9_]*" maxLength={128} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={d} />}
          </Field>
          <Field label="Value" hint="Replaces the value if the name exists.">
            {(id, d) => <input id={id} type="password" autoComplete="off" required value={value} onChange={(e) => setValue(e.target.value)} aria-describedby={d} />}
          </Field>
        </div>
        <FormError error={put.error} />
        <button type="submit" disabled={put.isPending}>
          Save secret
        </button>
      </form>
    </section>
  )
}

function DeployTokens({ r }: { r: Repo }) {
  const qc = useQueryClient()
  const key = keys.repos.deployTokens(r.org, r.name)
  const list = useQuery({ queryKey: key, queryFn: () => endpoints.repos.deployTokens.list(r.org, r.name) })
  const [name, setName] = useState('')
  const [created, setCreated] = useState<DeployToken | null>(null)
  const create = useMutation({
    mutationFn: () => endpoints.repos.deployTokens.create(r.org, r.name, { name }),
    onSuccess: (t) => {
      setCreated(t)
      setName('')
      qc.invalidateQueries({ queryKey: key })
    },
  })
  const revoke = useMutation({ mutationFn: (id: number) => endpoints.repos.deployTokens.revoke(r.org, r.name, id), onSuccess: () => qc.invalidateQueries({ queryKey: key }) })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    create.mutate()
  }
  return (
    <section className="card" aria-labelledby="deploy-h">
      <h2 id="deploy-h">Deploy tokens</h2>
      <p className="muted">Read-only tokens of this repo and its registry, for inference services and other machines.</p>
      {created?.token && (
        <Notice kind="success">
          <p>
            <strong>Deploy token “{created.name}” created.</strong> Copy it now: it is shown only once.
          </p>
          <CopyField value={created.token} label="New deploy token" />
          <p>Use it like this (a read-only token: it downloads models and pulls images, and pushes nothing):</p>
          <pre className="code" data-testid="deploy-token-usage" tabIndex={0}>
            {deployTokenUsage(location.origin, r.clone_url, r.org, r.name, created.token)}
          </pre>
        </Notice>
      )}
      <FormError error={revoke.error} />
      <QueryView q={list} what="Loading deploy tokens">
        {(items) =>
          items.length === 0 ? (
            <Empty>No deploy tokens.</Empty>
          ) : (
            <ul className="list">
              {items.map((t) => (
                <li key={t.id} className={`row ${t.revoked_at ? 'dim' : ''}`}>
                  <span>
                    <strong>{t.name}</strong> <code>{t.prefix}…</code> <span className="muted">created {dateTime(t.created_at)}, last used {ago(t.last_used_at)}</span>
                  </span>
                  <RevokeButton token={t} onRevoke={() => revoke.mutate(t.id)} />
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      <form onSubmit={submit} className="inline">
        <Field label="Deploy token name">{(id) => <input id={id} required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />}</Field>
        <FormError error={create.error} />
        <button type="submit" disabled={create.isPending}>
          Create deploy token
        </button>
      </form>
    </section>
  )
}

function Danger({ r }: { r: Repo }) {
  const navigate = useNavigate()
  const qc = useQueryClient()
  const del = useMutation({
    mutationFn: () => endpoints.repos.delete(r.org, r.name),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: keys.org.repos(r.org) })
      navigate(`/orgs/${seg(r.org)}`)
    },
  })
  return (
    <section className="card danger-zone" aria-labelledby="danger-h">
      <h2 id="danger-h">Delete the repo</h2>
      <p>Removes its git data, builds' access, secrets and deploy tokens. This cannot be undone.</p>
      <FormError error={del.error} />
      <button type="button" className="danger" onClick={() => prompt(`Type ${r.name} to delete it`) === r.name && del.mutate()}>
        Delete {r.full_name}
      </button>
    </section>
  )
}

function PublishWebhook({ r }: { r: Repo }) {
  const qc = useQueryClient()
  const key = keys.repos.publishWebhook(r.org, r.name)
  const hook = useQuery({
    queryKey: key,
    queryFn: () => endpoints.repos.publishWebhook.get(r.org, r.name).catch((e) => (e instanceof ApiError && e.status === 404 ? null : Promise.reject(e))),
  })
  const deliveries = useQuery({ queryKey: keys.repos.webhookDeliveries(r.org, r.name), queryFn: () => endpoints.repos.publishWebhook.deliveries(r.org, r.name), refetchInterval: 5000 })
  const [url, setUrl] = useState('')
  const [secret, setSecret] = useState('')
  const save = useMutation({
    mutationFn: () => endpoints.repos.publishWebhook.set(r.org, r.name, { url }),
    onSuccess: (h) => {
      setSecret(h.secret ?? '')
      setUrl('')
      qc.invalidateQueries({ queryKey: key })
    },
  })
  const remove = useMutation({ mutationFn: () => endpoints.repos.publishWebhook.remove(r.org, r.name), onSuccess: () => qc.invalidateQueries({ queryKey: key }) })
  return (
    <section className="card" aria-labelledby="publish-h">
      <h2 id="publish-h">Publish webhook</h2>
      <p className="muted">
        Each new model version is POSTed here (package, version, files with sha256, provenance link), signed with <code>X-Nimbus-Signature: sha256=HMAC</code>, so a
        deployment can roll forward.
      </p>
      {secret && (
        <Notice kind="success">
          <p>
            <strong>Webhook set.</strong> Its signing secret is shown only once:
          </p>
          <CopyField value={secret} label="Signing secret" />
        </Notice>
      )}
      <QueryView q={hook} what="Loading the webhook">
        {(h) =>
          h ? (
            <p data-testid="publish-hook">
              Sends to <code>{h.url}</code> (set {dateTime(h.updated_at)}){' '}
              <button type="button" className="danger" onClick={() => remove.mutate()} disabled={remove.isPending}>
                Remove
              </button>
            </p>
          ) : (
            <Empty>No publish webhook.</Empty>
          )
        }
      </QueryView>
      <form
        className="inline"
        onSubmit={(e: FormEvent) => {
          e.preventDefault()
          save.mutate()
        }}
      >
        <Field label="Webhook URL">{(id) => <input id={id} required type="url" maxLength={2048} value={url} onChange={(e) => setUrl(e.target.value)} />}</Field>
        <FormError error={save.error ?? remove.error} />
        <button type="submit" disabled={save.isPending}>
          Save webhook
        </button>
      </form>
      <h3>Deliveries</h3>
      <QueryView q={deliveries} what="Loading deliveries">
        {(d) =>
          d.items.length === 0 ? (
            <Empty>None yet.</Empty>
          ) : (
            <table data-testid="publish-deliveries">
              <thead>
                <tr>
                  <th>Version</th>
                  <th>Status</th>
                  <th>Tries</th>
                  <th>Last answer</th>
                  <th>When</th>
                </tr>
              </thead>
              <tbody>
                {d.items.map((x) => (
                  <tr key={x.id}>
                    <td>
                      {x.package}/{x.version}
                    </td>
                    <td>{x.status}</td>
                    <td>{x.attempts}</td>
                    <td>{x.response_code ? x.response_code : ''} {x.error}</td>
                    <td>{x.delivered_at ? dateTime(x.delivered_at) : x.next_attempt_at ? `next try ${dateTime(x.next_attempt_at)}` : dateTime(x.created_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </QueryView>
    </section>
  )
}

export default function RepoSettings() {
  const { org = '', repo = '' } = useParams()
  const r = useRepo(org, repo)
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <h1 className="visually-hidden">Settings</h1>
      {r.data &&
        (r.data.permission !== 'admin' ? (
          <p className="error" role="alert">
            Only the team's admins and owners change a repo's settings.
          </p>
        ) : (
          <>
            <General r={r.data} />
            <Secrets r={r.data} />
            <DeployTokens r={r.data} />
            <PublishWebhook r={r.data} />
            <Danger r={r.data} />
          </>
        ))}
    </section>
  )
}
