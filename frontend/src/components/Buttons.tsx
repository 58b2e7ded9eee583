import { useState } from 'react'
import { useNavigate } from 'react-router'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import type { Button } from '../lib/types'
import { repoPath } from './RepoHeader'
import { Field, FormError, useSubmit } from './ui'
import { keys } from '../lib/keys'

type Input = Button['inputs'][number]

/** The custom buttons of `.cnb/web_trigger.yml` for a branch: each opens a form of its inputs
 * and fires its web_trigger event, then shows the new build. */
export function Buttons({ org, repo, branch }: { org: string; repo: string; branch: string }) {
  const q = useQuery({ queryKey: keys.repos.buttons(org, repo, branch), queryFn: () => endpoints.repos.buttons.list(org, repo, branch), retry: false })
  const [open, setOpen] = useState<string | null>(null)
  if (q.isError) return <p className="muted">.cnb/web_trigger.yml: {q.error instanceof Error ? q.error.message : String(q.error)}</p>
  const buttons = (q.data?.buttons ?? []).filter((b) => b.allowed)
  if (buttons.length === 0) return null
  const current = buttons.find((b) => b.name === open)
  return (
    <div className="buttons" aria-label="Buttons">
      {buttons.map((b) => (
        <button key={b.name} type="button" className="secondary" data-button={b.name} title={b.description} aria-expanded={open === b.name} onClick={() => setOpen(open === b.name ? null : b.name)}>
          ▶ {b.name}
        </button>
      ))}
      {current && <PressForm key={current.name} org={org} repo={repo} branch={branch} button={current} onCancel={() => setOpen(null)} />}
    </div>
  )
}

function PressForm({ org, repo, branch, button, onCancel }: { org: string; repo: string; branch: string; button: Button; onCancel: () => void }) {
  const navigate = useNavigate()
  const qc = useQueryClient()
  const [values, setValues] = useState<Record<string, string>>(() => Object.fromEntries(button.inputs.map((i) => [i.key, i.default])))
  const set = (k: string, v: string) => setValues({ ...values, [k]: v })
  const { submit, busy, error } = useSubmit(async () => {
    const b = await endpoints.repos.buttons.press(org, repo, { branch, button: button.name, inputs: values })
    qc.invalidateQueries({ queryKey: keys.repos.builds(org, repo) })
    navigate(`${repoPath(org, repo)}/builds/${b.number}`)
  })
  return (
    <form onSubmit={submit} className="card" aria-labelledby="press-h" data-testid="press-form">
      <h2 id="press-h">{button.name}</h2>
      {button.description && <p className="muted">{button.description}</p>}
      {button.inputs.map((in_) => (
        <Field key={in_.key} label={in_.name || in_.key} hint={in_.description || undefined}>
          {(id, d) => <InputControl id={id} describedBy={d} input={in_} value={values[in_.key] ?? ''} onChange={(v) => set(in_.key, v)} />}
        </Field>
      ))}
      <FormError error={error} />
      <div className="actions">
        <button type="submit" disabled={busy} data-testid="press">
          {busy ? 'Starting…' : `Run ${button.event}`}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  )
}

function InputControl({ id, describedBy, input, value, onChange }: { id: string; describedBy?: string; input: Input; value: string; onChange: (v: string) => void }) {
  const common = { id, name: input.key, 'aria-describedby': describedBy, required: input.required }
  switch (input.type) {
    case 'textarea':
      return <textarea {...common} value={value} onChange={(e) => onChange(e.target.value)} />
    case 'switch':
      return <input {...common} required={false} type="checkbox" checked={value === 'true'} onChange={(e) => onChange(e.target.checked ? 'true' : 'false')} />
    case 'select':
      if (input.multiple) {
        const chosen = value ? value.split(';') : []
        return (
          <select {...common} multiple value={chosen} onChange={(e) => onChange([...e.target.selectedOptions].map((o) => o.value).join(';'))}>
            {input.options.map((o) => (
              <option key={o.value} value={o.value} title={o.description}>
                {o.name}
              </option>
            ))}
          </select>
        )
      }
      return (
        <select {...common} value={value} onChange={(e) => onChange(e.target.value)}>
          {!input.required && <option value="">—</option>}
          {input.options.map((o) => (
            <option key={o.value} value={o.value} title={o.description}>
              {o.name}
            </option>
          ))}
        </select>
      )
    case 'radio':
      return (
        <span role="radiogroup" id={id} aria-describedby={describedBy}>
          {input.options.map((o) => (
            <label key={o.value} className="inline">
              <input type="radio" name={input.key} value={o.value} checked={value === o.value} onChange={() => onChange(o.value)} /> {o.name}
            </label>
          ))}
        </span>
      )
  }
  return <input {...common} value={value} onChange={(e) => onChange(e.target.value)} />
}
