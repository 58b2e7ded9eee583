import { bySeverity, excerptText, place, type Diagnostic } from '../lib/diagnostics'
import { CLI_DOWNLOAD } from '../lib/downloads'

/**
 * A build's .cnb.yml findings as `nimbus lint` prints them: each with its place, the lines it
 * points at and a caret, and the hint ("did you mean …") when there is one.
 */
export function Diagnostics({ ds, failed }: { ds: Diagnostic[]; failed: boolean }) {
  if (ds.length === 0) return null
  const errors = ds.filter((d) => d.severity === 'error').length
  const warnings = ds.filter((d) => d.severity === 'warning').length
  const advice = ds.length - errors - warnings
  const counted = (n: number, one: string, many: string) => (n === 1 ? `1 ${one}` : `${n} ${many}`)
  // Only what is there is named, and the box is orange only for warnings: one info note read
  // ".cnb.yml has 0 warnings and advice" in a warning box.
  const title = failed
    ? `.cnb.yml has ${counted(errors, 'error', 'errors')}: nothing ran`
    : warnings === 0
      ? `Advice on .cnb.yml (${counted(advice, 'note', 'notes')})`
      : `.cnb.yml has ${counted(warnings, 'warning', 'warnings')}${advice > 0 ? ` and ${counted(advice, 'note', 'notes')} of advice` : ''}`
  const box = failed ? 'error diagnostics' : warnings > 0 ? 'notice warn diagnostics' : 'notice info diagnostics'
  return (
    <section className={box} role={failed ? 'alert' : undefined} aria-labelledby="diag-h">
      <h2 id="diag-h">{title}</h2>
      <ul className="list">
        {bySeverity(ds).map((d, i) => (
          <li key={i} data-severity={d.severity}>
            <div>
              <code>{place(d)}</code> <strong>{d.severity}</strong>: {d.message}
            </div>
            {d.excerpt && <pre className="code excerpt">{excerptText(d)}</pre>}
            {d.hint && <p className="hint">{/^did you mean/i.test(d.hint) ? d.hint.replace(/^did/, 'Did') : `Hint: ${d.hint}`}</p>}
          </li>
        ))}
      </ul>
      <p className="muted">
        Check the file before you push with <code>nimbus lint</code>: it prints the same.{' '}
        <a href={CLI_DOWNLOAD} download="nimbus" data-testid="cli-download">
          Download the nimbus CLI (Linux, x86-64)
        </a>
        .
      </p>
    </section>
  )
}
