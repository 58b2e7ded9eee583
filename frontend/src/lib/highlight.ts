// Syntax highlighting of files and diffs with highlight.js: its core and the languages AI teams'
// repositories hold (Python, YAML, shell, Dockerfiles, JSON, Go, TypeScript, …), chosen by file
// name, so the page loads a few dozen KB rather than every language. Its output is escaped text
// in spans; nothing of the file becomes markup.
import hljs from 'highlight.js/lib/core'
import bash from 'highlight.js/lib/languages/bash'
import cpp from 'highlight.js/lib/languages/cpp'
import dockerfile from 'highlight.js/lib/languages/dockerfile'
import go from 'highlight.js/lib/languages/go'
import ini from 'highlight.js/lib/languages/ini'
import javascript from 'highlight.js/lib/languages/javascript'
import json from 'highlight.js/lib/languages/json'
import markdown from 'highlight.js/lib/languages/markdown'
import python from 'highlight.js/lib/languages/python'
import rust from 'highlight.js/lib/languages/rust'
import sql from 'highlight.js/lib/languages/sql'
import typescript from 'highlight.js/lib/languages/typescript'
import xml from 'highlight.js/lib/languages/xml'
import yaml from 'highlight.js/lib/languages/yaml'

for (const [name, lang] of Object.entries({ bash, cpp, dockerfile, go, ini, javascript, json, markdown, python, rust, sql, typescript, xml, yaml })) {
  hljs.registerLanguage(name, lang)
}

const byExt: Record<string, string> = {
  py: 'python', pyi: 'python', ipynb: 'json', yml: 'yaml', yaml: 'yaml', sh: 'bash', bash: 'bash', json: 'json',
  go: 'go', js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript', ts: 'typescript', tsx: 'typescript',
  md: 'markdown', markdown: 'markdown', toml: 'ini', ini: 'ini', cfg: 'ini', c: 'cpp', h: 'cpp', cc: 'cpp', cpp: 'cpp',
  cu: 'cpp', hpp: 'cpp', rs: 'rust', sql: 'sql', html: 'xml', xml: 'xml', svg: 'xml',
}

/** The highlight.js language of a path, or '' for plain text. */
export function languageOf(path: string): string {
  const base = path.split('/').pop() ?? ''
  if (/^dockerfile/i.test(base) || /\.dockerfile$/i.test(base)) return 'dockerfile'
  if (base === '.cnb.yml' || base === 'Makefile') return base === 'Makefile' ? 'bash' : 'yaml'
  const ext = base.includes('.') ? base.split('.').pop()!.toLowerCase() : ''
  return byExt[ext] ?? ''
}

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** The lines of a file as highlighted HTML, one string a line: highlighted whole (so a docstring
 * spanning lines keeps its colour), then cut at each newline, closing the spans open there and
 * opening them again on the next line. */
export function highlightLines(text: string, path: string): string[] {
  const lang = languageOf(path)
  const body = text.replace(/\n$/, '')
  if (!lang || text.length > 512 * 1024) return body.split('\n').map(escape)
  return splitHTMLLines(hljs.highlight(body, { language: lang, ignoreIllegals: true }).value)
}

/** Cuts highlight.js output (text and <span class="…"> elements only) into lines. */
export function splitHTMLLines(html: string): string[] {
  const lines: string[] = []
  const open: string[] = []
  let cur = ''
  const tag = /<span[^>]*>|<\/span>|\n/g
  let last = 0
  for (let m = tag.exec(html); m; m = tag.exec(html)) {
    cur += html.slice(last, m.index)
    last = m.index + m[0].length
    if (m[0] === '\n') {
      lines.push(cur + '</span>'.repeat(open.length))
      cur = open.join('')
    } else if (m[0] === '</span>') {
      open.pop()
      cur += m[0]
    } else {
      open.push(m[0])
      cur += m[0]
    }
  }
  lines.push(cur + html.slice(last))
  return lines
}
