// The public API has no `any`: every exported declaration of this package,
// and everything its members take and return, is typed. Walks the types the
// package declares itself; types of dependencies are checked only where the
// package's API uses them (type arguments, unions, signatures).
import { resolve } from 'node:path';
import ts from 'typescript';

function findAny(): string[] {
  const configPath = resolve('test/tsconfig.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!parsed) throw new Error(`cannot read ${configPath}`);
  const entry = resolve('src/index.ts');
  const program = ts.createProgram([entry], { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  const moduleSymbol = source && checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error('cannot read src/index.ts');
  const ownDir = resolve('src');
  const seen = new Set<ts.Type>();
  const found: string[] = [];

  const declaredHere = (symbol: ts.Symbol): boolean =>
    (symbol.declarations ?? []).some((d) => resolve(d.getSourceFile().fileName).startsWith(ownDir));

  function visit(type: ts.Type, where: string, depth: number): void {
    if (type.flags & ts.TypeFlags.Any) {
      found.push(where);
      return;
    }
    if (depth > 6 || seen.has(type)) return;
    seen.add(type);
    if (type.isUnionOrIntersection()) type.types.forEach((t) => visit(t, where, depth + 1));
    if (type.flags & ts.TypeFlags.Object && (type as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference) {
      checker.getTypeArguments(type as ts.TypeReference).forEach((t, i) => visit(t, `${where}<${i}>`, depth + 1));
    }
    for (const info of checker.getIndexInfosOfType(type)) visit(info.type, `${where}[]`, depth + 1);
    for (const sig of [...type.getCallSignatures(), ...type.getConstructSignatures()]) {
      for (const p of sig.getParameters()) visit(checker.getTypeOfSymbol(p), `${where}(${p.name})`, depth + 1);
      visit(sig.getReturnType(), `${where}()`, depth + 1);
    }
    const symbol = type.getSymbol() ?? type.aliasSymbol;
    if (symbol && declaredHere(symbol)) {
      for (const prop of checker.getPropertiesOfType(type)) {
        if (!declaredHere(prop)) continue;
        visit(checker.getTypeOfSymbol(prop), `${where}.${prop.name}`, depth + 1);
      }
    }
  }

  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const decl = symbol.declarations?.[0];
    if (!decl) continue;
    if (symbol.flags & ts.SymbolFlags.Class) {
      visit(checker.getTypeOfSymbol(symbol), exported.name, 0);
      visit(checker.getDeclaredTypeOfSymbol(symbol), exported.name, 0);
    } else if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
      visit(checker.getDeclaredTypeOfSymbol(symbol), exported.name, 0);
    } else {
      visit(checker.getTypeOfSymbolAtLocation(symbol, decl), exported.name, 0);
    }
  }
  return found;
}

test('no exported declaration has `any` in what it takes or returns', () => {
  expect(findAny()).toEqual([]);
}, 60_000);
