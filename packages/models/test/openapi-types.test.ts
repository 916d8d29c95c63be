// Compiles openapi-types.check.ts with the real TypeScript compiler: the
// generated OpenAPI types must have the required fields the wire needs.
import { join } from 'node:path';
import ts from 'typescript';

test('generated OpenAPI types have the required fields of Sandbox, NewSandbox and TemplateWithBuilds', () => {
  const configPath = join(import.meta.dirname, 'tsconfig.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  expect(parsed).toBeDefined();
  const program = ts.createProgram([join(import.meta.dirname, 'openapi-types.check.ts')], { ...parsed!.options, noEmit: true });
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  expect(diagnostics).toEqual([]);
});
