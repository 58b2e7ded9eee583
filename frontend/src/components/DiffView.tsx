import { type ReactNode } from 'react'
import type { CodeFile } from '../lib/types'
import { highlightLines } from '../lib/highlight'
import { diffSign, type DiffLine } from '../lib/linediff'

export type { DiffLine }

/** Parses a file's unified patch (from its first "@@") into numbered lines. */
export function parsePatch(patch: string): DiffLine[] {
  const out: DiffLine[] = []
  let oldNo = 0
  let newNo = 0
  for (const raw of patch.replace(/\n$/, '').split('\n')) {
    const h = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(raw)
    if (h) {
      oldNo = Number(h[1])
      newNo = Number(h[2])
      out.push({ kind: 'hunk', text: raw })
    } else if (raw.startsWith('+')) {
      out.push({ kind: 'add', text: raw.slice(1), newNo: newNo++ })
    } else if (raw.startsWith('-')) {
      out.push({ kind: 'del', text: raw.slice(1), oldNo: oldNo++ })
    } else if (raw.startsWith('\\')) {
      out.push({ kind: 'note', text: raw })
    } else {
      out.push({ kind: 'ctx', text: raw.slice(1), oldNo: oldNo++, newNo: newNo++ })
    }
  }
  return out
}

/**
 * Diff lines as a table, highlighted as the file at path would be. With lineAction, a new-side
 * line (added or context) gets a button, for a line comment; below renders what goes under a line
 * (its comments).
 */
export function DiffLines({
  lines,
  path,
  lineAction,
  below,
}: {
  lines: DiffLine[]
  path: string
  lineAction?: (line: number) => void
  below?: (line: number) => ReactNode
}) {
  // Highlighting needs whole text: each side's lines, highlighted as one file would be.
  const hl = highlightLines(lines.map((l) => l.text).join('\n'), path)
  return (
    <table className="diff">
      <tbody>
        {lines.map((l, i) => (
          <DiffRow key={i} l={l} html={hl[i] ?? ''} lineAction={lineAction} below={below} />
        ))}
      </tbody>
    </table>
  )
}

/**
 * A file of a diff: its header (status, counts) and its lines, highlighted. With lineAction, a
 * new-side line (added or context) gets a button, for a line comment; below renders what goes under
 * a line (its comments).
 */
export function DiffFile({
  file,
  lineAction,
  below,
}: {
  file: CodeFile
  lineAction?: (line: number) => void
  below?: (line: number) => ReactNode
}) {
  const lines = parsePatch(file.patch)
  return (
    <section className="difffile" aria-label={`Changes to ${file.path}`}>
      <header>
        <strong>{file.old_path ? `${file.old_path} → ${file.path}` : file.path}</strong> <span className="tag">{file.status.replace('_', ' ')}</span>{' '}
        <span className="adds">+{file.additions}</span> <span className="dels">−{file.deletions}</span>
      </header>
      {file.binary ? (
        <p className="muted">Binary file not shown.</p>
      ) : file.truncated ? (
        <p className="muted">This diff is too large to show here ({file.additions + file.deletions} lines changed).</p>
      ) : lines.length === 0 ? (
        <p className="muted">No content changes.</p>
      ) : (
        <DiffLines lines={lines} path={file.path} lineAction={lineAction} below={below} />
      )}
    </section>
  )
}

function DiffRow({ l, html, lineAction, below }: { l: DiffLine; html: string; lineAction?: (line: number) => void; below?: (line: number) => ReactNode }) {
  if (l.kind === 'hunk' || l.kind === 'note') {
    return (
      <tr className="hunk">
        <td colSpan={3}>{l.text}</td>
      </tr>
    )
  }
  const under = l.newNo !== undefined && l.kind !== 'del' && below ? below(l.newNo) : null
  return (
    <>
      <tr className={l.kind}>
        <td className="ln">{l.oldNo ?? ''}</td>
        <td className="ln">
          {lineAction && l.newNo !== undefined && l.kind !== 'del' ? (
            <button type="button" className="linebtn" aria-label={`Comment on line ${l.newNo}`} onClick={() => lineAction(l.newNo!)}>
              {l.newNo}
            </button>
          ) : (
            (l.newNo ?? '')
          )}
        </td>
        <td className="code">
          <span className="sign">{diffSign[l.kind]}</span>
          <span dangerouslySetInnerHTML={{ __html: html }} />
        </td>
      </tr>
      {under && (
        <tr className="under">
          <td colSpan={3}>{under}</td>
        </tr>
      )}
    </>
  )
}
