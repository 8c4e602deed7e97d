// Typed lint: typescript-eslint's recommended rules plus the type-aware rules that catch real
// defects here (unawaited promises, promises where callbacks are expected, `any`, unused code).
// Type information comes from the workspaces' tsconfigs and the built .d.ts of the other
// workspaces, so it runs after `make build` (make lint does).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'libs/protos/src/gen/**',
      'libs/client/src/gen/**',
      '.cache/**',
      '**/*.mjs',
      '**/*.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's describe/it return promises the runner awaits itself.
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/only-throw-error': 'error',
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          caughtErrors: 'none',
        },
      ],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  {
    // Raw HTTP tests: they read the JSON the gateway answers (response bodies, the OpenAPI
    // document), of any shape, and assert its fields one by one; typing every body would restate
    // the API in the tests. Typed calls go through libs/client, which is linted with `any` refused.
    files: [
      'deploy/embedded/src/e2e/**',
      'services/gateway/src/gateway.e2e.test.ts',
      'services/gateway/src/openapi.test.ts',
    ],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
