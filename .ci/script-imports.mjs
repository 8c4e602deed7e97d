/**
 * `make lint-code`: every name the scripts (scripts/*.mjs, .ci/*.mjs) import exists in the module
 * they import it from. The scripts are plain JavaScript that no build compiles, so a function
 * renamed or removed in a library leaves them importing `undefined` until someone runs them
 * (`make bench` is not part of `make test`). TypeScript checks the imports against the libraries'
 * declarations (tsconfig.scripts.json, with checkJs for this check only); other type findings in
 * the scripts are not this check's business.
 */
import ts from 'typescript';

/** Cannot find module; module has no exported member (with or without a suggestion); default-import mix-ups. */
const IMPORT_ERRORS = new Set([2305, 2307, 2614, 2724]);

const config = ts.getParsedCommandLineOfConfigFile(
  'tsconfig.scripts.json',
  { checkJs: true },
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  },
);
const program = ts.createProgram(config.fileNames, config.options);
const findings = config.fileNames
  .filter((f) => /\/(scripts|\.ci)\/[^/]+\.mjs$/.test(f))
  .flatMap((f) => program.getSemanticDiagnostics(program.getSourceFile(f)))
  .filter((d) => IMPORT_ERRORS.has(d.code));
for (const d of findings) {
  const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
  console.error(`${d.file.fileName}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}
if (findings.length) {
  console.error(
    `${findings.length} import(s) of the scripts above name what their module does not export: fix the import, or the script`,
  );
  process.exit(1);
}
