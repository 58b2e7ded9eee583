import { defineConfig } from 'vitest/config'
import react from '@vitejs/plugin-react'

export default defineConfig({
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, manifest: true },
  // ws: the workspace terminal's WebSocket goes through the proxy too.
  server: { proxy: { '/api': { target: 'http://127.0.0.1:8080', ws: true } } },
  test: { environment: 'jsdom', globals: true },
})
