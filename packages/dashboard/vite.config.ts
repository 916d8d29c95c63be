// The dashboard is static files: the server serves them at /dashboard/, so
// every URL in the page is under that base.
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/dashboard/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // xterm.js and the SDK's Connect code make one bundle of about a megabyte; the page is on the server's own port.
    chunkSizeWarningLimit: 2048,
  },
});
