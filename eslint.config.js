// Typed lint: typescript-eslint's recommendedTypeChecked plus the strict rules that find real defects
// here: values of type `any` used unchecked (no-unsafe-*: untyped database rows, parsed JSON), checks
// that can never fail or always fail (no-unnecessary-condition), deprecated APIs (no-deprecated) and
// switches that miss a case of a union (switch-exhaustiveness-check). Type information comes from the
// workspaces' tsconfigs and the built .d.ts of the other workspaces, so it runs after `make build`
// (make lint does). The scripts (.mjs, .js) are linted too, typed through tsconfig.scripts.json.
import { defineConfig } from 'eslint/config';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const unusedVars = [
  'error',
  { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' },
];

// node:test's describe/it return promises the runner awaits itself.
const floatingPromises = [
  'error',
  {
    allowForKnownSafeCalls: [
      {
        from: 'package',
        package: 'node:test',
        name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
      },
    ],
  },
];

export default defineConfig(
  {
    ignores: ['**/dist/**', '**/node_modules/**', 'libs/protos/src/gen/**', 'libs/client/src/gen/**', '.cache/**'],
  },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': floatingPromises,
      '@typescript-eslint/no-unused-vars': unusedVars,
      '@typescript-eslint/no-unnecessary-condition': 'error',
      '@typescript-eslint/no-deprecated': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        // A `default:` that handles the rest on purpose is allowed; a switch without one must name
        // every member of the union it switches on.
        { considerDefaultExhaustiveForUnions: true },
      ],
      'no-empty': ['error', { allowEmptyCatch: false }],
      // Of recommendedTypeChecked, off: they found no defect here, only style.
      // - require-await: async methods that implement an async interface (a transport's close(), a
      //   handler that answers from memory) without awaiting anything.
      // - unbound-method: our callback types are written as methods (`{ beat(): void }`) but are plain
      //   closures; passing them on is what they are for.
      // - prefer-promise-reject-errors: rejections pass on what was caught or an AbortSignal's reason,
      //   which are the errors the caller expects.
      // - no-base-to-string: what it flags are values read by reflection (`unknown`, always scalars
      //   there) turned into rule texts, and thrown values of any kind turned into a job's last error.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
  {
    // Tests keep recommendedTypeChecked without the no-unsafe-* rules and no-unnecessary-condition:
    // they read the JSON the gateway answers (response bodies, the OpenAPI document), of any shape, and
    // assert its fields one by one (1,600 no-unsafe-* findings, none a defect); typing every body would
    // restate the API in the tests. Their conditions guard assertions on values the types already
    // promise, which is what a test checks. Typed calls go through libs/client, linted in full.
    files: ['**/*.test.ts', 'deploy/embedded/src/e2e/**', 'libs/testing/**', '**/test-support.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // Messages of failed assertions print arrays and headers as they come.
      '@typescript-eslint/restrict-template-expressions': 'off',
    },
  },
  {
    // Raw HTTP tests: the bodies they read are `any` (above).
    files: [
      'deploy/embedded/src/e2e/**',
      'services/gateway/src/gateway.e2e.test.ts',
      'services/gateway/src/openapi.test.ts',
    ],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // The scripts: plain JavaScript for Node, typed through tsconfig.scripts.json (allowJs, no checkJs),
    // so the promise rules and deprecations see the types of what they import. Their parameters and
    // parsed JSON are untyped (`any`), so the no-unsafe-* rules, which would flag every use, stay off.
    files: ['**/*.mjs', '**/*.js'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      globals: globals.node,
      parserOptions: {
        projectService: false,
        project: './tsconfig.scripts.json',
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': floatingPromises,
      '@typescript-eslint/no-unused-vars': unusedVars,
      '@typescript-eslint/no-deprecated': 'error',
      'no-empty': ['error', { allowEmptyCatch: false }],
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Inferred from untyped tuples (benchmark tables of labels, paths and bodies), their operands
      // look like objects; they print strings.
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
);
