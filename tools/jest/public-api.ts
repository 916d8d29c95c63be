// A walk of a package's public API as the TypeScript compiler sees it:
// every export, and everything reachable from it (members, parameters,
// results, type arguments). It reports where `any` appears and where a
// generated wire type (protobuf messages, OpenAPI schemas) does. Used by the
// packages' public-api tests.
import { resolve } from 'node:path';
import ts from 'typescript';

export interface Findings {
  any: string[];
  generated: string[];
}

const workspace = resolve(import.meta.dirname, '../..');
/** Where generated code lives, in source and built form, plus the runtime types it is made of. */
const generatedPaths = [`${workspace}/packages/models/`, '/@bufbuild/protobuf/', '/openapi-fetch/', '/openapi-typescript-helpers/'];
/** Types declared here are walked into: their members are part of what a user touches. */
const walkedPaths = [`${workspace}/packages/`];

/**
 * Walks what `entryFile` exports, with the compiler options of the test
 * tsconfig of the package in the current directory.
 */
export function publicApiFindings(entryFile: string): Findings {
  const configPath = resolve('test/tsconfig.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!parsed) throw new Error(`cannot read ${configPath}`);
  const program = ts.createProgram([entryFile], { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entryFile);
  const moduleSymbol = source && checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error(`cannot read ${entryFile}`);
  const seen = new Set<ts.Type>();
  const findings: Findings = { any: [], generated: [] };

  const files = (symbol: ts.Symbol | undefined): string[] =>
    (symbol?.declarations ?? []).map((d) => resolve(d.getSourceFile().fileName));
  const isGenerated = (symbol: ts.Symbol | undefined): boolean =>
    files(symbol).some((f) => generatedPaths.some((p) => f.includes(p)));
  const isWalked = (symbol: ts.Symbol | undefined): boolean =>
    files(symbol).some((f) => walkedPaths.some((p) => f.startsWith(p)) && !f.includes('/node_modules/'));
  // Members that users reach: declared in the workspace (not inherited from
  // Node's or TypeScript's own types), and neither private, protected nor `#private`.
  const isPublic = (prop: ts.Symbol): boolean => {
    const decl = prop.valueDeclaration ?? prop.declarations?.[0];
    if (!decl || !isWalked(prop)) return false;
    const name = (decl as ts.NamedDeclaration).name;
    if (name && ts.isPrivateIdentifier(name)) return false;
    return (ts.getCombinedModifierFlags(decl) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0;
  };

  function visit(type: ts.Type, where: string, depth: number): void {
    if (type.flags & ts.TypeFlags.Any) {
      findings.any.push(where);
      return;
    }
    for (const symbol of [type.aliasSymbol, type.getSymbol()]) {
      if (isGenerated(symbol)) {
        findings.generated.push(`${where}: ${checker.typeToString(type)}`);
        return;
      }
    }
    if (depth > 8 || seen.has(type)) return;
    seen.add(type);
    if (type.isUnionOrIntersection()) type.types.forEach((t) => visit(t, where, depth + 1));
    if (type.aliasTypeArguments) type.aliasTypeArguments.forEach((t, i) => visit(t, `${where}<${i}>`, depth + 1));
    if (type.flags & ts.TypeFlags.Object && (type as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference) {
      // The standard library's generics (AsyncIterable<T, TReturn = any, TNext
      // = any>, ...) default their later parameters to `any`: only the first,
      // the element type, is the package's own choice.
      const args = checker.getTypeArguments(type as ts.TypeReference);
      const fromLib = files((type as ts.TypeReference).target.getSymbol()).some((f) => f.includes('/typescript/lib/lib.'));
      (fromLib ? args.slice(0, 1) : args).forEach((t, i) => visit(t, `${where}<${i}>`, depth + 1));
    }
    for (const info of checker.getIndexInfosOfType(type)) visit(info.type, `${where}[]`, depth + 1);
    for (const sig of [...type.getCallSignatures(), ...type.getConstructSignatures()]) {
      for (const p of sig.getParameters()) visit(checker.getTypeOfSymbol(p), `${where}(${p.name})`, depth + 1);
      visit(sig.getReturnType(), `${where}()`, depth + 1);
    }
    const symbol = type.getSymbol() ?? type.aliasSymbol;
    if (symbol && (isWalked(symbol) || symbol.flags & ts.SymbolFlags.TypeLiteral)) {
      for (const prop of checker.getPropertiesOfType(type)) {
        if (!isPublic(prop)) continue;
        visit(checker.getTypeOfSymbol(prop), `${where}.${prop.name}`, depth + 1);
      }
    }
  }

  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const decl = symbol.declarations?.[0];
    if (!decl) continue;
    if (isGenerated(symbol)) findings.generated.push(exported.name);
    // A class exported as a type only offers its instances, never its constructor.
    const typeOnly = (exported.declarations ?? []).some((d) => ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly));
    if (symbol.flags & ts.SymbolFlags.Class) {
      if (!typeOnly) visit(checker.getTypeOfSymbol(symbol), exported.name, 0);
      visit(checker.getDeclaredTypeOfSymbol(symbol), exported.name, 0);
    } else if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
      visit(checker.getDeclaredTypeOfSymbol(symbol), exported.name, 0);
    } else {
      visit(checker.getTypeOfSymbolAtLocation(symbol, decl), exported.name, 0);
    }
  }
  return findings;
}
