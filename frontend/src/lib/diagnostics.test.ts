import { bySeverity, excerptText, place, type Diagnostic } from './diagnostics'

const d = (over: Partial<Diagnostic>): Diagnostic => ({ severity: 'error', file: '.cnb.yml', line: 4, column: 15, message: 'm', ...over })

describe('diagnostics', () => {
  it('prints the place as the linter does', () => {
    expect(place(d({}))).toBe('.cnb.yml:4:15')
    expect(place(d({ column: 0 }))).toBe('.cnb.yml:4')
    expect(place(d({ line: 0, column: 3 }))).toBe('.cnb.yml')
  })
  it('puts the caret under the column of the offending line, numbers aligned', () => {
    const text = excerptText(d({ line: 10, column: 3, excerpt: { first_line: 9, lines: ['a: 1', 'bb: 2', 'c: 3'] } }))
    expect(text).toBe('  9 | a: 1\n 10 | bb: 2\n    |   ^\n 11 | c: 3')
  })
  it('has no caret without a column, and nothing without an excerpt', () => {
    expect(excerptText(d({ line: 1, column: 0, excerpt: { first_line: 1, lines: ['x'] } }))).toBe(' 1 | x')
    expect(excerptText(d({}))).toBe('')
  })
  it('lists errors before warnings before advice', () => {
    const got = bySeverity([d({ severity: 'info', message: 'i' }), d({ severity: 'warning', message: 'w' }), d({ message: 'e' })])
    expect(got.map((x) => x.message)).toEqual(['e', 'w', 'i'])
  })
})
