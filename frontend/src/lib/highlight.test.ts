import { highlightLines, languageOf, splitHTMLLines } from './highlight'

describe('highlight', () => {
  it('picks the language by file name', () => {
    expect(languageOf('train.py')).toBe('python')
    expect(languageOf('.cnb.yml')).toBe('yaml')
    expect(languageOf('docker/Dockerfile.gpu')).toBe('dockerfile')
    expect(languageOf('weights.bin')).toBe('')
  })

  it('keeps a span that crosses lines inside each line', () => {
    expect(splitHTMLLines('<span class="s">"""a\nb"""</span> x\ny')).toEqual(['<span class="s">"""a</span>', '<span class="s">b"""</span> x', 'y'])
  })

  it('highlights a docstring on every line it spans, and escapes plain text', () => {
    const lines = highlightLines('def f():\n    """one\n    two"""\n', 'm.py')
    expect(lines).toHaveLength(3)
    expect(lines[2]).toContain('hljs-string')
    expect(highlightLines('<b>\n', 'notes.txt')).toEqual(['&lt;b&gt;'])
  })
})
