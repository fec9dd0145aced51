// ESLint flat config: typescript-eslint's type-checked rules over every TypeScript file.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import rooms from './tools/eslint/rooms.js';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'e2e/gomod/**'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  ...tseslint.configs.stylisticTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/require-await': 'error',
      '@typescript-eslint/return-await': ['error', 'in-try-catch'],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // client-node's models are classes that its own docs fill with object literals.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'Enums are not erasable syntax; use a union of string literals.' },
      ],
    },
  },
  {
    // The design map's rooms: what each folder may import (tools/eslint/rooms.js).
    files: ['lib/**/*.ts', 'cmd/**/*.ts', 'fixtures/**/*.ts'],
    plugins: { fleetcache: rooms },
    rules: { 'fleetcache/rooms': 'error' },
  },
  {
    // The library keeps neutral stats; only the manager kit speaks prom-client (DESIGN.md, issue 14).
    files: ['lib/**/*.ts'],
    ignores: ['lib/manager/**', '**/*.test.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [{ name: 'prom-client', message: 'Only lib/manager may import prom-client: the library exposes neutral stats.' }] }] },
  },
  {
    // Tests use node:test's describe/it, whose returned promises the runner itself awaits.
    files: ['**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [
        { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] },
      ] }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  { files: ['**/*.js'], ...tseslint.configs.disableTypeChecked },
);
