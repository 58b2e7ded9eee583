import { renderMarkdown } from './markdown'

describe('renderMarkdown', () => {
  it('renders Markdown and drops script, handlers and raw HTML', () => {
    const html = renderMarkdown('# Model\n\n**fast** [docs](https://example.com)\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>')
    expect(html).toContain('<h1>Model</h1>')
    expect(html).toContain('<strong>fast</strong>')
    expect(html).toContain('target="_blank"')
    expect(html).toContain('rel="noopener noreferrer"')
    expect(html).not.toContain('<script')
    expect(html).not.toContain('<img')
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;') // shown as text, never markup
  })

  it('refuses javascript: links', () => {
    expect(renderMarkdown('[x](javascript:alert(1))')).not.toContain('href="javascript')
  })
})
