import { diffText } from './linediff'

describe('diffText', () => {
  it('matches the unchanged lines and numbers both sides', () => {
    expect(diffText('a\nb\nc', 'a\nB\nc\nd')).toEqual([
      { kind: 'ctx', text: 'a', oldNo: 1, newNo: 1 },
      { kind: 'del', text: 'b', oldNo: 2 },
      { kind: 'add', text: 'B', newNo: 2 },
      { kind: 'ctx', text: 'c', oldNo: 3, newNo: 3 },
      { kind: 'add', text: 'd', newNo: 4 },
    ])
  })

  it('keeps a moved line apart from the ones around it', () => {
    const kinds = diffText('x\n1\n2\n3', '1\n2\n3\nx').map((l) => `${l.kind} ${l.text}`)
    expect(kinds).toEqual(['del x', 'ctx 1', 'ctx 2', 'ctx 3', 'add x'])
  })

  it('leaves out long unchanged stretches, saying how many lines', () => {
    const old = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`)
    const now = [...old]
    now[10] = 'changed'
    const d = diffText(old.join('\n'), now.join('\n'), 2)
    expect(d[0]).toEqual({ kind: 'hunk', text: '⋯ 8 unchanged lines' })
    expect(d.filter((l) => l.kind === 'ctx').map((l) => l.oldNo)).toEqual([9, 10, 12, 13])
    expect(d[d.length - 1]).toEqual({ kind: 'hunk', text: '⋯ 7 unchanged lines' })
  })

  it('diffs against nothing when one side has no text', () => {
    expect(diffText('', 'a\nb').map((l) => l.kind)).toEqual(['add', 'add'])
    expect(diffText('a', '').map((l) => l.kind)).toEqual(['del'])
  })
})
