/**
 * An outside project can use the kit: the package is packed (`npm pack`), installed into a
 * temporary project (the tarball unpacked as its node_modules/gateway), and one of
 * docs/testing.md's examples runs there with `bun test`, importing `gateway/testing` only. The
 * project is made under this clone's node_modules/.cache, so the dependencies the package pins
 * resolve from this clone's install (no registry is asked, nothing is linked).
 */
import { afterAll, expect, test } from "bun:test"
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dir, "..", "..")
const cache = join(root, "node_modules", ".cache")
mkdirSync(cache, { recursive: true })
const project = mkdtempSync(join(cache, "gw-kit-project-"))
afterAll(() => rmSync(project, { recursive: true, force: true }))

const run = (cmd: Array<string>, cwd: string) => {
  const done = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, GATEWAY_TEST_PG_URL: "" } })
  return { code: done.exitCode, out: `${done.stdout.toString()}${done.stderr.toString()}` }
}

test("the packed package runs docs/testing.md's application example in a project of its own", () => {
  const packed = run(["npm", "pack", "--json", "--pack-destination", project], root)
  expect(packed.code).toBe(0)
  const tarball = (JSON.parse(packed.out.slice(packed.out.indexOf("["))) as Array<{ filename: string }>)[0]?.filename as string

  const installed = join(project, "node_modules", "gateway")
  mkdirSync(installed, { recursive: true })
  expect(run(["tar", "-xzf", join(project, tarball), "-C", installed, "--strip-components=1"], project).code).toBe(0)
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "my-app", private: true, type: "module" }))
  cpSync(join(root, "test/testing/fallback.test.ts"), join(project, "fallback.test.ts"))

  const tested = run([process.execPath, "test", "--timeout", "30000", "./fallback.test.ts"], project)
  expect(tested.out).toContain("1 pass")
  expect(tested.code).toBe(0)
  // The kit came from the package, not from this clone.
  expect(readdirSync(join(installed, "src", "testing"))).toContain("index.ts")
}, 120_000)
