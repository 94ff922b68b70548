import { defineConfig } from 'vitest/config';

// The protocol-level test: drives the real Python server over stdio (see test/protocol).
export default defineConfig({
  test: {
    include: ['test/protocol/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
