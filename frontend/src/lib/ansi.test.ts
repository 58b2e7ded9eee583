import { applySGR, color256, markMatches, parseAnsi, plainText, spanProps } from './ansi'

const texts = (line: string) => parseAnsi(line).map((s) => s.text)

describe('parseAnsi', () => {
  it('keeps plain text as one span', () => {
    expect(parseAnsi('hello world')).toEqual([{ text: 'hello world', style: {} }])
    expect(parseAnsi('')).toEqual([])
  })

  it('applies and resets SGR colours and attributes', () => {
    const spans = parseAnsi('a\x1b[31mred\x1b[1;42m bold\x1b[0m plain')
    expect(spans.map((s) => [s.text, s.style])).toEqual([
      ['a', {}],
      ['red', { fg: 1 }],
      [' bold', { fg: 1, bold: true, bg: 2 }],
      [' plain', {}],
    ])
  })

  it('handles bright, 256-colour and 24-bit colours', () => {
    expect(parseAnsi('\x1b[93mx')[0].style).toEqual({ fg: 11 })
    expect(parseAnsi('\x1b[38;5;196mx')[0].style).toEqual({ fg: '#ff0000' })
    expect(parseAnsi('\x1b[48;5;4mx')[0].style).toEqual({ bg: 4 })
    expect(parseAnsi('\x1b[38;2;1;2;255mx')[0].style).toEqual({ fg: '#0102ff' })
    expect(parseAnsi('\x1b[38:5:232mx')[0].style).toEqual({ fg: '#080808' })
  })

  it('treats an empty parameter list as a reset and ignores unknown codes', () => {
    expect(parseAnsi('\x1b[31ma\x1b[mb')[1]).toEqual({ text: 'b', style: {} })
    expect(parseAnsi('\x1b[5;31ma')[0].style).toEqual({ fg: 1 })
  })

  it('drops cursor, OSC and other escapes', () => {
    expect(plainText('\x1b]0;title\x07a\x1b[2Jb\x1b(Bc\x1b[?25ld')).toBe('abcd')
    expect(plainText('\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\')).toBe('link')
  })

  it('draws carriage returns as a terminal does: overwrite from column 1', () => {
    expect(plainText('50%\r100%')).toBe('100%')
    expect(plainText('downloading 10%\rdone')).toBe('doneloading 10%')
    // The SSE stream sends \r as ESC[1G.
    expect(plainText('50%\x1b[1G100%')).toBe('100%')
    expect(plainText('abc\x1b[G\x1b[Kxy')).toBe('xy')
    expect(plainText('abcdef\rxy\x1b[K')).toBe('xy')
    // CRLF line ends are not overwrites.
    expect(plainText('windows line\r')).toBe('windows line')
  })

  it('keeps styles per cell when overwriting', () => {
    const spans = parseAnsi('\x1b[31mred red\r\x1b[32mgr')
    expect(spans.map((s) => [s.text, s.style.fg])).toEqual([
      ['gr', 2],
      ['d red', 1],
    ])
  })

  it('ignores a truncated escape at the end of a line', () => {
    expect(texts('ok\x1b[3')).toEqual(['ok'])
  })
})

describe('colours', () => {
  it('maps the 256-colour palette', () => {
    expect(color256(3)).toBe(3)
    expect(color256(16)).toBe('#000000')
    expect(color256(231)).toBe('#ffffff')
    expect(color256(255)).toBe('#eeeeee')
  })
  it('builds class names and inline styles', () => {
    expect(spanProps({ fg: 1, bold: true })).toEqual({ className: 'af1 a-b', style: undefined })
    expect(spanProps({ fg: '#123456', bg: 4 })).toEqual({ className: 'ab4', style: { color: '#123456' } })
    expect(spanProps({ fg: 2, inverse: true })).toEqual({ className: 'ab2', style: { color: 'var(--log-bg)' } })
    expect(applySGR([1, 22], {})).toEqual({})
  })
})

describe('markMatches', () => {
  it('marks every occurrence across span boundaries, ignoring case', () => {
    const parts = markMatches(parseAnsi('Err\x1b[31mor: error'), 'error')
    expect(parts.map((p) => [p.text, p.mark])).toEqual([
      ['Err', true],
      ['or', true],
      [': ', false],
      ['error', true],
    ])
  })
})
