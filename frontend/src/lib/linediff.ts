// Line diffs of text the page holds (a job's script in two pipeline records), apart from the
// diff table (components/DiffView.tsx) so that a page can work one out without loading the
// syntax highlighter.

/** The sign a diff line is shown with. */
export const diffSign: Record<DiffLine['kind'], string> = { add: '+', del: '-', ctx: ' ', hunk: '', note: '' }

/** One line of a unified diff, with its numbers in the old and new file. */
export interface DiffLine {
  kind: 'hunk' | 'add' | 'del' | 'ctx' | 'note'
  text: string
  oldNo?: number
  newNo?: number
}

/**
 * The line diff of two texts (a job's script in two runs): the fewest lines deleted and added (a
 * longest common subsequence), with `context` unchanged lines around each change and a hunk row
 * for each stretch of unchanged lines left out.
 */
export function diffText(oldText: string, newText: string, context = 3): DiffLine[] {
  const split = (t: string) => (t === '' ? [] : t.split('\n'))
  const a = split(oldText)
  const b = split(newText)
  // The common ends cost nothing to match and keep the table below small.
  let pre = 0
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++
  let suf = 0
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++
  const n = a.length - pre - suf
  const m = b.length - pre - suf
  const ops: DiffLine['kind'][] = Array<DiffLine['kind']>(pre).fill('ctx')
  if (n * m <= 1_000_000) {
    // lcs[i * w + j]: the longest common subsequence of a's and b's middles from i and j on.
    const w = m + 1
    const lcs = new Uint32Array((n + 1) * w)
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--)
        lcs[i * w + j] = a[pre + i] === b[pre + j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1])
    let i = 0
    let j = 0
    while (i < n || j < m) {
      if (i < n && j < m && a[pre + i] === b[pre + j]) {
        ops.push('ctx')
        i++
        j++
      } else if (j >= m || (i < n && lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) {
        ops.push('del')
        i++
      } else {
        ops.push('add')
        j++
      }
    }
  } else {
    // Too big to match line by line in the page: all of the one, then all of the other.
    for (let i = 0; i < n; i++) ops.push('del')
    for (let j = 0; j < m; j++) ops.push('add')
  }
  for (let k = 0; k < suf; k++) ops.push('ctx')
  const all: DiffLine[] = []
  let oldNo = 1
  let newNo = 1
  for (const kind of ops) {
    if (kind === 'ctx') all.push({ kind, text: a[oldNo - 1], oldNo: oldNo++, newNo: newNo++ })
    else if (kind === 'del') all.push({ kind, text: a[oldNo - 1], oldNo: oldNo++ })
    else all.push({ kind, text: b[newNo - 1], newNo: newNo++ })
  }
  const near = all.map(() => false)
  all.forEach((l, k) => {
    if (l.kind !== 'ctx') for (let c = Math.max(0, k - context); c <= Math.min(all.length - 1, k + context); c++) near[c] = true
  })
  const out: DiffLine[] = []
  for (let k = 0; k < all.length; ) {
    if (near[k]) {
      out.push(all[k++])
      continue
    }
    let e = k
    while (e < all.length && !near[e]) e++
    out.push({ kind: 'hunk', text: `⋯ ${e - k} unchanged line${e - k === 1 ? '' : 's'}` })
    k = e
  }
  return out
}
