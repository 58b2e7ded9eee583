import { defineConfig } from 'vitest/config'
import react from '@vitejs/plugin-react'

export default defineConfig({
  plugins: [react()],
  // Fonts stay files, never inlined into the CSS: their unicode-range then keeps them from
  // downloading on pages without their symbols.
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, manifest: true, assetsInlineLimit: (file) => (file.endsWith('.woff2') ? false : undefined) },
  // ws: the workspace terminal's WebSocket goes through the proxy too.
  server: { proxy: { '/api': { target: 'http://127.0.0.1:8080', ws: true } } },
  test: { environment: 'jsdom', globals: true },
})
