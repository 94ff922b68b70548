// The `vscode` module for unit tests: jest-mock-vscode's mock, built on vitest's `vi`.
import { createVSCodeMock } from 'jest-mock-vscode';
import { vi } from 'vitest';

module.exports = createVSCodeMock(vi);
