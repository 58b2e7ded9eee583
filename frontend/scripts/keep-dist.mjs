// vite empties dist/ on every build; the Go package embeds dist/ and needs it to exist in a
// fresh clone, so a committed placeholder file is put back after each build.
import { writeFileSync } from 'node:fs'
writeFileSync(new URL('../dist/.gitkeep', import.meta.url), '')
