// The initial-JavaScript budget of the dashboard (issue 8): the entry chunk and every chunk it
// imports statically, gzipped, must stay at or under LIMIT. Pages are lazy chunks and do not
// count. Reads Vite's manifest, prints the figure, then removes the manifest so it is not served.
import { readFileSync, rmSync } from 'node:fs'
import { gzipSync } from 'node:zlib'

const LIMIT = 300 * 1024
const dist = new URL('../dist/', import.meta.url)
const manifestURL = new URL('.vite/manifest.json', dist)
const manifest = JSON.parse(readFileSync(manifestURL, 'utf8'))

const seen = new Set()
const visit = (key) => {
  if (seen.has(key)) return
  seen.add(key)
  for (const k of manifest[key].imports ?? []) visit(k)
}
for (const [key, chunk] of Object.entries(manifest)) if (chunk.isEntry) visit(key)

let js = 0
let css = 0
const cssFiles = new Set()
const rows = []
for (const key of seen) {
  const chunk = manifest[key]
  const size = gzipSync(readFileSync(new URL(chunk.file, dist)), { level: 9 }).length
  js += size
  rows.push(`  ${chunk.file}  ${(size / 1024).toFixed(1)} KB`)
  for (const c of chunk.css ?? []) cssFiles.add(c)
}
for (const f of cssFiles) css += gzipSync(readFileSync(new URL(f, dist)), { level: 9 }).length
rmSync(new URL('.vite/', dist), { recursive: true, force: true })

console.log(`initial JS (gzip): ${(js / 1024).toFixed(1)} KB of ${LIMIT / 1024} KB allowed, in ${seen.size} chunk(s); initial CSS ${(css / 1024).toFixed(1)} KB`)
console.log(rows.join('\n'))
if (js > LIMIT) {
  console.error(`the initial JavaScript is over budget: ${(js / 1024).toFixed(1)} KB > ${LIMIT / 1024} KB gzipped; lazy-load more`)
  process.exit(1)
}
