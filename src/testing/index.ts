/**
 * The gateway's test kit, the package's `./testing` entry (docs/testing.md): the gateway composed
 * in a test without a socket, a scripted upstream, the clock seam on Effect's TestClock, the
 * official SDKs bound in-process, and service-level layers over the in-memory store.
 */
export { Behaviour, type FakeAnswer, type FakeBehaviour, type FakeFailure, FakeProvider, type FakeProviderShape, type FakeToolCall, makeFakeProvider, type ReceivedCall } from "./fake-provider.js"
export { eventually, startInProcess, TEST_METRICS_TOKEN, TEST_ORIGIN, type TestClient, TestGateway, type TestGatewayOptions, type TestGatewayShape } from "./gateway.js"
export { routeDispatcher } from "./routes.js"
export { anthropicClient, openaiClient, openRouterClient } from "./sdk.js"
export { preparerOf, servicesLayer, StoreTest, testConfig } from "./stores.js"
export { bindTestClock, seamClockLayer, testClockBinding } from "./clock.js"
export { bindClock, type ClockBinding, now, realClock } from "../clock.js"
