import { useState } from 'react'
import { useNavigate } from 'react-router'
import { useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { Field, FormError, useSubmit } from '../components/ui'
import { keys } from '../lib/keys'

export default function NewTeam() {
  const navigate = useNavigate()
  const qc = useQueryClient()
  const [name, setName] = useState('')
  const { submit, busy, error } = useSubmit(async () => {
    const o = await endpoints.orgs.create({ name })
    await qc.invalidateQueries({ queryKey: keys.orgs() })
    navigate(`/orgs/${encodeURIComponent(o.name)}`)
  })
  return (
    <section className="card narrow">
      <h1>Create a team</h1>
      <p className="muted">A team owns repos, runs their builds and pays for them from its balance. You become its owner.</p>
      <form onSubmit={submit}>
        <Field label="Team name" hint="1–39 letters, digits or -; it is part of every git URL.">
          {(id, d) => (
            <input id={id} name="team" required pattern="[A-Za-z0-9]([A-Za-z0-9\-]{0,37}[A-Za-z0-9])?" value={name} onChange={(e) => setName(e.target.value)} aria-describedby={d} />
          )}
        </Field>
        <FormError error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create team'}
        </button>
      </form>
    </section>
  )
}
