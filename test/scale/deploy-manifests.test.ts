/**
 * The deployment files parse and wire the gateway as docs/operations.md says: Postgres and Redis
 * by URL, every core (GATEWAY_WORKERS=auto), health and readiness probes on the gateway's own
 * endpoints, a stop grace longer than the drain, one instance id per pod.
 */
import { describe, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dir, "..", "..")
const parse = (path: string) => Bun.YAML.parse(readFileSync(join(root, path), "utf8")) as unknown

// Parsed YAML, read field by field with expectations on each.
type Loose = any

describe("deploy/compose.yaml", () => {
  const compose = parse("deploy/compose.yaml") as Loose

  test("the gateway with Postgres and Valkey, started after both are healthy", () => {
    expect(Object.keys(compose.services).sort()).toEqual(["gateway", "postgres", "valkey"])
    const gateway = compose.services.gateway
    expect(gateway.environment.DATABASE_URL).toStartWith("postgres://")
    expect(gateway.environment.REDIS_URL).toBe("redis://valkey:6379")
    expect(gateway.environment.GATEWAY_WORKERS).toBe("auto")
    expect(gateway.depends_on.postgres.condition).toBe("service_healthy")
    expect(gateway.depends_on.valkey.condition).toBe("service_healthy")
    expect(gateway.build.dockerfile).toBe("deploy/Dockerfile")
    // Longer than the 30 s drain.
    expect(Number.parseInt(gateway.stop_grace_period, 10)).toBeGreaterThan(30)
  })
})

describe("deploy/kubernetes/gateway.yaml", () => {
  const docs = Bun.YAML.parse(readFileSync(join(root, "deploy/kubernetes/gateway.yaml"), "utf8")) as Loose
  const list: Array<Loose> = Array.isArray(docs) ? docs : [docs]
  const deployment = list.find((d) => d.kind === "Deployment")
  const service = list.find((d) => d.kind === "Service")

  test("a Deployment and a Service that selects its pods", () => {
    expect(deployment.apiVersion).toBe("apps/v1")
    expect(service.apiVersion).toBe("v1")
    expect(service.spec.selector).toEqual(deployment.spec.template.metadata.labels)
    expect(deployment.spec.selector.matchLabels).toEqual(deployment.spec.template.metadata.labels)
    expect(service.spec.ports[0].targetPort).toBe(deployment.spec.template.spec.containers[0].ports[0].name)
  })

  test("probes on /v1/ready and /v1/health, a drain shorter than the grace period, one instance id per pod", () => {
    const pod = deployment.spec.template.spec
    const container = pod.containers[0]
    expect(container.readinessProbe.httpGet.path).toBe("/v1/ready")
    expect(container.livenessProbe.httpGet.path).toBe("/v1/health")
    const env = Object.fromEntries(container.env.map((e: Loose) => [e.name, e.value ?? e.valueFrom]))
    expect(Number(env.GATEWAY_SHUTDOWN_GRACE_MS) / 1000 + container.lifecycle.preStop.sleep.seconds).toBeLessThan(pod.terminationGracePeriodSeconds)
    expect(env.GATEWAY_INSTANCE_ID).toEqual({ fieldRef: { fieldPath: "metadata.name" } })
    expect(env.GATEWAY_WORKERS).toBe("auto")
    expect(container.envFrom[0].secretRef.name).toBe("gateway")
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(0)
  })
})
