/**
 * An outside project can use the kit: the package is packed (`npm pack`), installed into a
 * temporary project (the tarball unpacked as node_modules/gateway, beside the dependencies it
 * pins, linked from this clone: no registry is asked), and one of docs/testing.md's examples
 * runs there with `bun test`, importing `gateway/testing` only.
 */
import { afterAll, expect, test } from "bun:test"
import { cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const root = join(import.meta.dir, "..", "..")
const project = mkdtempSync(join(tmpdir(), "gw-kit-project-"))
mkdirSync(join(project, "node_modules"))
afterAll(() => {
  // The links to this clone's dependencies go first, one by one: a recursive removal must never reach through them.
  const modules = join(project, "node_modules")
  for (const name of readdirSync(modules, { withFileTypes: true }).map((d) => d.name)) {
    const path = join(modules, name)
    if (lstatSync(path).isSymbolicLink()) unlinkSync(path)
  }
  rmSync(project, { recursive: true, force: true })
})

const run = (cmd: Array<string>, cwd: string) => {
  const done = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, GATEWAY_TEST_PG_URL: "" } })
  return { code: done.exitCode, out: `${done.stdout.toString()}${done.stderr.toString()}` }
}

test("the packed package runs docs/testing.md's application example in a project of its own", () => {
  const packed = run(["npm", "pack", "--json", "--pack-destination", project], root)
  expect(packed.code).toBe(0)
  const tarball = (JSON.parse(packed.out.slice(packed.out.indexOf("["))) as Array<{ filename: string }>)[0]?.filename as string

  const modules = join(project, "node_modules")
  const installed = join(modules, "gateway")
  mkdirSync(installed)
  expect(run(["tar", "-xzf", join(project, tarball), "-C", installed, "--strip-components=1"], project).code).toBe(0)
  // The dependencies the package pins (and the SDKs the example uses), as an install would put them beside it.
  for (const name of readdirSync(join(root, "node_modules"))) {
    if (name === "gateway" || name.startsWith(".")) continue
    symlinkSync(join(root, "node_modules", name), join(modules, name))
  }
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "my-app", private: true, type: "module" }))
  cpSync(join(root, "test/testing/fallback.test.ts"), join(project, "fallback.test.ts"))

  const tested = run([process.execPath, "test", "--timeout", "30000", "./fallback.test.ts"], project)
  expect(tested.out).toContain("1 pass")
  expect(tested.code).toBe(0)
  // The kit came from the package, not from this clone.
  expect(readdirSync(join(installed, "src", "testing"))).toContain("index.ts")
}, 120_000)
