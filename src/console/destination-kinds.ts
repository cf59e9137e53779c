/**
 * Each destination kind's config form, derived from the kinds' own config Schemas and secret keys
 * (the registry, src/broadcast/exporters/index.ts) when the console is bundled: imported `with { type: "macro" }`, this
 * runs in Bun at build time and only its result (plain data) reaches the browser bundle, not Effect.
 */
import { SchemaAST } from "effect"
import { DESTINATION_KINDS } from "../broadcast/exporters/index.js"

export interface KindField {
  readonly name: string
  readonly required: boolean
  /** Write-only: the API returns it masked; the form never shows it. */
  readonly secret: boolean
  /** A map of header names to values (one `Name: value` per line). */
  readonly map: boolean
  /** The values a literal field takes. */
  readonly options: ReadonlyArray<string> | null
}

const literalsOf = (ast: SchemaAST.AST): Array<string> | null => {
  if (SchemaAST.isLiteral(ast)) return [String(ast.literal)]
  if (SchemaAST.isUnion(ast)) {
    const all = ast.types.map(literalsOf)
    return all.every((x) => x !== null) ? all.flat() as Array<string> : null
  }
  if (SchemaAST.isRefinement(ast) || SchemaAST.isTransformation(ast)) return literalsOf(SchemaAST.isRefinement(ast) ? ast.from : ast.to)
  return null
}

const stripUndefined = (ast: SchemaAST.AST): SchemaAST.AST =>
  SchemaAST.isUnion(ast) ? (ast.types.find((t) => !SchemaAST.isUndefinedKeyword(t)) ?? ast) : ast

export const destinationKinds = (): Record<string, ReadonlyArray<KindField>> =>
  Object.fromEntries(
    DESTINATION_KINDS.map((kind) => {
      const ast = kind.config.ast as SchemaAST.TypeLiteral
      const fields = ast.propertySignatures.map(
        (p): KindField => ({
          name: String(p.name),
          required: !p.isOptional,
          secret: kind.secretFields.includes(String(p.name)),
          map: kind.secretMaps.includes(String(p.name)),
          options: literalsOf(stripUndefined(p.type)),
        }),
      )
      return [kind.kind, fields]
    }),
  )
