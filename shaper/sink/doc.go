// Package sink provides the shaper's sinks side by side: HTTPSink posts a
// job to an HTTP endpoint and maps the answer to the errors package shaper
// classifies (pushback, overload, permanent, retryable); NATSSink publishes
// it, or requests and waits for any reply; DeadLetters publishes dead
// letters. For builds a lane's sink from its spec. A lane that keeps
// records gets sinks that return the downstream's answer to each try (an
// HTTP response, a request's reply) as the Feedback's Result.
package sink
