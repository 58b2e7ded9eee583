// Markdown as the code pages show it (READMEs, pull request descriptions, comments): rendered by
// markdown-it with raw HTML off, then sanitised by DOMPurify all the same, so neither a README nor
// a comment can run script or style the page. Links open in a new tab without the opener.
import MarkdownIt from 'markdown-it'
import DOMPurify from 'dompurify'

const md = new MarkdownIt({ html: false, linkify: true, typographer: false })

/** Sanitised HTML of a Markdown text. */
export function renderMarkdown(text: string): string {
  const html = md.render(text)
  const clean = DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input'], FORBID_ATTR: ['style'] })
  const doc = new DOMParser().parseFromString(`<div>${clean}</div>`, 'text/html')
  for (const a of doc.querySelectorAll('a[href]')) {
    a.setAttribute('target', '_blank')
    a.setAttribute('rel', 'noopener noreferrer')
  }
  return doc.body.firstElementChild?.innerHTML ?? ''
}

/** Whether a file name is Markdown the page renders. */
export const isMarkdown = (path: string) => /\.(md|markdown)$/i.test(path)
