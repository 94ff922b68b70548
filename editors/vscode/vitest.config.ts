import { defineConfig } from 'vitest/config';

// Unit tests: `vscode` resolves to the jest-mock-vscode mock in __mocks__/vscode.cts.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/protocol/**'],
  },
});
